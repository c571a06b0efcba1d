package store

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// BenchmarkRedisCycle is BenchmarkMemoryCycle against a real redis-server:
// open a session (with a connection's facts, as the hook gives them), set
// its status, end it cleanly, for a user whose record already holds
// presence.MaxEnded ended sessions, with the node listening to every user
// (the firehose a `presence/users/+` observer asks for), so that each
// change is also received and decoded. Beside the time per cycle it
// reports redis-server's own CPU per cycle (redis-µs/op, from
// /proc/<pid>/stat): the Lua scripts' cost, which bounds the Redis store's
// ceiling on a machine the broker shares with redis-server.
func BenchmarkRedisCycle(b *testing.B) {
	srv, c, r := benchStore(b, "b:")
	ctx := context.Background()
	if err := r.ListenAll(ctx); err != nil {
		b.Fatal(err)
	}
	conn, away, text := benchConn, presence.Away, "x"
	cycle := func() {
		s, err := r.Open(ctx, presence.OpenArgs{User: "c1", ID: "c1-d", Node: "bench", Device: "phone", TTL: time.Hour, Conn: conn})
		if err != nil {
			b.Fatal(err)
		}
		ref := presence.SessionRef{User: "c1", ID: "c1-d", Epoch: s.Epoch}
		if err := r.Update(ctx, ref, presence.Update{Status: &away, Text: &text}); err != nil {
			b.Fatal(err)
		}
		if err := r.End(ctx, presence.EndArgs{User: "c1", ID: "c1-d", Epoch: s.Epoch, Reason: presence.EndClean}); err != nil {
			b.Fatal(err)
		}
	}
	for range presence.MaxEnded {
		cycle()
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	before := cpuTicks(b, srv.PID())
	b.ResetTimer()
	for b.Loop() {
		cycle()
	}
	b.StopTimer()
	ticks := cpuTicks(b, srv.PID()) - before
	// USER_HZ is 100 on Linux: a tick is 10 ms.
	b.ReportMetric(float64(ticks)*10_000/float64(b.N), "redis-µs/op")
	// The scripts' own time, as Redis counts it: without the reading,
	// parsing and answering of the call.
	b.ReportMetric(evalshaMicros(ctx, b, c)/float64(b.N), "script-µs/op")
}

// benchConn is the connection's facts every benchmark's session opens with.
var benchConn = presence.Conn{Username: "c1", IP: "127.0.0.1", Port: 1883, Listener: "tcp", ProtoVer: 4, KeepAlive: 30, CleanStart: true}

// benchStore starts a redis-server and a Redis store of node "bench" on
// it, its keys under prefix, stopped when b ends.
func benchStore(b *testing.B, prefix string) (*redistest.Server, *redis.Client, *Redis) {
	b.Helper()
	srv := redistest.Start(b)
	c := srv.Client(b)
	r := NewRedis(RedisOptions{
		Client: c, Prefix: prefix, Node: "bench", Authoritative: []string{"desktop"},
		NodeTTL: time.Minute, Retention: time.Hour, Report: func(Event) {},
	})
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Stop)
	return srv, c, r
}

// evalshaMicros is the µs redis-server spent in EVALSHA since its stats
// were last reset (INFO commandstats): the scripts and the commands they
// call, without the network.
func evalshaMicros(ctx context.Context, b *testing.B, c *redis.Client) float64 {
	b.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	_, stats, _ := strings.Cut(info, "cmdstat_evalsha:")
	_, usec, _ := strings.Cut(stats, "usec=")
	usec, _, _ = strings.Cut(usec, ",")
	n, err := strconv.ParseFloat(usec, 64)
	if err != nil {
		b.Fatalf("commandstats: %v in %q", err, info)
	}
	return n
}

// cpuTicks is a process's user + system CPU time, in clock ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name (which may hold spaces) start at
	// the state, field 3; utime and stime are fields 14 and 15.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// BenchmarkRedisScriptParts prices the parts of a presence script on this
