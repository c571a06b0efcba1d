package store

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// The list's cost at scale (docs/benchmarks.md). It runs only when asked:
//
//	LIST_BENCH=100000,1000000 go test ./store -run TestListScale -v -timeout 60m
//
// For each store and size it fills the store directly (the memory store's
// map; Redis's hashes, pipelined, in the layout of lua/common.lua): half
// the users online on one of three nodes, half offline. Then, three times
// each, it times a whole walk in pages of 1000 and single filtered pages,
// and reports the medians, the heap allocated per page and the largest
// heap seen after a page over the heap before the walk.
func TestListScale(t *testing.T) {
	env := os.Getenv("LIST_BENCH")
	if env == "" {
		t.Skip("LIST_BENCH=<sizes> runs it")
	}
	var sizes []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		t.Run(fmt.Sprintf("memory/%d", n), func(t *testing.T) {
			m, _, _ := newTestStore()
			fillDirect(m, n)
			scale(t, m, n)
		})
		t.Run(fmt.Sprintf("redis/%d", n), func(t *testing.T) {
			srv := redistest.Start(t)
			c := srv.Client(t)
			r, _ := newRedisStore(t, c, "n1")
			start := time.Now()
			fillRedis(t, c, r.k, n)
			t.Logf("filled %d users in %v; redis used_memory %d MB", n, time.Since(start).Round(time.Millisecond), srv.Info(t, "used_memory")>>20)
			scale(t, r, n)
		})
	}
}

// fillRedis writes n user records straight into Redis, as fillDirect does
// into memory.
func fillRedis(t *testing.T, c redis.UniversalClient, k keys, n int) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	ms := strconv.FormatInt(now, 10)
	for from := 0; from < n; from += 5000 {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := from; i < min(from+5000, n); i++ {
				name := fmt.Sprintf("user%07d", i)
				f := []any{"name", name, "e", "1", "v", "1", "tx", "", "since", ms}
				if i%2 == 0 {
					s := fmt.Sprintf(`{"id":"%s-c","e":"1","n":"n%d","i":"x","d":"","st":"online","tx":"","c":%d,"rn":%d,"x":%d}`, name, i%3, now, now, now+3600000)
					f = append(f, "st", "online", "ls", "", "s:"+name+"-c", s)
				} else {
					f = append(f, "st", "offline", "ls", ms)
				}
				p.HSet(ctx, k.user(name), f...)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"user0000000", "user0000001"} {
		if ps, err := (&Redis{c: c, k: k}).aggregates(ctx, []string{u}); err != nil || len(ps) != 1 || ps[0].Version == 0 {
			t.Fatalf("%s does not decode: %v", u, err)
		}
	}
}

// heapNow is the live heap and the bytes allocated so far.
func heapNow() (live, total uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.TotalAlloc
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func scale(t *testing.T, s Store, n int) {
	ctx := context.Background()
	var walks, filtered, empty []time.Duration
	var perPage, peak uint64
	for range 3 {
		runtime.GC()
		base, total0 := heapNow()
		var top uint64
		start := time.Now()
		q := presence.ListQuery{Limit: 1000}
		users, pages := 0, 0
		for {
			page, err := s.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			users += len(page.Users)
			pages++
			if live, _ := heapNow(); live > base && live-base > top {
				top = live - base
			}
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
		walks = append(walks, time.Since(start))
		_, total1 := heapNow()
		perPage, peak = (total1-total0)/uint64(pages), max(peak, top)
		if users < n {
			t.Fatalf("walk met %d of %d users", users, n)
		}

		start = time.Now()
		page, err := s.List(ctx, presence.ListQuery{Limit: 1000, Statuses: []presence.Status{presence.Online}, Node: "n1"})
		filtered = append(filtered, time.Since(start))
		if err != nil || len(page.Users) == 0 {
			t.Fatalf("filtered page: %d users, %v", len(page.Users), err)
		}
		start = time.Now()
		page, err = s.List(ctx, presence.ListQuery{Limit: 1000, Statuses: []presence.Status{presence.Busy}})
		empty = append(empty, time.Since(start))
		if err != nil || len(page.Users) != 0 || page.Next == "" {
			t.Fatalf("page matching nobody: %d users, next %q, %v", len(page.Users), page.Next, err)
		}
	}
	t.Logf("RESULT n=%d walk(pages of 1000) median %v [%v]; filtered page (online on n1, 1000) median %v; page matching nobody (examines %d) median %v; allocated per page %d KB; largest heap growth during a walk %d MB",
		n, median(walks).Round(time.Millisecond), walks, median(filtered).Round(time.Microsecond), presence.ListWork, median(empty).Round(time.Microsecond), perPage>>10, peak>>20)
}
