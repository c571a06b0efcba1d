package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/golang-jwt/jwt/v5"
	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// clientsWithID returns the clients of mochi's list whose client id, as
// sent, is id (the list is keyed by user-scoped ids: presence.ClientKey).
func clientsWithID(srv *mqtt.Server, id string) []*mqtt.Client {
	var out []*mqtt.Client
	for _, cl := range srv.Clients.GetAll() {
		if hooks.ClientID(cl) == id {
			out = append(out, cl)
		}
	}
	return out
}

// served reports whether the broker still serves c: a QoS 1 publish is
// acknowledged.
func served(c *client5) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.Publish(ctx, &paho.Publish{Topic: "rex/ping", QoS: 1})
	return err == nil
}

// A connection taken over must not take its successor with it: mochi
// deletes an ending clean session's client from its list by id unless it
// is marked taken over, and the newcomer marks it only after closing it
// and unsubscribing it. With many subscriptions that unsubscribing is long
// enough for the old connection to read the mark unset and then delete the
// newcomer, which the next connection with the id then never takes over:
// two connections served (TestConcurrentTakeoverKeepsOneSession saw it once
// on a loaded machine).
func TestTakeoverOfManySubscriptionsKeepsOneSession(t *testing.T) {
	n := startNode(t, func(c *configs.Config) {
		noBattleDamping(c)
		c.MQTT.MaxSubscriptions = 20_000
	})
	const filters, perPacket = 20_000, 500
	for round := range 8 {
		a := dial5(t, n.MQTTAddr(), "rex-phone", "rex")
		for i := 0; i < filters; i += perPacket {
			var subs []paho.SubscribeOptions
			for j := i; j < i+perPacket; j++ {
				subs = append(subs, paho.SubscribeOptions{Topic: fmt.Sprintf("rex/%d/%d", round, j), QoS: 1})
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			if _, err := a.Subscribe(ctx, &paho.Subscribe{Subscriptions: subs}); err != nil {
				t.Fatalf("round %d: subscribe: %v", round, err)
			}
			cancel()
		}
		b := dial5(t, n.MQTTAddr(), "rex-phone", "rex")
		c := dial5(t, n.MQTTAddr(), "rex-phone", "rex")
		testkit.Wait(t, waitTimeout, fmt.Sprintf("round %d: the first two taken over", round), func() error {
			return testkit.Why(!served(a) && !served(b), "an earlier connection still served")
		})
		if !served(c) {
			t.Fatalf("round %d: the last connection is not served", round)
		}
		if got := clientsWithID(n.Server, "rex-phone"); len(got) != 1 {
			t.Fatalf("round %d: %d clients with id rex-phone listed", round, len(got))
		}
		c.disconnect()
		testkit.Wait(t, waitTimeout, "rex-phone gone", func() error {
			return testkit.Why(len(clientsWithID(n.Server, "rex-phone")) == 0, "still listed")
		})
	}
}

func withCleanStart(clean bool) connectOpt { return func(c *paho.Connect) { c.CleanStart = clean } }
func withSessionExpiry(s uint32) connectOpt {
	return func(c *paho.Connect) {
		if c.Properties == nil {
			c.Properties = &paho.ConnectProperties{}
		}
		c.Properties.SessionExpiryInterval = &s
	}
}

// A client id is its user's. bob read alice's device id from her presence
// and, while she was offline, left a persistent session with it (Session
// Expiry 0xFFFFFFFF): alice then connects with her own id, does not inherit
// bob's session, and bob's session, under the same id string, is his and
// stays his; neither takes the other over.
func TestClientIDOfAnotherUserNeitherTakenNorBlocked(t *testing.T) {
	pwfile := filepath.Join(t.TempDir(), "passwd")
	secrets := map[string]string{"alice": "alice-Secret-1", "bob": "bob-Secret-2", "ops": "ops-Secret-3"}
	writePasswordFile(t, pwfile, secrets)
	n := startAuthNode(t, func(c *configs.Config) {
		c.Auth.PasswordFile = pwfile
		c.Presence.Observers = []string{"ops"}
		c.MQTT.MaxSessionExpiry = configs.Duration(time.Hour)
	})
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+", withUser("ops"), withPassword(secrets["ops"]))
	alice := dial5(t, n.MQTTAddr(), "alice-phone", "alice", withPassword(secrets["alice"]))
	obs.waitStatus("alice", presence.Online)
	alice.disconnect()
	obs.waitStatus("alice", presence.Offline)

	bob := dial5(t, n.MQTTAddr(), "alice-phone", "bob", withPassword(secrets["bob"]),
		withCleanStart(false), withSessionExpiry(0xFFFFFFFF))
	if got := subAck(t, bob, "bob/inbox"); got != rcGrantedQoS1 {
		t.Fatalf("bob's subscription: SUBACK %#x", got)
	}
	bob.disconnect() // his session stays, for as long as the broker keeps one
	obs.waitStatus("bob", presence.Offline)

	c, ack, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), "alice-phone", "alice", withPassword(secrets["alice"]),
		withCleanStart(false), withSessionExpiry(60))
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("alice with her own client id after bob: CONNACK %+v, %v", ack, err)
	}
	if ack.SessionPresent {
		t.Fatal("alice inherited bob's session")
	}
	alice = c
	if !served(alice) {
		t.Fatal("alice not served")
	}
	c2, ack, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), "alice-phone", "bob", withPassword(secrets["bob"]),
		withCleanStart(false), withSessionExpiry(0xFFFFFFFF))
	if err != nil || ack.ReasonCode != 0 || !ack.SessionPresent {
		t.Fatalf("bob back to his session: CONNACK %+v, %v", ack, err)
	}
	bob = c2
	if rc := bob.publish(t, "bob/inbox", "for bob", 1, false); rc != 0 {
		t.Fatalf("bob's publish: %#x", rc)
	}
	select {
	case m := <-bob.msgs:
		if m.Topic != "bob/inbox" {
			t.Fatalf("bob received %s", m.Topic)
		}
	case <-time.After(waitTimeout):
		t.Fatal("bob's own session lost his subscription")
	}
	select {
	case m := <-alice.msgs:
		t.Fatalf("alice received bob's %s", m.Topic)
	case <-time.After(100 * time.Millisecond):
	}
	if !served(alice) || !served(bob) {
		t.Fatalf("served: alice %v, bob %v; want both", served(alice), served(bob))
	}
	for _, u := range []string{"alice", "bob"} {
		obs.waitFor(u, "online with session alice-phone", func(p presence.Aggregate) bool {
			return p.Status == presence.Online && len(p.Sessions) == 1 && p.Sessions[0].ID == "alice-phone"
		})
	}
}

