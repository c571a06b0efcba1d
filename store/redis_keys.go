package store

import (
	"strings"
	"time"

	"github.com/presenced/presenced/presence"
)

// Key layout (P is redis.key_prefix, "presenced:" by default):
//
//	P{<user>}          hash: the user's record and live sessions (lua/common.lua)
//	P:c:{<user>}       sharded channel of the user's committed changes
//	P:s:{<t>}          sharded channel of the changes of every user of one
//	                   slot (t hashes to it; the firehose); P:s:all on a
//	                   single server
//	P:gb:{<group>}     sharded channel of a group's batches (grouplog.go)
//	P:feed             classic channel of the node announcements of nodes of
//	                   an older version (a rolling upgrade)
//	P:gfeed            classic channel of the group membership changes
//	P:deadlines{<t>}   the registry: sorted set of "<node>|<incarnation>" that
//	                   may hold sessions, by deadline (ms, Redis's clock): when
//	                   its record expires unless refreshed; t puts it in the
//	                   slot of P:nodes (no {<t>} on a single server)
//	P:nodes            set: the registry of nodes of an older version (adopted)
//	P:node:<node>      string: the node's live incarnation, with a TTL (node_ttl)
//	P:nodestate        hash: node -> its presence.NodeHistory, one JSON status a line
//	P:nodedown{<t>}    sorted set: node -> when it went down (ms), in P:nodestate's slot
//	P:lease:<name>     string: a named lease's holder, "<node>|<incarnation>", with a TTL (lease.go)
//	P:nu:<node>|<inc>{<t>}  set of users an incarnation opened sessions for,
//	                   one per slot: t hashes to the slot of the users' records
//	                   (on a single server, one set, without {<t>})
//	P:dz{<t>}          sorted set of the users of one slot that keep a dormant
//	                   session, by due time (ms; redis_dormant.go); P:dz on a
//	                   single server
//
// Every script touches only the user's hash, whose hash tag is the user name
// (one slot per user on a Redis Cluster), and open.lua also the set of its
// slot: no connect waits on a key of another slot, so the loss of one slot
// delays only the users whose records live there. The node keys are
// single-key commands outside the scripts, off the connect path.
type keys struct {
	prefix  string
	cluster bool
}

func (k keys) user(user string) string      { return k.prefix + "{" + user + "}" }
func (k keys) feed() string                 { return k.prefix + "feed" }
func (k keys) groupFeed() string            { return k.prefix + "gfeed" }
func (k keys) groups() string               { return k.prefix + "groups" }
func (k keys) groupLog(group string) string { return k.prefix + "gs:{" + group + "}" }
func (k keys) groupLeader() string          { return k.prefix + "gleader" }
func (k keys) claims(user string) string    { return k.prefix + "uc:{" + user + "}" }
func (k keys) lease(name string) string     { return k.prefix + "lease:" + name }
func (k keys) group(group string) string {
	return k.prefix + "g:{" + group + "}"
}

// The sharded channels (redis_listen.go). A user's channel has the user as
// its hash tag, a group's the group: each lives in the slot of the keys it
// tells about, so the script that commits can SPUBLISH on it.
func (k keys) userChannel(user string) string   { return k.prefix + "c:{" + user + "}" }
func (k keys) groupChannel(group string) string { return k.prefix + "gb:{" + group + "}" }

// groupOfChannel returns the group of a group's channel.
func (k keys) groupOfChannel(ch string) (string, bool) {
	rest, ok := strings.CutPrefix(ch, k.prefix+"gb:{")
	if !ok || !strings.HasSuffix(rest, "}") {
		return "", false
	}
	return rest[:len(rest)-1], true
}

// slotChannel is the firehose channel of user's slot; on a single server,
// the one channel of every change.
func (k keys) slotChannel(user string) string {
	if !k.cluster {
		return k.prefix + "s:all"
	}
	return k.prefix + "s:{" + slotTag(keySlot(k.user(user))) + "}"
}

