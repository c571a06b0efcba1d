package store

import (
	"context"
	"os"
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
	srv := redistest.Start(b)
	c := srv.Client(b)
	r := NewRedis(RedisOptions{
		Client: c, Prefix: "b:", Node: "bench", Authoritative: []string{"desktop"},
		NodeTTL: time.Minute, Retention: time.Hour, Report: func(Event) {},
	})
	ctx := context.Background()
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Stop)
	if err := r.ListenAll(ctx); err != nil {
		b.Fatal(err)
	}
	conn := presence.Conn{Username: "c1", IP: "127.0.0.1", Port: 1883, Listener: "tcp", ProtoVer: 4, KeepAlive: 30, CleanStart: true}
	away, text := presence.Away, "x"
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