// Two users connecting with one fresh client id at the same instant: both
// are accepted, both served, neither inherits nor takes over the other
// (before, the owner check raced the takeover: both got CONNACK 0 and one
// took the other's session).
func TestSameClientIDTwoUsersAtOnce(t *testing.T) {
	n := startNode(t, noBattleDamping)
	for round := range 150 {
		id := fmt.Sprintf("dev-%d", round)
		var clients [2]*client5
		var acks [2]*paho.Connack
		var errs [2]error
		var wg sync.WaitGroup
		for i, user := range []string{"alice", "bob"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				clients[i], acks[i], errs[i] = connect5(t, ctDialTCP(t, n.MQTTAddr()), id, user)
			}()
		}
		wg.Wait()
		for i, user := range []string{"alice", "bob"} {
			if errs[i] != nil || acks[i].ReasonCode != 0 || acks[i].SessionPresent {
				t.Fatalf("round %d: %s: CONNACK %+v, %v", round, user, acks[i], errs[i])
			}
		}
		for i, user := range []string{"alice", "bob"} {
			if !served(clients[i]) {
				t.Fatalf("round %d: %s's connection taken over", round, user)
			}
		}
		if got := len(clientsWithID(n.Server, id)); got != 2 {
			t.Fatalf("round %d: %d clients with id %s", round, got, id)
		}
		for _, c := range clients {
			c.disconnect()
		}
	}
}

