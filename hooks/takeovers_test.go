package hooks

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The battle detector, on a fake clock: what a takeover brings and which
// newcomers are refused.
func TestBattles(t *testing.T) {
	opts := BattleOptions{Takeovers: 3, Window: 10 * time.Second, Backoff: 2 * time.Second, MaxBackoff: 5 * time.Second}
	const (
		take   = "take"   // a takeover happens: want = detected/episode
		try    = "try"    // a newcomer would take over: want = refused
		expire = "expire" // Tidy: want = ids tracked
	)
	type step struct {
		at   time.Duration
		op   string
		id   string
		want string // take: "-", "battle", "episode"; try: "ok", "refused"; expire: count
	}
	s := func(at time.Duration, op, id, want string) step { return step{at, op, id, want} }
	sec := time.Second
	tests := []struct {
		name  string
		opts  BattleOptions
		steps []step
	}{
		{"one takeover is never a battle", opts, []step{
			s(0, try, "a", "ok"), s(0, take, "a", "-"), s(sec, try, "a", "ok"),
		}},
		{"takeovers spread beyond the window are no battle", opts, []step{
			s(0, take, "a", "-"), s(6*sec, take, "a", "-"), s(12*sec, take, "a", "-"), s(18*sec, take, "a", "-"),
			s(18*sec, try, "a", "ok"),
		}},
		{"n takeovers within the window start an episode; the next newcomer is refused", opts, []step{
			s(0, take, "a", "-"), s(sec, take, "a", "-"), s(2*sec, try, "a", "ok"), s(2*sec, take, "a", "episode"),
			s(2*sec+1, try, "a", "refused"), s(3*sec, try, "a", "refused"),
			s(4*sec-1, try, "a", "refused"), s(4*sec, try, "a", "ok"),
		}},
		{"other ids are not touched", opts, []step{
			s(0, take, "a", "-"), s(0, take, "a", "-"), s(0, take, "a", "episode"),
			s(sec, try, "b", "ok"), s(sec, take, "b", "-"), s(sec, try, "a", "refused"),
		}},
		{"the back-off doubles on each further battle, up to the max", opts, []step{
			s(0, take, "a", "-"), s(0, take, "a", "-"), s(0, take, "a", "episode"), // until 2s
			s(2*sec, try, "a", "ok"), s(2*sec, take, "a", "battle"), // 4s: until 6s
			s(6*sec-1, try, "a", "refused"), s(6*sec, try, "a", "ok"), s(6*sec, take, "a", "battle"), // 8s -> max 5s: until 11s
			s(11*sec-1, try, "a", "refused"), s(11*sec, take, "a", "battle"), // 5s: until 16s
			s(16*sec-1, try, "a", "refused"), s(16*sec, try, "a", "ok"),
		}},
		{"the back-off resets after a quiet window", opts, []step{
			s(0, take, "a", "-"), s(0, take, "a", "-"), s(0, take, "a", "episode"), // until 2s
			s(2*sec, take, "a", "battle"), // until 6s
			// quiet from 6s: a window later the episode is over
			s(16*sec-1, expire, "", "1"), s(16*sec, expire, "", "0"),
			s(16*sec, take, "a", "-"), s(16*sec, try, "a", "ok"),
			s(17*sec, take, "a", "-"), s(17*sec, take, "a", "episode"), s(17*sec, try, "a", "refused"),
			s(19*sec, try, "a", "ok"), // 2s again, not 8s
		}},
		{"refusals keep the episode going", opts, []step{
			s(0, take, "a", "-"), s(0, take, "a", "-"), s(0, take, "a", "episode"), // until 2s
			s(sec, try, "a", "refused"), s(2*sec, take, "a", "battle"), // until 6s
			s(5*sec, try, "a", "refused"), s(15*sec, expire, "", "1"), // last refusal 5s, until 6s: quiet from 6s
			s(15*sec, take, "a", "battle"), // still the episode: 5s (max)
			s(20*sec-1, try, "a", "refused"),
		}},
		{"outside a battle an id expires a window after its last takeover", opts, []step{
			s(0, take, "a", "-"), s(5*sec, take, "a", "-"), s(15*sec-1, expire, "", "1"), s(15*sec, expire, "", "0"),
			s(15*sec, take, "a", "-"), s(16*sec, take, "a", "-"), s(16*sec, try, "a", "ok"),
		}},
		{"the tracked ids are capped; the least recently active is evicted", BattleOptions{Takeovers: 2, Window: 10 * time.Second, Backoff: sec, MaxBackoff: sec, MaxTracked: 2}, []step{
			s(0, take, "a", "-"), s(0, take, "b", "-"), s(sec, take, "a", "episode"),
			s(sec, take, "c", "-"), // evicts b
			s(sec, expire, "", "2"), s(sec, try, "a", "refused"),
			s(sec, take, "b", "-"), // b starts again, evicting c
		}},
		{"off", BattleOptions{}, []step{
			s(0, take, "a", "-"), s(0, take, "a", "-"), s(0, take, "a", "-"), s(0, take, "a", "-"), s(0, try, "a", "ok"),
		}},
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBattles(tt.opts)
			for i, st := range tt.steps {
				now := t0.Add(st.at)
				var got string
				switch st.op {
				case take:
					v := b.takeover(st.id, "user-"+st.id, now)
					switch {
					case v.Episode:
						got = "episode"
					case v.Detected:
						got = "battle"
					default:
						got = "-"
					}
				case try:
					got = "ok"
					if b.refuse(st.id, now) {
						got = "refused"
					}
				case expire:
					got = fmt.Sprint(b.expire(now))
				}
				if got != st.want {
					t.Fatalf("step %d (%s %s at %s): got %s, want %s", i, st.op, st.id, st.at, got, st.want)
				}
			}
		})
	}
}

