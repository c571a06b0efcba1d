package hooks

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/listener"
	"github.com/presenced/presenced/presence"
)

func TestEndReason(t *testing.T) {
	tests := []struct {
		name           string
		readErr, cause error
		want           presence.EndReason
	}{
		{"clean disconnect", nil, packets.CodeDisconnect, presence.EndClean},
		{"disconnect with will", packets.CodeDisconnectWillMessage, packets.CodeDisconnectWillMessage, presence.EndClean},
		{"keep-alive deadline", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), nil, presence.EndTimeout},
		{"eof", io.EOF, io.EOF, presence.EndNetwork},
		{"takeover beats the read error", io.EOF, packets.ErrSessionTakenOver, presence.EndTakeover},
		{"shutdown", io.EOF, packets.ErrServerShuttingDown, presence.EndShutdown},
		{"drained", errors.New("use of closed network connection"), ErrDrained, presence.EndDrain},
		{"drained while it sent DISCONNECT", nil, ErrDrained, presence.EndDrain},
		{"broker closed it", errors.New("use of closed network connection"), packets.ErrNotAuthorized, presence.EndKicked},
		{"protocol error", packets.ErrProtocolViolationSecondConnect, packets.ErrProtocolViolationSecondConnect, presence.EndKicked},
		{"slow consumer", fmt.Errorf("read: %w", listener.ErrSlowConsumer), nil, presence.EndKicked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EndReason(tt.readErr, tt.cause); got != tt.want {
				t.Fatalf("EndReason = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestIdentify(t *testing.T) {
	byName := IdentityRule{}
	byID := IdentityRule{FromClientID: true, Separator: "/"}
	tests := []struct {
		name             string
		rule             IdentityRule
		username, client string
		want             Identity
		bad              bool
	}{
		{"username", byName, "alice", "c1", Identity{User: "alice"}, false},
		{"no username is an observer", byName, "", "c1", Identity{}, false},
		{"username with slash", byName, "a/b", "c1", Identity{}, true},
		{"username with wildcard", byName, "a+", "c1", Identity{}, true},
		{"username too long", byName, strings.Repeat("x", 129), "c1", Identity{}, true},
		{"client id unusable", byName, "alice", strings.Repeat("c", 257), Identity{}, true},
		{"client id split", byID, "ignored", "bob/phone", Identity{User: "bob", Device: "phone"}, false},
		{"client id split once", byID, "", "bob/phone/2", Identity{User: "bob", Device: "phone/2"}, false},
		{"client id without separator observes", byID, "", "mosq-123", Identity{}, false},
		{"client id with empty user", byID, "", "/phone", Identity{}, true},
		{"case kept by default", byName, "Alice", "c1", Identity{User: "Alice"}, false},
		{"case folded", IdentityRule{FoldCase: true}, "ALICE", "c1", Identity{User: "alice"}, false},
		{"case folded, beyond ASCII", IdentityRule{FoldCase: true}, "ÉLODIE", "c1", Identity{User: "élodie"}, false},
		{"case folded from the client id", IdentityRule{FromClientID: true, Separator: "/", FoldCase: true}, "", "Bob/phone", Identity{User: "bob", Device: "phone"}, false},
		{"folding keeps mixed scripts refused", IdentityRule{FoldCase: true}, "Аlice", "c1", Identity{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.rule.Identify(tt.username, tt.client)
			if tt.bad != (err != nil) {
				t.Fatalf("err = %v, want bad=%v", err, tt.bad)
			}
			if tt.bad && !errors.Is(err, presence.ErrBadName) {
				t.Fatalf("err %v does not wrap ErrBadName", err)
			}
			if got != tt.want {
				t.Fatalf("Identify = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Who opens a presence session: a connection with a user, unless it is a
// service account and service accounts have none (the default).
func TestOpensSession(t *testing.T) {
	alice, nobody := Identity{User: "alice"}, Identity{}
	tests := []struct {
		name                     string
		id                       Identity
		service, serviceSessions bool
		want                     bool
	}{
		{"a person", alice, false, false, true},
		{"a person, service sessions on", alice, false, true, true},
		{"a service account", alice, true, false, false},
		{"a service account, service sessions on", alice, true, true, true},
		{"an observer", nobody, false, false, false},
		{"an observer that is a service account", nobody, true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := opensSession(tt.id, tt.service, tt.serviceSessions); got != tt.want {
				t.Fatalf("opensSession = %v, want %v", got, tt.want)
			}
		})
	}
}
