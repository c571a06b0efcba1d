package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// BenchmarkRedisScriptsAB compares this tree's open, update and end
// scripts (A) with another version's (B: the directory
// PRESENCED_LUA_B holds its common.lua, open.lua, update.lua and
// end.lua, e.g. from git show) in one redis-server, their cycles
// alternating, so that a noisy machine slows both alike. Each script's
// time is Redis's own (SLOWLOG at threshold 0): the Lua and the commands
// it runs, without the network. It reports the median µs of each script
// of each version, and B's cycle ÷ A's.
//
//	mkdir /tmp/b && for f in common open update end; do git show REV:store/lua/$f.lua > /tmp/b/$f.lua; done
//	PRESENCED_LUA_B=/tmp/b go test -run '^$' -bench RedisScriptsAB -benchtime 3000x ./store/
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
	srv := redistest.Start(b)
	c := srv.Client(b)
	ctx := context.Background()
	r := NewRedis(RedisOptions{Client: c, Prefix: "ab:", Node: "bench", Authoritative: []string{"desktop"}, NodeTTL: time.Minute, Retention: time.Hour, Report: func(Event) {}})
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer r.Stop()
	conn := presence.Conn{Username: "c1", IP: "127.0.0.1", Port: 1883, Listener: "tcp", ProtoVer: 4, KeepAlive: 30, CleanStart: true}
	away, text := presence.Away, "x"
	name := map[string]string{}
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
	for _, s := range []*redis.Script{scriptOpen, scriptUpdate, scriptEnd} {
		for _, v := range []bool{false, true} {
			x := s
			if v {
				x = B[s]
			}
			op := map[*redis.Script]string{scriptOpen: "open", scriptUpdate: "update", scriptEnd: "end"}[s]
			name[x.Hash()] = fmt.Sprintf("%s-%v", op, map[bool]string{false: "A", true: "B"}[v])
		}
	}
	cycle := func(user string, useB bool) {
		v := run(r.openCall(presence.OpenArgs{User: user, ID: user + "-d", Node: "bench", Device: "phone", TTL: time.Hour, Conn: conn}, r.Incarnation()), useB)
		var epoch uint64
		fmt.Sscan(v.([]any)[0].(string), &epoch)
		ref := presence.SessionRef{User: user, ID: user + "-d", Epoch: epoch}
		run(r.updateCall(ref, presence.Update{Status: &away, Text: &text}), useB)
		run(r.endCall(presence.EndArgs{User: user, ID: user + "-d", Epoch: epoch, Reason: presence.EndClean}), useB)
	}
	for range 10 {
		cycle("a", false)
		cycle("b", true)
	}
	c.ConfigSet(ctx, "slowlog-max-len", strconv.Itoa(6*b.N+100))
	c.ConfigSet(ctx, "slowlog-log-slower-than", "0")
	c.Do(ctx, "SLOWLOG", "RESET")
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			cycle("a", false)
			cycle("b", true)
		} else {
			cycle("b", true)
			cycle("a", false)
		}
	}
	logs, err := c.SlowLogGet(ctx, -1).Result()
	if err != nil {
		b.Fatal(err)
	}
	d := map[string][]float64{}
	for _, l := range logs {
		if len(l.Args) > 1 && l.Args[0] == "evalsha" {
			d[name[l.Args[1]]] = append(d[name[l.Args[1]]], float64(l.Duration.Microseconds()))
		}
	}
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
