package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// BenchmarkRedisScriptsAB compares this tree's open, update and end
// scripts (A) with another version's (B: the directory
// PRESENCED_LUA_B holds its common.lua, open.lua, update.lua and
// end.lua, e.g. from git show) in one redis-server, taking turns, so that a
// noisy machine slows both alike. Each op of the b.N rounds is a block of
// abUsers calls of one script of one version, one call per user; a
// script's time is Redis's own for the block (INFO commandstats, reset
// before it): the Lua and the commands it calls, without the network. (The
// slow log, at threshold 0, also logs every command a script calls, and
// the cost of those entries was counted in the script's time.) It reports
// the median µs per call of each script of each version, and B's cycle ÷
// A's.
//
//	mkdir /tmp/b && for f in common open update end; do git show REV:store/lua/$f.lua > /tmp/b/$f.lua; done
//	PRESENCED_LUA_B=/tmp/b go test -run '^$' -bench RedisScriptsAB -benchtime 30x ./store/
func BenchmarkRedisScriptsAB(b *testing.B) {
	dir := os.Getenv("PRESENCED_LUA_B")
	if dir == "" {
		b.Skip("PRESENCED_LUA_B names the directory of the scripts to compare with")
	}
	rd := func(f string) string {
		text, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			b.Fatal(err)
		}
		return string(text)
	}
	bc := rd("common.lua")
	B := map[*redis.Script]*redis.Script{
		scriptOpen:   redis.NewScript(bc + "\n" + rd("open.lua")),
		scriptUpdate: redis.NewScript(bc + "\n" + rd("update.lua")),
		scriptEnd:    redis.NewScript(bc + "\n" + rd("end.lua")),
	}
	_, c, r := benchStore(b, "ab:")
	ctx := context.Background()
	conn, away, text := benchConn, presence.Away, "x"
	run := func(sc scriptCall, useB bool) any {
		s := sc.s
		if useB {
			s = B[sc.s]
		}
		v, err := s.Run(ctx, c, sc.keys, sc.args...).Result()
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	const abUsers = 100
	users := func(useB bool) []string {
		u := make([]string, abUsers)
		for i := range u {
			u[i] = fmt.Sprintf("%c%d", map[bool]byte{false: 'a', true: 'b'}[useB], i)
		}
		return u
	}
	epochs := map[string]uint64{}
	open := func(user string, useB bool) {
		v := run(r.openCall(presence.OpenArgs{User: user, ID: user + "-d", Node: "bench", Device: "phone", TTL: time.Hour, Conn: conn}, r.Incarnation()), useB)
		var epoch uint64
		fmt.Sscan(v.([]any)[0].(string), &epoch)
		epochs[user] = epoch
	}
	update := func(user string, useB bool) {
		ref := presence.SessionRef{User: user, ID: user + "-d", Epoch: epochs[user]}
		if run(r.updateCall(ref, presence.Update{Status: &away, Text: &text}), useB) != int64(1) {
			b.Fatalf("update of %s was stale", user)
		}
	}
	end := func(user string, useB bool) {
		if run(r.endCall(presence.EndArgs{User: user, ID: user + "-d", Epoch: epochs[user], Reason: presence.EndClean}), useB) != int64(1) {
			b.Fatalf("end of %s was stale", user)
		}
	}
	// Every user's record holds presence.MaxEnded ended sessions first,
	// as a user's does after a while.
	for _, v := range []bool{false, true} {
		for range presence.MaxEnded {
			for _, u := range users(v) {
				open(u, v)
				update(u, v)
				end(u, v)
			}
		}
	}
	// block runs op for every user of a version and returns Redis's µs per
	// call.
	block := func(op func(string, bool), useB bool) float64 {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		for _, u := range users(useB) {
			op(u, useB)
		}
		return evalshaMicros(ctx, b, c) / abUsers
	}
	d := map[string][]float64{}
	b.ResetTimer()
	for i := range b.N {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, v := range order {
			ver := map[bool]string{false: "A", true: "B"}[v]
			d["open-"+ver] = append(d["open-"+ver], block(open, v))
			d["update-"+ver] = append(d["update-"+ver], block(update, v))
			d["end-"+ver] = append(d["end-"+ver], block(end, v))
		}
	}
	b.StopTimer()
	med := map[string]float64{}
	for k, v := range d {
		sort.Float64s(v)
		med[k] = v[len(v)/2]
		b.ReportMetric(med[k], k+"-µs")
	}
	cycleA, cycleB := med["open-A"]+med["update-A"]+med["end-A"], med["open-B"]+med["update-B"]+med["end-B"]
	if cycleA > 0 {
		b.ReportMetric(cycleB/cycleA, "B/A")
	}
}