// The admin view: the battle's counts and refusal, and nothing once the
// episode is over; evictions are counted.
func TestBattlesList(t *testing.T) {
	b := newBattles(BattleOptions{Takeovers: 2, Window: 10 * time.Second, Backoff: time.Second, MaxBackoff: time.Minute, MaxTracked: 1})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.takeover("phone", "alice", t0)
	if v := b.takeover("phone", "alice", t0.Add(time.Second)); !v.Episode || v.InWindow != 2 {
		t.Fatalf("verdict %+v, want a new episode with 2 in the window", v)
	}
	b.refuse("phone", t0.Add(1500*time.Millisecond))
	b.refuse("phone", t0.Add(1600*time.Millisecond))
	got := b.list(t0.Add(1700 * time.Millisecond))
	want := []Battle{{ClientID: "phone", User: "alice", Since: t0.Add(time.Second), InWindow: 2, Takeovers: 2, Refused: 2,
		Backoff: "1s", Until: t0.Add(2 * time.Second)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("list = %+v, want %+v", got, want)
	}
	if got := b.list(t0.Add(12 * time.Second)); len(got) != 0 {
		t.Fatalf("list after a quiet window = %+v, want none", got)
	}
	if v := b.takeover("other", "bob", t0.Add(3*time.Second)); v.Evicted != 1 {
		t.Fatalf("verdict %+v, want 1 evicted (cap 1)", v)
	}
	if n, ev := b.tracked(); n != 1 || ev != 1 {
		t.Fatalf("tracked %d, evicted %d; want 1 and 1", n, ev)
	}
}

// A battle is logged once per episode, at warn, with the client id, the
// user and the count, however long it goes on; the counters count it.
func TestBattleLoggedOncePerEpisode(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New(Options{Log: slog.New(slog.NewJSONHandler(&buf, nil)), Now: func() time.Time { return now },
		Battle: BattleOptions{Takeovers: 3, Window: 10 * time.Second, Backoff: time.Second, MaxBackoff: 4 * time.Second}})
	for range 20 { // one takeover a second: a further battle each time the back-off ran out
		h.tookOver("phone", "alice")
		now = now.Add(time.Second)
	}
	if got := strings.Count(buf.String(), `"level":"WARN"`); got != 1 {
		t.Fatalf("%d warn lines, want 1:\n%s", got, buf.String())
	}
	for _, want := range []string{`"client":"phone"`, `"user":"alice"`, `"takeovers":3`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %s: %s", want, buf.String())
		}
	}
	if h.Stats.Battles.Load() != 1 || h.Stats.Takeovers.Load() != 20 {
		t.Errorf("battles %d, takeovers %d; want 1 and 20", h.Stats.Battles.Load(), h.Stats.Takeovers.Load())
	}
	// A quiet window ends the episode; the next battle is logged again.
	now = now.Add(time.Minute)
	for range 3 {
		h.tookOver("phone", "alice")
	}
	if got := strings.Count(buf.String(), `"level":"WARN"`); got != 2 || h.Stats.Battles.Load() != 2 {
		t.Fatalf("after a quiet window: %d warn lines, %d battles; want 2 and 2", got, h.Stats.Battles.Load())
	}
	if got := h.Battles(); len(got) != 1 || got[0].ClientID != "phone" || got[0].User != "alice" {
		t.Fatalf("Battles() = %+v", got)
	}
}
