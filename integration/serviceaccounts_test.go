package integration

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// svcHold is how long a test holds that a service account shows nowhere,
// once what it waited for (another user online) is shown: the account
// connected before that user, so a session of its would have been
// committed and published by then, and this margin covers the store's
// and the publisher's lag on a busy machine.
const svcHold = time.Second

// svcOnline returns presenced_users{status="online"} from /metrics.
func svcOnline(t *testing.T, adminAddr string) int {
	t.Helper()
	return int(scrapeMetrics(t, adminAddr, "").value("presenced_users", "status=online"))
}

// svcWaitOnline waits until /metrics counts want users online.
func svcWaitOnline(t *testing.T, adminAddr string, want int) {
	t.Helper()
	testkit.Wait(t, waitTimeout, fmt.Sprintf("presenced_users{status=\"online\"} %d", want), func() error {
		got := svcOnline(t, adminAddr)
		return testkit.Why(got == want, fmt.Sprintf("%d", got))
	})
}

// svcUnseen holds, for svcHold, that the users have no presence on the
// node (GET /api/v1/users/{user}: 404) nor a record in the store (GET
// /api/v1/users/{user}/sessions: 404), and that /metrics counts online
// users online.
func svcUnseen(t *testing.T, adminAddr string, online int, users ...string) {
	t.Helper()
	testkit.During(t, svcHold, fmt.Sprintf("%v unseen, %d online", users, online), func() error {
		for _, u := range users {
			for _, path := range []string{"/api/v1/users/" + u, "/api/v1/users/" + u + "/sessions"} {
				if code, body := adminDo(t, adminAddr, path, ""); code != http.StatusNotFound {
					return fmt.Errorf("GET %s: %d %s, want 404", path, code, body)
				}
			}
		}
		return testkit.Why(svcOnline(t, adminAddr) == online, fmt.Sprintf("presenced_users{status=\"online\"} %d", svcOnline(t, adminAddr)))
	})
}

// svcFresh subscribes a new connection (with opts) to each user's topic in
// turn, marker last: a retained message of one of the others would have
// arrived before the marker's (mochi answers one client's SUBSCRIBEs in
// order, writing each one's retained messages before reading the next).
// It returns the users other than marker it received presence of.
func svcFresh(t *testing.T, mqttAddr, marker string, users []string, opts ...connectOpt) []string {
	t.Helper()
	o := newObserver(t, mqttAddr, "presence/users/"+users[0], opts...)
	for _, u := range users[1:] {
		o.subscribe("presence/users/" + u)
	}
	o.subscribe("presence/users/" + marker)
	o.waitStatus(marker, presence.Online)
	var got []string
	for _, u := range users {
		if len(ctRaw(o, "presence/users/"+u)) > 0 {
			got = append(got, u)
		}
	}
	o.check()
	return got
}

