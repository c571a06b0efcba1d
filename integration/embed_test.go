package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// examples/embed, built and run as a process: a mochi broker of its own,
// with mochi's authentication ledger and mochi's listeners, and presence
// attached. Real clients through mochi's listeners: the ledger decides who
// connects, the user is whoever it let in, presence is published, kept
// read-only beside the ledger's allow-all ACL, served by the admin API, and
// a SIGTERM ends every session as shutdown.
func TestEmbedExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs examples/embed")
	}
	bin := goBuild(t, t.TempDir(), "./examples/embed")
	mqttAddr, wsAddr, adminAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	p := binStart(t, bin, binEnv(), "-mqtt", mqttAddr, "-ws", wsAddr, "-admin", adminAddr, "-node", "embed-test")
	testkit.Wait(t, waitTimeout, "examples/embed answers", func() error {
		c, err := net.DialTimeout("tcp", mqttAddr, time.Second)
		if err != nil {
			return err
		}
		_ = c.Close()
		resp, err := http.Get("http://" + adminAddr + "/healthz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return nil
	})

	// The ledger decides: no password, a wrong one, an unknown user.
	for _, tc := range []struct{ user, pw string }{{"alice", ""}, {"alice", "wrong"}, {"mallory", "x"}} {
		var opts []connectOpt
		if tc.pw != "" {
			opts = append(opts, withPassword(tc.pw))
		}
		_, ack, err := connect5(t, ctDialTCP(t, mqttAddr), "c-"+tc.user, tc.user, opts...)
		if err == nil && ack != nil && ack.ReasonCode < 0x80 {
			t.Errorf("%s with password %q: connected", tc.user, tc.pw)
		}
	}

	obs := newObserver(t, mqttAddr, "presence/users/+", withPassword("bob-secret"), withUser("bob"))
	obs.waitStatus("bob", presence.Online) // the observer is bob: he is online too
	alice := dial5(t, mqttAddr, "alice-phone", "alice", withPassword("alice-secret"), withDevice("phone"))
	on := obs.waitStatus("alice", presence.Online)
	if len(on.Sessions) != 1 || on.Sessions[0].Node != "embed-test" || on.Sessions[0].Device != "phone" {
		t.Errorf("alice online: %+v", on)
	}
	// The ledger's access rules still hold: alice may not read bob's topics.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ack, err := alice.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "bob/inbox", QoS: 1}, {Topic: "alice/inbox", QoS: 1}}})
	if err != nil && ack == nil {
		t.Fatalf("subscribe: %v", err)
	}
	if len(ack.Reasons) != 2 || ack.Reasons[0] != rcNotAuthorized || ack.Reasons[1] != 1 {
		t.Errorf("SUBACK for bob/inbox and alice/inbox: %#v, want [0x87 0x01]", ack.Reasons)
	}
	ctSet(t, alice, `{"status":"away","text":"lunch"}`)
	away := ctNext(obs, "alice", on.Version, "away", func(p presence.Aggregate) bool { return p.Status == presence.Away })

	// The ledger allows every topic, and presence still refuses to be forged.
	if rc := alice.publish(t, "presence/users/alice", `{"status":"dnd"}`, 1, true); rc != rcNotAuthorized {
		t.Errorf("forged presence: reason %#x, want %#x", rc, rcNotAuthorized)
	}
	testkit.Wait(t, waitTimeout, "admin API serves the retained payload", func() error {
		code, body := mnGet(adminAddr, "/api/v1/users/alice")
		if code != http.StatusOK {
			return fmt.Errorf("GET: %d %s", code, body)
		}
		if raw := ctRaw(obs, "presence/users/alice"); string(body) != raw[len(raw)-1] {
			return fmt.Errorf("admin %s, retained %s", body, raw[len(raw)-1])
		}
		return nil
	})
	late := newObserver(t, mqttAddr, "presence/users/alice", withPassword("bob-secret"), withUser("bob"), withClientID("bob-late"))
	late.waitFor("alice", "snapshot", func(p presence.Aggregate) bool { return p.Version == away.Version })

	// MQTT over mochi's WebSocket listener.
	ws := dialWS(t, wsAddr, "alice-browser", "alice", withPassword("alice-secret"))
	two := ctNext(obs, "alice", away.Version, "two sessions", func(p presence.Aggregate) bool { return len(p.Sessions) == 2 })
	ws.disconnect()
	ctNext(obs, "alice", two.Version, "browser gone", func(p presence.Aggregate) bool { return len(p.Sessions) == 1 })

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\nstderr:\n%s", code, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "embed: stopped") || !strings.Contains(p.stderr.String(), "presence stopped") {
		t.Errorf("no clean stop in the log:\n%s", p.stderr)
	}
	obs.check()
	late.check()
}