// slotChannels lists every firehose channel: one per slot of a cluster
// (slot order), the one of a single server.
func (k keys) slotChannels() []string {
	if !k.cluster {
		return []string{k.prefix + "s:all"}
	}
	out := make([]string, slots)
	for i := range out {
		out[i] = k.prefix + "s:{" + slotTag(i) + "}"
	}
	return out
}

// commitKeys are the first KEYS of every script that commits a user's
// change (lua/common.lua): the record and the two channels it is
// published on.
func (k keys) commitKeys(user string) []string {
	return []string{k.user(user), k.userChannel(user), k.slotChannel(user)}
}

func (k keys) node(node string) string { return k.prefix + "node:" + node }

// registry is the sorted set of the incarnations that may hold sessions,
// each scored by its deadline (redis_liveness.go), in the slot of the set
// that nodes of an older version register in (scripts touch both).
func (k keys) registry() string { return k.sameSlot(k.prefix+"deadlines", k.legacyRegistry()) }

// legacyRegistry is the set of incarnations of nodes of an older version
// (adopt.lua).
func (k keys) legacyRegistry() string { return k.prefix + "nodes" }

// sameSlot returns key with a hash tag that puts it in of's slot on a
// cluster (key itself on a single server).
func (k keys) sameSlot(key, of string) string {
	if !k.cluster {
		return key
	}
	return key + "{" + slotTag(keySlot(of)) + "}"
}

// nodeStates is the hash of every node's history (node_state.lua).
func (k keys) nodeStates() string { return k.prefix + "nodestate" }

// nodesDown is the sorted set of the nodes down and since when, in the
// node states' slot.
func (k keys) nodesDown() string { return k.sameSlot(k.prefix+"nodedown", k.nodeStates()) }

// liveness is KEYS of the scripts on the registry and the older one.
func (k keys) liveness() []string { return []string{k.registry(), k.legacyRegistry()} }

// nodeUsers is the set, in user's slot, of the users incarnation member
// opened sessions for.
func (k keys) nodeUsers(member, user string) string {
	if !k.cluster {
		return k.prefix + "nu:" + member
	}
	return k.prefix + "nu:" + member + "{" + slotTag(keySlot(k.user(user))) + "}"
}

// allNodeUsers lists every set of incarnation member (one per slot on a
// cluster).
func (k keys) allNodeUsers(member string) []string {
	if !k.cluster {
		return []string{k.prefix + "nu:" + member}
	}
	out := make([]string, slots)
	for i := range out {
		out[i] = k.prefix + "nu:" + member + "{" + slotTag(i) + "}"
	}
	return out
}

// userPattern matches every user record in a SCAN.
func (k keys) userPattern() string { return globEscape(k.prefix) + "{*" }

// userOf returns the user of a user record key.
func (k keys) userOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.prefix+"{")
	if !ok || !strings.HasSuffix(rest, "}") {
		return "", false
	}
	return rest[:len(rest)-1], true
}

func member(node, inc string) string { return node + "|" + inc }

func splitMember(m string) (node, inc string, ok bool) {
	i := strings.LastIndexByte(m, '|')
	if i < 0 {
		return "", "", false
	}
	return m[:i], m[i+1:], true
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func flag(set bool) string {
	if set {
		return "1"
	}
	return "0"
}

func deref[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}

// updateArgs builds ARGV[3..8] of update.lua.
func updateArgs(u presence.Update) []any {
	return []any{
		flag(u.Status != nil), deref(u.Status),
		flag(u.Text != nil), deref(u.Text),
		flag(u.Device != nil), deref(u.Device),
	}
}

// dormantIndex is the sorted set, in user's slot, of the users that keep a
// dormant session, by due time (redis_dormant.go).
func (k keys) dormantIndex(user string) string {
	if !k.cluster {
		return k.prefix + "dz"
	}
	return k.prefix + "dz{" + slotTag(keySlot(k.user(user))) + "}"
}

// allDormantIndexes lists every dormant index (one per slot on a cluster).
func (k keys) allDormantIndexes() []string {
	if !k.cluster {
		return []string{k.prefix + "dz"}
	}
	out := make([]string, slots)
	for i := range out {
		out[i] = k.prefix + "dz{" + slotTag(i) + "}"
	}
	return out
}
