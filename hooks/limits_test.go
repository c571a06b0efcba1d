package hooks

import (
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/presenced/presenced/auth"
)

// The bucket lets burst through at once, then rate a second, on an
// injected clock.
func TestBucket(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := bucket{tokens: 10}
	took := 0
	for range 30 {
		if b.take(t0, 5, 10) {
			took++
		}
	}
	if took != 10 {
		t.Fatalf("burst: took %d, want 10", took)
	}
	// 1 s later: 5 more, not 10.
	took = 0
	for range 30 {
		if b.take(t0.Add(time.Second), 5, 10) {
			took++
		}
	}
	if took != 5 {
		t.Fatalf("after 1 s: took %d, want 5", took)
	}
	// A long pause refills to the burst, never beyond.
	took = 0
	for range 30 {
		if b.take(t0.Add(time.Hour), 5, 10) {
			took++
		}
	}
	if took != 10 {
		t.Fatalf("after an hour: took %d, want 10", took)
	}
	// A clock that steps back takes nothing away and adds nothing.
	if b.take(t0, 5, 10) {
		t.Fatal("took a token from a clock stepping back")
	}
}

// The log limiter lets one line a second through and counts the rest in
// the next line.
func TestLogLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := logLimiter{every: time.Second}
	log := zerolog.New(io.Discard)
	if l.event(log, t0) == nil {
		t.Fatal("first line suppressed")
	}
	for i := range 99 {
		if l.event(log, t0.Add(time.Duration(i)*time.Millisecond)) != nil {
			t.Fatal("line let through within the second")
		}
	}
	if got := l.suppressed.Load(); got != 99 {
		t.Fatalf("suppressed %d, want 99", got)
	}
	if l.event(log, t0.Add(time.Second)) == nil || l.suppressed.Load() != 0 {
		t.Fatalf("next second: suppressed %d", l.suppressed.Load())
	}
}

func TestClientIDDenied(t *testing.T) {
	byName := NewAuth(AuthOptions{})
	byID := NewAuth(AuthOptions{Identity: IdentityRule{FromClientID: true, Separator: "/"}})
	tests := []struct {
		name   string
		a      *Auth
		client string
		id     auth.Identity
		denied bool
	}{
		{"no binding", byName, "anything", auth.Identity{User: "alice"}, false},
		{"bound client id", byName, "phone-1", auth.Identity{User: "alice", ClientID: "phone-1"}, false},
		{"other client id", byName, "phone-2", auth.Identity{User: "alice", ClientID: "phone-1"}, true},
		{"prefix", byName, "alice-7", auth.Identity{User: "alice", ClientIDPrefix: "alice-"}, false},
		{"other prefix", byName, "bob-7", auth.Identity{User: "alice", ClientIDPrefix: "alice-"}, true},
		{"client id names the user", byID, "alice/phone", auth.Identity{User: "alice"}, false},
		{"client id names another user", byID, "alice/phone", auth.Identity{User: "bob"}, true},
		{"client id names nobody", byID, "mosq-1", auth.Identity{User: "bob"}, false},
	}
	for _, tt := range tests {
		if got := tt.a.clientIDDenied(tt.client, tt.id) != ""; got != tt.denied {
			t.Errorf("%s: denied %v, want %v", tt.name, got, tt.denied)
		}
	}
}

func TestUnshared(t *testing.T) {
	for in, want := range map[string]string{
		"#": "#", "$share/g/#": "#", "$share/g/presence/users/+": "presence/users/+",
		"$share/g": "$share/g", "$SYS/x": "$SYS/x", "a/b": "a/b",
	} {
		if got := unshared(in); got != want {
			t.Errorf("unshared(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEverything(t *testing.T) {
	for f, want := range map[string]bool{
		"#": true, "+/#": true, "+/+/#": true, "+/+/+/+/#": true,
		"+": false, "+/+": false, "a/#": false, "+/a/#": false, "presence/users/+": false, "#/a": false, "": false,
	} {
		if got := everything(f); got != want {
			t.Errorf("everything(%q) = %v, want %v", f, got, want)
		}
	}
}