// A token's groups claim is in force for a connection's first SUBSCRIBE,
// right after CONNACK, while other users' claims are being written: a read
// of the group from the store that began before the claim was written must
// not drop the member the claim added (TestGroupsJWTClaim saw
// presence/groups/team refused with 0x87 right after CONNACK).
func TestGroupsClaimInForceAtOnceUnderConcurrentClaims(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("an HS256 secret of well over thirty-two bytes, for the test only")
	secretFile := filepath.Join(dir, "hs256.key")
	writeAtomic(t, secretFile, secret)
	n := startAuthNode(t, func(c *configs.Config) {
		c.Auth.JWT.HS256SecretFile = secretFile
		c.Presence.Visibility = configs.VisibilityGroups
	})
	hour := time.Now().Add(time.Hour).Unix()
	const users = 6
	for round := range 25 {
		var wg sync.WaitGroup
		codes := make([]byte, users)
		for i := range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				user := fmt.Sprintf("u%d-%d", round, i)
				tok := hs256(t, secret, jwt.MapClaims{"sub": user, "groups": []string{"team"}, "exp": hour})
				c := dial5(t, n.MQTTAddr(), user+"-1", "", withPassword(tok))
				codes[i] = subAck(t, c, "presence/groups/team")
				c.disconnect()
			}()
		}
		wg.Wait()
		for i, rc := range codes {
			if rc != rcGrantedQoS1 {
				t.Fatalf("round %d: u%d-%d's presence/groups/team right after CONNACK: SUBACK %#x", round, round, i, rc)
			}
		}
	}
}

// authTokensNode starts a node with a password file and an HS256 secret;
// edit may change the config further.
func authTokensNode(t *testing.T, secrets map[string]string, edit func(*configs.Config)) (*authNode, []byte, string) {
	t.Helper()
	dir := t.TempDir()
	pwfile := filepath.Join(dir, "passwd")
	writePasswordFile(t, pwfile, secrets)
	secret := []byte("an HS256 secret of well over thirty-two bytes, for the test only")
	secretFile := filepath.Join(dir, "hs256.key")
	writeAtomic(t, secretFile, secret)
	n := startAuthNode(t, func(c *configs.Config) {
		c.Auth.PasswordFile = pwfile
		c.Auth.JWT.HS256SecretFile = secretFile
		if edit != nil {
			edit(c)
		}
	})
	return n, secret, pwfile
}

// A service account is bound to a method (auth.observer_methods, default
// password): a token naming svc is an ordinary user, and cannot read "#";
// svc with its password can.
func TestServiceAccountBoundToMethod(t *testing.T) {
	secrets := map[string]string{"svc": "svc-Secret-1"}
	n, secret, _ := authTokensNode(t, secrets, func(c *configs.Config) { c.Presence.Observers = []string{"svc"} })
	tok := hs256(t, secret, jwt.MapClaims{"sub": "svc", "exp": time.Now().Add(time.Hour).Unix()})
	byToken := dial5(t, n.MQTTAddr(), "svc-t", "", withPassword(tok))
	if got := subAck(t, byToken, "#"); got != rcNotAuthorized {
		t.Errorf("a token naming svc subscribing #: SUBACK %#x, want %#x", got, rcNotAuthorized)
	}
	byPassword := dial5(t, n.MQTTAddr(), "svc-p", "svc", withPassword(secrets["svc"]))
	if got := subAck(t, byPassword, "#"); got != rcGrantedQoS1 {
		t.Errorf("svc with its password subscribing #: SUBACK %#x, want %#x", got, rcGrantedQoS1)
	}
}

// Tokens without exp are refused by default, and so are tokens that live
// longer than auth.jwt.max_lifetime.
func TestTokenExpRequiredAndLifetimeBounded(t *testing.T) {
	n, secret, _ := authTokensNode(t, map[string]string{"x": "x-Secret-1"}, func(c *configs.Config) {
		c.Auth.JWT.MaxLifetime = configs.Duration(time.Hour)
	})
	for _, tc := range []struct {
		name   string
		claims jwt.MapClaims
		want   byte
	}{
		{"no exp", jwt.MapClaims{"sub": "alice"}, rcBadUserNameOrPass},
		{"exp in 2h over a 1h maximum", jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(2 * time.Hour).Unix()}, rcBadUserNameOrPass},
		{"exp in 30m", jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(30 * time.Minute).Unix()}, 0},
	} {
		c, ack, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), "alice-1", "", withPassword(hs256(t, secret, tc.claims)))
		if ack == nil {
			t.Fatalf("%s: no CONNACK: %v", tc.name, err)
		}
		if ack.ReasonCode != tc.want {
			t.Errorf("%s: CONNACK %#x, want %#x", tc.name, ack.ReasonCode, tc.want)
		}
		if ack.ReasonCode == 0 {
			c.disconnect()
		}
	}
}

