package store

import (
	"context"
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// One Lua file per store operation (lua/); those of a user's record run
// with common.lua in front of them. Each file's header names its KEYS and
// ARGV. Every script of the store is one of these files.
var (
	//go:embed lua/common.lua
	luaCommon string
	//go:embed lua/open.lua
	luaOpen string
	//go:embed lua/end.lua
	luaEnd string
	//go:embed lua/update.lua
	luaUpdate string
	//go:embed lua/account.lua
	luaAccount string
	//go:embed lua/renew.lua
	luaRenew string
	//go:embed lua/reap.lua
	luaReap string
	//go:embed lua/end_node.lua
	luaEndNode string
	//go:embed lua/tombstone.lua
	luaTombstone string
	//go:embed lua/own.lua
	luaOwn string
	//go:embed lua/dormant.lua
	luaDormant string

	// The scripts below stand alone: they use nothing of common.lua.

	//go:embed lua/release_record.lua
	luaReleaseRecord string
	//go:embed lua/group.lua
	luaGroup string
	//go:embed lua/claims.lua
	luaClaims string
	//go:embed lua/lead.lua
	luaLead string
	//go:embed lua/group_open.lua
	luaGroupOpen string
	//go:embed lua/group_commit.lua
	luaGroupCommit string
)

// script runs common.lua followed by one operation through EVALSHA, falling
// back to EVAL on NOSCRIPT (redis.Script).
func script(op string) *redis.Script { return redis.NewScript(luaCommon + "\n" + op) }

var (
	scriptOpen      = script(luaOpen)
	scriptEnd       = script(luaEnd)
	scriptUpdate    = script(luaUpdate)
	scriptAccount   = script(luaAccount)
	scriptRenew     = script(luaRenew)
	scriptReap      = script(luaReap)
	scriptEndNode   = script(luaEndNode)
	scriptTombstone = script(luaTombstone)
	scriptOwn       = script(luaOwn)
	scriptDormant   = script(luaDormant)

	scriptReleaseRecord = redis.NewScript(luaReleaseRecord)
	scriptGroup         = redis.NewScript(luaGroup)
	scriptClaims        = redis.NewScript(luaClaims)
	scriptLead          = redis.NewScript(luaLead)
	scriptGroupOpen     = redis.NewScript(luaGroupOpen)
	scriptGroupCommit   = redis.NewScript(luaGroupCommit)

	// allScripts are loaded on every master at start (pipelined calls use
	// EVALSHA); the others fall back to EVAL when NOSCRIPT.
	allScripts = []*redis.Script{scriptOpen, scriptEnd, scriptUpdate, scriptAccount, scriptRenew, scriptReap, scriptEndNode, scriptTombstone, scriptOwn, scriptDormant}
)

// loadScripts loads every script on every master, so that pipelined EVALSHA
// (Renew) does not meet NOSCRIPT. Run still falls back to EVAL after a Redis
// restart.
func (r *Redis) loadScripts(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, s := range allScripts {
			if err := s.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	} else {
		err = load(ctx, r.c)
	}
	return r.fail("script load", err)
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