// machine's redis-server, beside the open, update and end scripts whole,
// so that a change in the machine's speed and a change in the scripts can
// be told apart. Each part is a script of its own, run abUsers times a
// block on a record like a user's after a while (presence.MaxEnded ended
// sessions and one live session); each op of the b.N rounds runs every
// block once, taking turns, and each figure is the median over the rounds
// of Redis's own µs per call (INFO commandstats, reset before the block:
// the Lua and the commands it calls, without the network):
//
//	floor      return 1: what any EVALSHA costs
//	common     common.lua's definitions, then return 1
//	time       one redis.call (TIME)
//	hgetall    the HGETALL of the record, as load calls it
//	load       common, then load: the HGETALL and the live sessions decoded
//	aggregate  load, then aggregate and signature (commit's derivation)
//	encode     load, then each live session encoded (stage_session)
//	spublish2  the two SPUBLISHes of a change (a 400-byte message, no
//	           listener)
//	cas        the least a write that derives nothing could do: TIME, an
//	           HGET of the version, one HSET of two fields and the two
//	           SPUBLISHes (what a store whose node derives the aggregate
//	           and Redis only checks and writes would still pay a change)
//	open, update, end  the scripts whole, for abUsers users, as in
//	           BenchmarkRedisScriptsAB
//
//	go test -run '^$' -bench RedisScriptParts -benchtime 10x ./store/
func BenchmarkRedisScriptParts(b *testing.B) {
	_, c, r := benchStore(b, "p:")
	ctx := context.Background()
	conn, away, text := benchConn, presence.Away, "x"
	const abUsers = 100
	users := make([]string, abUsers)
	for i := range users {
		users[i] = "p" + strconv.Itoa(i)
	}
	epochs := map[string]uint64{}
	open := func(user string) {
		s, err := r.Open(ctx, presence.OpenArgs{User: user, ID: user + "-d", Node: "bench", Device: "phone", TTL: time.Hour, Conn: conn})
		if err != nil {
			b.Fatal(err)
		}
		epochs[user] = s.Epoch
	}
	update := func(user string) {
		if err := r.Update(ctx, presence.SessionRef{User: user, ID: user + "-d", Epoch: epochs[user]}, presence.Update{Status: &away, Text: &text}); err != nil {
			b.Fatal(err)
		}
	}
	end := func(user string) {
		if err := r.End(ctx, presence.EndArgs{User: user, ID: user + "-d", Epoch: epochs[user], Reason: presence.EndClean}); err != nil {
			b.Fatal(err)
		}
	}
	for range presence.MaxEnded {
		for _, u := range users {
			open(u)
			update(u)
			end(u)
		}
	}
	keys := r.k.commitKeys(users[0])
	load := luaCommon + "\nlocal rec, sess = load(KEYS[1])\n"
	// cas writes a record of its own, so that the other parts read the
	// user's record as the scripts leave it.
	casKeys := append([]string{r.k.user("cas")}, keys[1:]...)
	parts := []struct {
		name, src string
		keys      []string // nil: keys
	}{
		{"floor", "return 1", nil},
		{"common", luaCommon + "\nreturn 1", nil},
		{"time", "redis.call('TIME') return 1", nil},
		{"hgetall", "redis.call('HGETALL', KEYS[1]) return 1", nil},
		{"load", load + "return 1", nil},
		{"aggregate", load + "signature(aggregate(rec, sess, {})) return 1", nil},
		{"encode", load + "for _, s in pairs(sess) do cjson.encode(s) end return 1", nil},
		{"spublish2", "redis.call('SPUBLISH', KEYS[2], ARGV[1]) redis.call('SPUBLISH', KEYS[3], ARGV[1]) return 1", nil},
		{"cas", "local t = redis.call('TIME') local v = redis.call('HGET', KEYS[1], 'v') " +
			"redis.call('HSET', KEYS[1], 'ms', t[1], 'cas', ARGV[1]) " +
			"redis.call('SPUBLISH', KEYS[2], ARGV[1]) redis.call('SPUBLISH', KEYS[3], ARGV[1]) return v and 1 or 0", casKeys},
	}
	scripts := make([]*redis.Script, len(parts))
	for i, p := range parts {
		scripts[i] = redis.NewScript(p.src)
		if err := scripts[i].Load(ctx, c).Err(); err != nil {
			b.Fatalf("%s: %v", p.name, err)
		}
	}
	msg := strings.Repeat("x", 400)
	// block runs f abUsers times and returns Redis's µs per EVALSHA.
	block := func(f func(i int)) float64 {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		for i := range abUsers {
			f(i)
		}
		return evalshaMicros(ctx, b, c) / abUsers
	}
	d := map[string][]float64{}
	b.ResetTimer()
	for range b.N {
		d["open"] = append(d["open"], block(func(i int) { open(users[i]) }))
		for j, s := range scripts {
			k := parts[j].keys
			if k == nil {
				k = keys
			}
			d[parts[j].name] = append(d[parts[j].name], block(func(int) {
				if err := s.EvalSha(ctx, c, k, msg).Err(); err != nil {
					b.Fatalf("%s: %v", parts[j].name, err)
				}
			}))
		}
		d["update"] = append(d["update"], block(func(i int) { update(users[i]) }))
		d["end"] = append(d["end"], block(func(i int) { end(users[i]) }))
	}
	b.StopTimer()
	for k, v := range d {
		sort.Float64s(v)
		b.ReportMetric(v[len(v)/2], k+"-µs")
	}
}