// A connection ends when its token expires (DISCONNECT 0xA0 "maximum
// connect time"), and when its user is removed from the password file, on
// reload (0x87); a user given a new password keeps the connection
// (TestAuthReloadOnSIGHUP).
func TestSessionsEndWithTheirCredentials(t *testing.T) {
	secrets := map[string]string{"alice": "alice-Secret-1", "bob": "bob-Secret-2", "carol": "carol-Secret-3"}
	n, secret, pwfile := authTokensNode(t, secrets, func(c *configs.Config) { c.Auth.JWT.Leeway = configs.Duration(time.Second) })
	tok := hs256(t, secret, jwt.MapClaims{"sub": "dan", "exp": time.Now().Add(2 * time.Second).Unix()})
	dan := dial5(t, n.MQTTAddr(), "dan-1", "", withPassword(tok))
	alice := dial5(t, n.MQTTAddr(), "alice-1", "alice", withPassword(secrets["alice"]))
	bob := dial5(t, n.MQTTAddr(), "bob-1", "bob", withPassword(secrets["bob"]))
	carol := dial5(t, n.MQTTAddr(), "carol-1", "carol", withPassword(secrets["carol"]))
	gone := func(c *client5, within time.Duration) byte {
		select {
		case d := <-c.gone:
			return d.ReasonCode
		case <-time.After(within):
			return 0
		}
	}
	if rc := gone(dan, 3*time.Second+waitTimeout); rc != 0xA0 {
		t.Errorf("dan's token expired: DISCONNECT %#x, want 0xA0", rc)
	}
	// alice removed, bob's password changed, carol's line untouched.
	old, err := os.ReadFile(pwfile)
	if err != nil {
		t.Fatal(err)
	}
	newBob := filepath.Join(t.TempDir(), "bob")
	writePasswordFile(t, newBob, map[string]string{"bob": "bob-Secret-new"})
	bobLine, err := os.ReadFile(newBob)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(old)), "\n") {
		if strings.HasPrefix(l, "carol:") {
			lines = append(lines, l)
		}
	}
	lines = append(lines, strings.TrimSpace(string(bobLine)))
	writeAtomic(t, pwfile, []byte(strings.Join(lines, "\n")+"\n"))
	if err := n.Reload(); err != nil {
		t.Fatal(err)
	}
	if rc := gone(alice, waitTimeout); rc != rcNotAuthorized {
		t.Errorf("alice removed: DISCONNECT %#x, want %#x", rc, rcNotAuthorized)
	}
	if !served(bob) || !served(carol) {
		t.Errorf("served: bob (new password) %v, carol (untouched) %v; want both", served(bob), served(carol))
	}
}

// identity.fold_case: names that differ only in case are one user; off by
// default, "Alice" is a user of her own.
func TestIdentityFoldCase(t *testing.T) {
	for _, fold := range []bool{false, true} {
		t.Run(fmt.Sprintf("fold_case %v", fold), func(t *testing.T) {
			n := startNode(t, func(c *configs.Config) { c.Identity.FoldCase = fold })
			obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
			dial5(t, n.MQTTAddr(), "c-upper", "Alice")
			dial5(t, n.MQTTAddr(), "c-lower", "alice")
			if fold {
				obs.waitFor("alice", "both sessions", func(p presence.Aggregate) bool { return len(p.Sessions) == 2 })
				if _, ok := obs.last("Alice"); ok {
					t.Error("Alice has presence of her own with fold_case")
				}
				return
			}
			obs.waitFor("Alice", "her session", func(p presence.Aggregate) bool { return len(p.Sessions) == 1 })
			obs.waitFor("alice", "her session", func(p presence.Aggregate) bool { return len(p.Sessions) == 1 })
		})
	}
}
