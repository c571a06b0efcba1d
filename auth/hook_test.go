package auth

import "testing"

func TestClientIDDenied(t *testing.T) {
	byName := NewHook(HookOptions{})
	byID := NewHook(HookOptions{FromClientID: true, Separator: "/"})
	tests := []struct {
		name   string
		a      *Hook
		client string
		id     Identity
		denied bool
	}{
		{"no binding", byName, "anything", Identity{User: "alice"}, false},
		{"bound client id", byName, "phone-1", Identity{User: "alice", ClientID: "phone-1"}, false},
		{"other client id", byName, "phone-2", Identity{User: "alice", ClientID: "phone-1"}, true},
		{"prefix", byName, "alice-7", Identity{User: "alice", ClientIDPrefix: "alice-"}, false},
		{"other prefix", byName, "bob-7", Identity{User: "alice", ClientIDPrefix: "alice-"}, true},
		{"client id names the user", byID, "alice/phone", Identity{User: "alice"}, false},
		{"client id names another user", byID, "alice/phone", Identity{User: "bob"}, true},
		{"client id names nobody", byID, "mosq-1", Identity{User: "bob"}, false},
	}
	for _, tt := range tests {
		if got := tt.a.clientIDDenied(tt.client, tt.id) != ""; got != tt.denied {
			t.Errorf("%s: denied %v, want %v", tt.name, got, tt.denied)
		}
	}
}
