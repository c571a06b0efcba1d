package presence

import (
	"testing"
	"time"
)

func BenchmarkDerive(b *testing.B) {
	rules := NewRules([]string{"desk"})
	u := withSessions(Account{Text: "hello"},
		live("c1", "phone", Online, "from phone", 1),
		live("c2", "desk", Busy, "in a call", 2),
		live("c3", "tablet", Idle, "", 3),
	)
	b.ReportAllocs()
	for b.Loop() {
		p := Derive(u, rules)
		if p.Status != Busy {
			b.Fatalf("status %s", p.Status)
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	p := samplePresence(`at lunch, back at "one"`)
	p.LastSeen = at(-time.Hour)
	buf := p.AppendJSON(nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = p.AppendJSON(buf[:0])
	}
}

func BenchmarkParseSetRequest(b *testing.B) {
	payload := []byte(`{"status":"busy","text":"in a meeting until 3","device":"desk","scope":"session"}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := ParseSetRequest(payload); err != nil {
			b.Fatal(err)
		}
	}
}