// Service accounts are not people: through the real binary, with real MQTT
// clients and either store, a service account (by password, by a token's
// observer claim, by client certificate) reads everything as before but has
// no presence: no retained presence/users/{name}, no record in the store,
// not counted in presenced_users, and its presence/set is refused; a user
// listed in presence.observers who authenticated by a method not in
// auth.observer_methods is a person. presence.observer_sessions: true gives
// service accounts their presence back; without authentication every
// connection has its presence, a name in presence.observers included.
func TestServiceAccounts(t *testing.T) {
	dir := t.TempDir()
	pw := map[string]string{"alice": "alice-Secret-1", "dashboard": "dashboard-Secret-2"}
	pwfile := filepath.Join(dir, "passwd")
	writePasswordFile(t, pwfile, pw)
	secret := []byte("an HS256 secret of well over thirty-two bytes, for the test only")
	secretFile := filepath.Join(dir, "hs256.key")
	writeAtomic(t, secretFile, secret)
	hour := time.Now().Add(time.Hour).Unix()
	svcToken := hs256(t, secret, jwt.MapClaims{"sub": "svc", "presence_observer": true, "exp": hour})
	reporterToken := hs256(t, secret, jwt.MapClaims{"sub": "reporter", "exp": hour}) // listed, but by jwt
	authYAML := fmt.Sprintf("auth:\n  password_file: %s\n  jwt:\n    hs256_secret_file: %s\n    observer_claim: presence_observer\n"+
		"presence:\n  observers: [dashboard, reporter]\n", pwfile, secretFile)
	dashboard := []connectOpt{withUser("dashboard"), withPassword(pw["dashboard"])}

	t.Run("by password and by token: no presence", func(t *testing.T) {
		_, mqttAddr, _, adminAddr := binAuth(t, authYAML)
		dash := newObserver(t, mqttAddr, "presence/users/+", dashboard...)
		svc := dial5(t, mqttAddr, "svc-1", "", withPassword(svcToken))
		dial5(t, mqttAddr, "alice-phone", "alice", withPassword(pw["alice"]), withDevice("phone"))
		on := dash.waitStatus("alice", presence.Online)
		if len(on.Sessions) != 1 || on.Sessions[0].ID != "alice-phone" {
			t.Errorf("alice: %+v", on)
		}
		svcWaitOnline(t, adminAddr, 1)
		svcUnseen(t, adminAddr, 1, "dashboard", "svc")
		if got := svcFresh(t, mqttAddr, "alice", []string{"dashboard", "svc"}, dashboard...); len(got) != 0 {
			t.Errorf("a new subscriber received presence of %v", got)
		}
		for _, u := range []string{"dashboard", "svc"} {
			if _, ok := dash.last(u); ok {
				t.Errorf("the service account's subscriber saw %s's presence: %v", u, dash.history(u))
			}
		}

		// They read as before, but have no presence to set.
		probe := dial5(t, mqttAddr, "dashboard-probe", "dashboard", withPassword(pw["dashboard"]))
		for _, c := range []struct {
			who string
			c   *client5
		}{{"dashboard", probe}, {"svc", svc}} {
			for _, f := range []string{"#", "$SYS/#"} {
				if got := subAck(t, c.c, f); got != rcGrantedQoS1 {
					t.Errorf("%s subscribing %s: SUBACK %#x, want %#x", c.who, f, got, rcGrantedQoS1)
				}
			}
			if rc := c.c.publish(t, "presence/set", `{"status":"away"}`, 1, false); rc != rcNotAuthorized {
				t.Errorf("%s's presence/set: reason %#x, want %#x", c.who, rc, rcNotAuthorized)
			}
		}

		// A user listed in presence.observers who authenticated by a
		// method not in auth.observer_methods ([password]) is a person.
		reporter := dial5(t, mqttAddr, "reporter-1", "", withPassword(reporterToken))
		dash.waitFor("reporter", "online", hasSession("reporter-1"))
		if got := subAck(t, reporter, "#"); got != rcNotAuthorized {
			t.Errorf("reporter by token subscribing #: SUBACK %#x, want %#x", got, rcNotAuthorized)
		}
		svcWaitOnline(t, adminAddr, 2)
		svcUnseen(t, adminAddr, 2, "dashboard", "svc")
		dash.check()
	})

	t.Run("observer_sessions: presence as before", func(t *testing.T) {
		_, mqttAddr, _, adminAddr := binAuth(t, authYAML+"  observer_sessions: true\n")
		dash := newObserver(t, mqttAddr, "presence/users/+", append(dashboard, withClientID("dashboard-watch"))...)
		dial5(t, mqttAddr, "svc-1", "", withPassword(svcToken))
		dial5(t, mqttAddr, "alice-phone", "alice", withPassword(pw["alice"]))
		dash.waitStatus("alice", presence.Online)
		dash.waitFor("dashboard", "its own session", hasSession("dashboard-watch"))
		dash.waitFor("svc", "online", hasSession("svc-1"))
		svcWaitOnline(t, adminAddr, 3)
		for _, u := range []string{"dashboard", "svc"} {
			if p, err := mnPresenceOf(adminAddr, u); err != nil || p.Status != presence.Online {
				t.Errorf("GET /api/v1/users/%s: %+v, %v", u, p, err)
			}
		}
		if got := svcFresh(t, mqttAddr, "alice", []string{"dashboard", "svc"}, dashboard...); len(got) != 2 {
			t.Errorf("a new subscriber received presence of %v, want dashboard and svc", got)
		}
		dash.check()
	})

	t.Run("by certificate", func(t *testing.T) {
		cdir := t.TempDir()
		ca := newTestCA(t, "presenced test CA")
		certFile, keyFile := ca.server(t).write(t, cdir, "server")
		caFile := filepath.Join(cdir, "clients-ca.pem")
		writeAtomic(t, caFile, ca.pem)
		_, mqttAddr, _, adminAddr := binAuth(t, fmt.Sprintf(
			"tls:\n  cert_file: %s\n  key_file: %s\n  client_ca_file: %s\n  require_client_cert: true\n"+
				"auth:\n  cert_user_from: cn\n  observer_methods: [certificate]\npresence:\n  observers: [dashboard]\n",
			certFile, keyFile, caFile))
		as := func(cn string) *tls.Config {
			return &tls.Config{RootCAs: ca.pool(), Certificates: []tls.Certificate{ca.client(t, cn).tls}}
		}
		dash, code := try5(t, tlsDial(t, mqttAddr, as("dashboard")), "dashboard-cert")
		if code != 0 {
			t.Fatalf("dashboard's certificate: CONNACK %#x", code)
		}
		// It watches everyone (the node then shows, and counts, everyone).
		if got := subAck(t, dash, "presence/users/+"); got != rcGrantedQoS1 {
			t.Fatalf("dashboard by certificate subscribing presence/users/+: SUBACK %#x", got)
		}
		if _, code := try5(t, tlsDial(t, mqttAddr, as("alice")), "alice-cert"); code != 0 {
			t.Fatalf("alice's certificate: CONNACK %#x", code)
		}
		waitPresence(t, adminAddr, "alice", "online by certificate", hasSession("alice-cert"))
		svcWaitOnline(t, adminAddr, 1)
		svcUnseen(t, adminAddr, 1, "dashboard")
		if got := subAck(t, dash, "$SYS/#"); got != rcGrantedQoS1 {
			t.Errorf("dashboard by certificate subscribing $SYS/#: SUBACK %#x, want %#x", got, rcGrantedQoS1)
		}
	})

	// An upgrade: a node that gave dashboard a session (as 0.9.0 did, here
	// with observer_sessions) stops, and one of this version takes over
	// the same Redis. dashboard's session ended with its connection
	// (drain); connected again, it opens none, and its record stays
	// offline, to be forgotten after redis.retention like any offline
	// user's.
	t.Run("upgrade: the record left offline", func(t *testing.T) {
		if os.Getenv("INTEGRATION_STORE") != "redis" {
			t.Skip("a record outlives its node only in Redis: the INTEGRATION_STORE=redis pass runs this")
		}
		redisAddr := redistest.Start(t).Addr()
		old, mqttAddr, _, _ := svcBin(t, "bin-old", authYAML+"  observer_sessions: true\n", redisAddr)
		dash := newObserver(t, mqttAddr, "presence/users/+", append(dashboard, withClientID("dashboard-watch"))...)
		dash.waitFor("dashboard", "its own session", hasSession("dashboard-watch"))
		if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM: %v", err)
		}
		if code := old.wait(t, waitTimeout); code != 0 {
			t.Fatalf("the old node exited %d\n%s", code, old.stderr)
		}

		_, mqttAddr, _, adminAddr := svcBin(t, "bin-new", authYAML, redisAddr)
		again := newObserver(t, mqttAddr, "presence/users/+", append(dashboard, withClientID("dashboard-watch"))...)
		dial5(t, mqttAddr, "alice-phone", "alice", withPassword(pw["alice"]))
		again.waitStatus("alice", presence.Online)
		off := again.waitStatus("dashboard", presence.Offline)
		if len(off.Sessions) != 0 || off.LastSeen.IsZero() {
			t.Errorf("dashboard after the upgrade: %+v", off)
		}
		svcWaitOnline(t, adminAddr, 1)
		testkit.During(t, svcHold, "dashboard offline, no live session", func() error {
			s := mnSessionsOf(t, adminAddr, "dashboard")
			return testkit.Why(len(s.Live) == 0 && svcOnline(t, adminAddr) == 1, fmt.Sprintf("live %+v, online %d", s.Live, svcOnline(t, adminAddr)))
		})
		again.check()
	})

	t.Run("no authentication: every connection has presence", func(t *testing.T) {
		_, mqttAddr, _, adminAddr := binAuth(t, "presence:\n  observers: [dashboard]\n")
		dash := newObserver(t, mqttAddr, "presence/users/+", withUser("dashboard"), withClientID("dashboard-watch"))
		dial5(t, mqttAddr, "alice-phone", "alice")
		dash.waitStatus("alice", presence.Online)
		dash.waitFor("dashboard", "its own session", hasSession("dashboard-watch"))
		svcWaitOnline(t, adminAddr, 2)
		if p, err := mnPresenceOf(adminAddr, "dashboard"); err != nil || p.Status != presence.Online {
			t.Errorf("GET /api/v1/users/dashboard: %+v, %v", p, err)
		}
		dash.check()
	})
}

// svcBin starts the binary as node with the config yaml and the Redis at
// redisAddr; it is killed at cleanup if still running.
func svcBin(t *testing.T, node, yaml, redisAddr string) (p *binProc, mqttAddr, wsAddr, adminAddr string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "presenced.yaml")
	writeAtomic(t, file, []byte(yaml))
	p = binStart(t, mnBinary(t), binEnv(), "--config", file, "--mqtt-addr", "127.0.0.1:0", "--ws-addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--node-id", node, "--log-format", "json", "--redis-addr", redisAddr)
	started := p.waitLine(t, "presenced started")
	mqttAddr, _ = started["mqtt"].(string)
	wsAddr, _ = started["ws"].(string)
	adminAddr, _ = started["admin"].(string)
	if mqttAddr == "" || wsAddr == "" || adminAddr == "" {
		t.Fatalf("started line: %v", started)
	}
	return p, mqttAddr, wsAddr, adminAddr
}
