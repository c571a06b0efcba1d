package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/crypto/bcrypt"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// CONNACK and SUBACK codes of the authentication contract.
const (
	rcClientIDNotValid = 0x85 // MQTT 5 CONNACK
	rc3Accepted        = 0x00 // MQTT 3.1.1 CONNACK return codes
	rc3IDRejected      = 0x02
	rc3BadUserOrPass   = 0x04
	rcGrantedQoS1      = 0x01 // SUBACK
	rcPacketIDInUse    = 0x91
)

// authNode is a node of the binary's composition (presenced.Broker) for
// the tests that need what startNode does not give: the authentication
// figures and the node's log.
type authNode struct {
	*presenced.Broker
	log *binBuffer // every record the node logs (presence's, mochi's), JSON
}

// authConfig is startNode's config without its pacingOff.
func authConfig(t *testing.T, edit func(*configs.Config)) configs.Config {
	t.Helper()
	return nodeConfig(t, edit)
}

// startAuthNode starts a node (presenced.NewBroker and Start) whose log goes to a
// buffer; it is stopped at cleanup.
func startAuthNode(t *testing.T, edit func(*configs.Config)) *authNode {
	t.Helper()
	cfg := authConfig(t, edit)
	buf := &binBuffer{}
	var w io.Writer = buf
	if testing.Verbose() {
		w = io.MultiWriter(buf, testLogWriter{t})
	}
	n, err := presenced.NewBroker(cfg, slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("presenced.NewBroker: %v", err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return &authNode{Broker: n, log: buf}
}

// authCounts are the authentication's figures (auth_connects_total by
// result).
type authCounts struct{ Accepted, Anonymous, Refused, ClientIDDenied int64 }

// authStats returns the authentication's figures, nil without an
// authentication method.
func (n *authNode) authStats() *authCounts {
	s := n.Stats()
	if !slices.Contains(s.Names(), "auth_connects_total") {
		return nil
	}
	of := func(r string) int64 { return s.Of("auth_connects_total", r) }
	return &authCounts{Accepted: of("accepted"), Anonymous: of("anonymous"), Refused: of("refused"), ClientIDDenied: of("client_id_denied")}
}

// logLines returns the node's log lines whose message is msg.
func (n *authNode) logLines(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(n.log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m[slog.MessageKey] == msg {
			out = append(out, m)
		}
	}
	return out
}

// writePasswordFile writes an htpasswd -B style file (bcrypt at its
// lowest cost, so that -race stays fast), atomically.
func writePasswordFile(t *testing.T, path string, users map[string]string) {
	t.Helper()
	var b bytes.Buffer
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	slices.Sort(names)
	for _, u := range names {
		h, err := bcrypt.GenerateFromPassword([]byte(users[u]), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%s\n", u, h)
	}
	writeAtomic(t, path, b.Bytes())
}

// transport opens connections to one MQTT listener.
type transport struct {
	name string
	dial func(t *testing.T) net.Conn
}

func tcpTransport(addr string) transport {
	return transport{"tcp", func(t *testing.T) net.Conn { t.Helper(); return ctDialTCP(t, addr) }}
}

func wsTransport(addr string) transport {
	return transport{"ws", func(t *testing.T) net.Conn {
		t.Helper()
		c, resp, err := wsDial("ws://"+addr+"/mqtt", nil, "")
		if err != nil {
			t.Fatalf("websocket dial %s: %v (%s)", addr, err, statusOfResp(resp))
		}
		return c
	}}
}

// wsDial opens a WebSocket (subprotocol mqtt) to url, over TLS with tlsCfg
// for wss, with an Origin header unless origin is empty, as a net.Conn.
func wsDial(url string, tlsCfg *tls.Config, origin string) (net.Conn, *http.Response, error) {
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: waitTimeout, TLSClientConfig: tlsCfg}
	var h http.Header
	if origin != "" {
		h = http.Header{"Origin": {origin}}
	}
	ws, resp, err := d.Dial(url, h)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, resp, err
	}
	return testkit.NewWSConn(ws), resp, nil
}

func statusOfResp(resp *http.Response) string {
	if resp == nil {
		return "no HTTP response"
	}
	return resp.Status
}

// try5 sends an MQTT 5 CONNECT over conn (no username unless an option
// sets one) and returns the client and the CONNACK's reason code; it fails
// the test when no CONNACK comes.
func try5(t *testing.T, conn net.Conn, clientID string, opts ...connectOpt) (*client5, byte) {
	t.Helper()
	c, ack, err := connect5(t, conn, clientID, "", opts...)
	if ack == nil {
		t.Fatalf("connect %s: no CONNACK: %v", clientID, err)
	}
	return c, ack.ReasonCode
}

// connect3Bytes encodes an MQTT 3.1.1 CONNECT; an empty user or password
// is left out.
func connect3Bytes(t *testing.T, clientID, user, password string) []byte {
	t.Helper()
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect: packets.ConnectParams{
			ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30, ClientIdentifier: clientID,
		},
	}
	if user != "" {
		pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte(user)
	}
	if password != "" {
		pk.Connect.PasswordFlag, pk.Connect.Password = true, []byte(password)
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		t.Fatalf("encode connect: %v", err)
	}
	return buf.Bytes()
}

// try3 sends an MQTT 3.1.1 CONNECT over conn and returns the CONNACK's
// return code; it fails the test when no CONNACK comes. The connection
// stays open (closed at cleanup).
func try3(t *testing.T, conn net.Conn, clientID, user, password string) byte {
	t.Helper()
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	if _, err := conn.Write(connect3Bytes(t, clientID, user, password)); err != nil {
		t.Fatalf("%s: write CONNECT: %v", clientID, err)
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(conn, ack); err != nil || ack[0] != 0x20 || ack[1] != 2 {
		t.Fatalf("%s: CONNACK %x: %v", clientID, ack, err)
	}
	return ack[3]
}

// try connects over conn with MQTT version 5 or 4 (3.1.1) and returns the
// CONNACK code.
func try(t *testing.T, conn net.Conn, version int, clientID, user, password string) byte {
	t.Helper()
	if version == 4 {
		return try3(t, conn, clientID, user, password)
	}
	var opts []connectOpt
	if user != "" {
		opts = append(opts, withUser(user))
	}
	if password != "" {
		opts = append(opts, withPassword(password))
	}
	_, code := try5(t, conn, clientID, opts...)
	return code
}

// subAck subscribes with QoS 1 and returns the SUBACK's reason code. mochi
// answers 0x91 (packet identifier in use) to a SUBSCRIBE whose packet id
// equals that of a QoS 1 message it is sending the client (it keeps both
// directions in one inflight table): then it subscribes again, with the
// client's next packet id.
func subAck(t *testing.T, c *client5, filter string) byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for {
		sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}})
		if sa == nil || len(sa.Reasons) != 1 {
			t.Fatalf("subscribe %s: no SUBACK: %v", filter, err)
		}
		if sa.Reasons[0] != rcPacketIDInUse {
			return sa.Reasons[0]
		}
	}
}

// hasSession returns a condition: user is online with a session id.
func hasSession(id string) func(presence.Aggregate) bool {
	return func(p presence.Aggregate) bool {
		_, ok := ctSessionOf(p, id)
		return ok && p.Status == presence.Online
	}
}

// refusedCode is the CONNACK code of bad credentials for an MQTT version.
func refusedCode(version int) byte {
	if version == 4 {
		return rc3BadUserOrPass
	}
	return rcBadUserNameOrPass
}

// A password file: wrong passwords, unknown users and clients without
// credentials are refused with 0x86 (3.1.1: 0x04) over TCP and WebSocket,
// counted, and logged without the password; the right password connects
// and the user is online.
func TestAuthPassword(t *testing.T) {
	pwfile := filepath.Join(t.TempDir(), "passwd")
	secrets := map[string]string{"alice": "alice-Secret-1", "bob": "bob-Secret-2", "ops": "ops-Secret-3"}
	writePasswordFile(t, pwfile, secrets)
	n := startAuthNode(t, func(c *configs.Config) {
		c.Auth.PasswordFile = pwfile
		c.Presence.Observers = []string{"ops"}
		// 12 failures from 127.0.0.1, more than the default burst (10):
		// the throttle has its own test (TestAuthPasswordGuessingThrottled).
		c.Auth.Passwords.FailureBurst = 100
	})
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+", withUser("ops"), withPassword(secrets["ops"]))

	var wrong []string // every wrong password sent
	for _, tr := range []transport{tcpTransport(n.MQTTAddr()), wsTransport(n.WSAddr())} {
		for _, v := range []int{5, 4} {
			name := fmt.Sprintf("%s-v%d", tr.name, v)
			bad := "WrongPassword-" + name
			wrong = append(wrong, bad)
			for _, c := range []struct{ what, user, password string }{
				{"wrong password", "alice", bad},
				{"unknown user", "mallory", "Mallory-Guess-" + name},
				{"no credentials", "", ""},
				{"username without password", "alice", ""},
			} {
				if got := try(t, tr.dial(t), v, "x-"+name, c.user, c.password); got != refusedCode(v) {
					t.Errorf("%s, %s: CONNACK %#x, want %#x", name, c.what, got, refusedCode(v))
				}
			}
			wrong = append(wrong, "Mallory-Guess-"+name)
			id := "alice-" + name
			if got := try(t, tr.dial(t), v, id, "alice", secrets["alice"]); got != 0 {
				t.Fatalf("%s, right password: CONNACK %#x, want 0", name, got)
			}
			obs.waitFor("alice", "session "+id, hasSession(id))
		}
	}
	on, _ := obs.last("alice")
	if len(on.Sessions) != 4 {
		t.Errorf("alice has %d sessions, want 4 (tcp and ws, v5 and v3.1.1): %+v", len(on.Sessions), on.Sessions)
	}
	if _, ok := obs.last("mallory"); ok {
		t.Errorf("the unknown user mallory has presence")
	}

	s := n.authStats()
	if s == nil || s.Refused != 16 || s.Accepted != 5 || s.Anonymous != 0 || s.ClientIDDenied != 0 {
		t.Errorf("auth counters %+v, want refused 16, accepted 5 (ops and alice x4), no anonymous, no client_id_denied", s)
	}
	refusals := n.logLines("connection refused")
	if len(refusals) == 0 {
		t.Fatalf("no refusal logged:\n%s", n.log)
	}
	if r, _ := refusals[0]["remote"].(string); !strings.HasPrefix(r, "127.0.0.1:") {
		t.Errorf("refusal logged without the remote address: %v", refusals[0])
	}
	// At most one line a second: 16 refusals within a few hundred
	// milliseconds cannot be 16 lines.
	if len(refusals) >= 16 {
		t.Errorf("%d refusal lines for 16 refusals: not rate-limited", len(refusals))
	}
	logs := n.log.String()
	for _, pw := range append(wrong, secrets["alice"], secrets["ops"]) {
		if strings.Contains(logs, pw) {
			t.Errorf("the log holds the password %q:\n%s", pw, logs)
		}
	}
	obs.check()
}

// hs256 signs claims with secret.
func hs256(t *testing.T, secret []byte, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// JWT in the CONNECT password: the user is the sub claim; an expired token
// (beyond the leeway), a token for another username and a bad signature
// are refused; the observer claim makes a service account, which alone may
// subscribe "#"; a token binding the client id refuses other ids with 0x85
// (3.1.1: 0x02).
func TestAuthJWT(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("an HS256 secret of well over thirty-two bytes, for the test only")
	secretFile := filepath.Join(dir, "hs256.key")
	writeAtomic(t, secretFile, secret)
	n := startAuthNode(t, func(c *configs.Config) {
		c.Auth.JWT.HS256SecretFile = secretFile
		c.Auth.JWT.ObserverClaim = "presence_observer"
		c.Auth.JWT.ClientIDClaim = "client_id"
		c.Auth.JWT.ClientIDPrefixClaim = "client_id_prefix"
	})
	now := time.Now()
	hour := now.Add(time.Hour).Unix()
	svc := hs256(t, secret, jwt.MapClaims{"sub": "svc", "presence_observer": true, "exp": hour})
	alice := hs256(t, secret, jwt.MapClaims{"sub": "alice", "exp": hour})
	tokens := []string{svc, alice}

	obs := newObserver(t, n.MQTTAddr(), "presence/users/+", withPassword(svc))
	// The service account may read everything (on a connection of its own:
	// a second, overlapping subscription would deliver the retained copies
	// the observer already has once more).
	probe, code := try5(t, ctDialTCP(t, n.MQTTAddr()), "svc-probe", withPassword(svc))
	if code != 0 {
		t.Fatalf("service account: CONNACK %#x", code)
	}
	for _, f := range []string{"#", "$SYS/#", "$share/g/#"} {
		if got := subAck(t, probe, f); got != rcGrantedQoS1 {
			t.Errorf("service account's %s: SUBACK %#x, want %#x", f, got, rcGrantedQoS1)
		}
	}

	// A valid token: MQTT 5 without a username (TCP and WebSocket), 3.1.1
	// with the username the token names.
	c5, code := try5(t, ctDialTCP(t, n.MQTTAddr()), "alice-jwt5", withPassword(alice))
	if code != 0 {
		t.Fatalf("valid token: CONNACK %#x", code)
	}
	obs.waitFor("alice", "session alice-jwt5", hasSession("alice-jwt5"))
	if code := try(t, wsTransport(n.WSAddr()).dial(t), 5, "alice-jwtws", "", alice); code != 0 {
		t.Errorf("valid token over websocket: CONNACK %#x", code)
	}
	if code := try3(t, ctDialTCP(t, n.MQTTAddr()), "alice-jwt3", "alice", alice); code != rc3Accepted {
		t.Errorf("valid token, 3.1.1: CONNACK %#x", code)
	}
	on := obs.waitFor("alice", "three sessions", func(p presence.Aggregate) bool {
		return hasSession("alice-jwtws")(p) && hasSession("alice-jwt3")(p)
	})
	if len(on.Sessions) != 3 {
		t.Errorf("alice's sessions: %+v", on.Sessions)
	}
	// A normal user reads neither # nor $SYS, nor what reads as much as #.
	for _, f := range []string{"#", "$SYS/#", "$share/g/#", "+/#", "+/+/#", "$share/g/+/#"} {
		if got := subAck(t, c5, f); got != rcNotAuthorized {
			t.Errorf("alice's %s: SUBACK %#x, want %#x", f, got, rcNotAuthorized)
		}
	}

	// exp 10 s ago is within the 30 s leeway; 2 min ago is not.
	late := hs256(t, secret, jwt.MapClaims{"sub": "alice", "exp": now.Add(-10 * time.Second).Unix()})
	expired := hs256(t, secret, jwt.MapClaims{"sub": "alice", "exp": now.Add(-2 * time.Minute).Unix()})
	forged := hs256(t, []byte("another secret that is long enough to be a real one"), jwt.MapClaims{"sub": "alice", "exp": hour})
	tokens = append(tokens, late, expired, forged)
	if code := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "alice-late", "", late); code != 0 {
		t.Errorf("token expired 10s ago (leeway 30s): CONNACK %#x, want 0", code)
	}
	for _, v := range []int{5, 4} {
		for _, c := range []struct{ what, user, token string }{
			{"expired token", "alice", expired},
			{"alice's token as bob", "bob", alice},
			{"token signed with another secret", "alice", forged},
		} {
			if got := try(t, ctDialTCP(t, n.MQTTAddr()), v, fmt.Sprintf("x-%d", v), c.user, c.token); got != refusedCode(v) {
				t.Errorf("v%d %s: CONNACK %#x, want %#x", v, c.what, got, refusedCode(v))
			}
		}
	}
	if _, ok := obs.last("bob"); ok {
		t.Errorf("bob has presence")
	}

	// The client id bound exactly, and by prefix.
	pinned := hs256(t, secret, jwt.MapClaims{"sub": "alice", "client_id": "alice-pinned", "exp": hour})
	prefixed := hs256(t, secret, jwt.MapClaims{"sub": "bob", "client_id_prefix": "bob-", "exp": hour})
	tokens = append(tokens, pinned, prefixed)
	if code := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "alice-pinned", "", pinned); code != 0 {
		t.Errorf("bound client id: CONNACK %#x, want 0", code)
	}
	if code := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "bob-phone", "", prefixed); code != 0 {
		t.Errorf("client id with the bound prefix: CONNACK %#x, want 0", code)
	}
	obs.waitFor("bob", "session bob-phone", hasSession("bob-phone"))
	for _, c := range []struct {
		version       int
		id, user, tok string
		want          byte
	}{
		{5, "alice-other", "", pinned, rcClientIDNotValid},
		{4, "alice-other", "alice", pinned, rc3IDRejected},
		{5, "alice-phone", "", prefixed, rcClientIDNotValid},
		{4, "alice-phone", "bob", prefixed, rc3IDRejected},
	} {
		if got := try(t, ctDialTCP(t, n.MQTTAddr()), c.version, c.id, c.user, c.tok); got != c.want {
			t.Errorf("v%d client id %s with a token binding another: CONNACK %#x, want %#x", c.version, c.id, got, c.want)
		}
	}
	if p, _ := obs.last("alice"); slices.ContainsFunc(p.Sessions, func(s presence.SessionView) bool { return s.ID == "alice-other" }) {
		t.Errorf("a refused client id has a session: %+v", p.Sessions)
	}

	s := n.authStats()
	// accepted: svc x2, alice x3, late, pinned, bob-phone; refused: 3 x 2
	// versions; client id: 4.
	if s == nil || s.Accepted != 8 || s.Refused != 6 || s.ClientIDDenied != 4 || s.Anonymous != 0 {
		t.Errorf("auth counters %+v, want accepted 8, refused 6, client_id_denied 4", s)
	}
	logs := n.log.String()
	for _, tok := range tokens {
		if sig := tok[strings.LastIndex(tok, ".")+1:]; strings.Contains(logs, sig) {
			t.Errorf("the log holds a token's signature:\n%s", logs)
		}
	}
	if len(n.logLines("connection refused")) == 0 {
		t.Errorf("no refusal logged:\n%s", logs)
	}
	obs.check()
}

// withResume asks for a session that outlives the connection.
func withResume(expiry uint32) connectOpt {
	return func(c *paho.Connect) {
		c.CleanStart = false
		if c.Properties == nil {
			c.Properties = &paho.ConnectProperties{}
		}
		c.Properties.SessionExpiryInterval = &expiry
	}
}

// A client id belongs to its user: bob, with valid credentials and alice's
// client id, connects to a session of his own (client ids are scoped by
// user) and cannot take alice's live or persisted session; alice's
// connection, session and presence are untouched. With identity.user_from
// client_id, bob cannot name alice in his client id.
func TestAuthClientIDTheft(t *testing.T) {
	pwfile := filepath.Join(t.TempDir(), "passwd")
	secrets := map[string]string{"alice": "alice-Secret-1", "bob": "bob-Secret-2", "ops": "ops-Secret-3"}
	writePasswordFile(t, pwfile, secrets)

	t.Run("live and persisted sessions", func(t *testing.T) {
		n := startAuthNode(t, func(c *configs.Config) {
			c.Auth.PasswordFile = pwfile
			c.Presence.Observers = []string{"ops"}
		})
		obs := newObserver(t, n.MQTTAddr(), "presence/users/+", withUser("ops"), withPassword(secrets["ops"]))
		alice := dial5(t, n.MQTTAddr(), "c-1", "alice", withPassword(secrets["alice"]))
		on := obs.waitFor("alice", "session c-1", hasSession("c-1"))

		if code := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "c-1", "bob", secrets["bob"]); code != 0 {
			t.Errorf("bob with alice's client id: CONNACK %#x, want 0 (his own session)", code)
		}
		if code := try(t, wsTransport(n.WSAddr()).dial(t), 4, "c-1", "bob", secrets["bob"]); code != rc3Accepted {
			t.Errorf("bob with alice's client id, 3.1.1 over websocket: CONNACK %#x, want 0 (his own session)", code)
		}
		// alice's connection still works, and the first change after
		// bob's attempts is hers.
		if rc := alice.publish(t, "presence/set", `{"status":"away","text":"marker"}`, 1, false); rc != 0 {
			t.Fatalf("alice's presence/set after the theft: PUBACK %#x", rc)
		}
		marker := ctNext(obs, "alice", on.Version, "away/marker", func(p presence.Aggregate) bool { return p.Text == "marker" })
		if got := ctSince(obs, "alice", on.Version); len(got) != 1 || got[0].Version != marker.Version {
			t.Errorf("alice's presence changed %d times, want once (her own set): %+v", len(got), got)
		}
		if s, ok := ctSessionOf(marker, "c-1"); !ok || len(marker.Sessions) != 1 || marker.Status != presence.Away {
			t.Errorf("alice after the theft: %+v (session %+v)", marker, s)
		}
		if got := n.Stats().Of("connect_refusals_total", "client_id_taken"); got != 0 {
			t.Errorf("client_id_taken %d, want 0: client ids are scoped by user", got)
		}

		// A persisted session (session expiry) is alice's too.
		kept, code := try5(t, ctDialTCP(t, n.MQTTAddr()), "c-2", withUser("alice"), withPassword(secrets["alice"]), withResume(300))
		if code != 0 {
			t.Fatalf("alice c-2: CONNACK %#x", code)
		}
		obs.waitFor("alice", "session c-2", hasSession("c-2"))
		kept.disconnect()
		obs.waitFor("alice", "c-2 gone", func(p presence.Aggregate) bool { _, ok := ctSessionOf(p, "c-2"); return !ok })
		if code := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "c-2", "bob", secrets["bob"]); code != 0 {
			t.Errorf("bob with alice's persisted client id: CONNACK %#x, want 0 (his own session)", code)
		}
		back, ack, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), "c-2", "alice", withPassword(secrets["alice"]), withResume(300))
		if err != nil || ack.ReasonCode != 0 || !ack.SessionPresent {
			t.Errorf("alice back on c-2: %v, CONNACK %+v: want her session present", err, ack)
		}
		_ = back
		for _, p := range obs.history("alice") {
			if p.Status == presence.Offline {
				t.Errorf("alice was seen offline: %+v", p)
			}
		}
		for _, p := range obs.history("bob") {
			for _, s := range p.Sessions {
				if s.ID != "c-1" && s.ID != "c-2" {
					t.Errorf("bob's session %+v", s)
				}
			}
		}
		obs.check()
	})

	t.Run("identity.user_from client_id", func(t *testing.T) {
		n := startAuthNode(t, func(c *configs.Config) {
			c.Auth.PasswordFile = pwfile
			c.Presence.Observers = []string{"ops"}
			c.Identity.UserFrom = configs.UserFromClientID
		})
		obs := newObserver(t, n.MQTTAddr(), "presence/users/+", withUser("ops"), withPassword(secrets["ops"]))
		if code := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "alice/phone", "bob", secrets["bob"]); code != rcClientIDNotValid {
			t.Errorf("bob as alice/phone: CONNACK %#x, want %#x", code, rcClientIDNotValid)
		}
		if code := try(t, ctDialTCP(t, n.MQTTAddr()), 4, "alice/phone", "bob", secrets["bob"]); code != rc3IDRejected {
			t.Errorf("bob as alice/phone, 3.1.1: CONNACK %#x, want %#x", code, rc3IDRejected)
		}
		if code := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "bob/phone", "bob", secrets["bob"]); code != 0 {
			t.Errorf("bob as bob/phone: CONNACK %#x, want 0", code)
		}
		on := obs.waitFor("bob", "session bob/phone", hasSession("bob/phone"))
		if on.Sessions[0].Device != "phone" {
			t.Errorf("bob's session: %+v", on.Sessions)
		}
		if code := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "alice/phone", "alice", secrets["alice"]); code != 0 {
			t.Errorf("alice as alice/phone: CONNACK %#x, want 0", code)
		}
		obs.waitFor("alice", "session alice/phone", hasSession("alice/phone"))
		if s := n.authStats(); s == nil || s.ClientIDDenied != 2 {
			t.Errorf("auth counters %+v, want client_id_denied 2", s)
		}
		obs.check()
	})
}

// auth.allow_anonymous with a password file: a client without credentials
// is an observer: it reads presence, but neither "#" nor presence/set; a
// username without its password is still refused.
func TestAuthAnonymousObserver(t *testing.T) {
	pwfile := filepath.Join(t.TempDir(), "passwd")
	writePasswordFile(t, pwfile, map[string]string{"alice": "alice-Secret-1"})
	n := startAuthNode(t, func(c *configs.Config) {
		c.Auth.PasswordFile = pwfile
		c.Auth.AllowAnonymous = true
	})
	anon := newObserver(t, n.MQTTAddr(), "presence/users/+")
	dial5(t, n.MQTTAddr(), "alice-1", "alice", withPassword("alice-Secret-1"))
	anon.waitFor("alice", "session alice-1", hasSession("alice-1"))

	for _, f := range []string{"#", "$SYS/#", "$share/g/#", "+/#"} {
		if got := subAck(t, anon.c, f); got != rcNotAuthorized {
			t.Errorf("anonymous %s: SUBACK %#x, want %#x", f, got, rcNotAuthorized)
		}
	}
	if rc := anon.c.publish(t, "presence/set", `{"status":"dnd","text":"anon"}`, 1, false); rc != rcNotAuthorized {
		t.Errorf("anonymous presence/set: PUBACK %#x, want %#x", rc, rcNotAuthorized)
	}
	for _, v := range []int{5, 4} {
		if code := try(t, ctDialTCP(t, n.MQTTAddr()), v, "x", "alice", ""); code != refusedCode(v) {
			t.Errorf("v%d alice without a password: CONNACK %#x, want %#x", v, code, refusedCode(v))
		}
	}
	if s := n.authStats(); s == nil || s.Anonymous != 1 || s.Accepted != 1 || s.Refused != 2 {
		t.Errorf("auth counters %+v, want anonymous 1, accepted 1, refused 2", s)
	}
	if p, _ := anon.last("alice"); p.Status != presence.Online || p.Text == "anon" || len(p.Sessions) != 1 {
		t.Errorf("alice: %+v", p)
	}
	for _, topic := range ctTopics(anon) {
		if topic != "presence/users/alice" {
			t.Errorf("anonymous observer received %s", topic)
		}
	}
	anon.check()
}

// presence.visibility self: alice's presence/users/+ delivers only alice
// (retained and live), her presence/users/bob is refused; bob's presence
// changes meanwhile reach the service account. Without an authentication
// method the setting is refused.
func TestAuthVisibilitySelf(t *testing.T) {
	pwfile := filepath.Join(t.TempDir(), "passwd")
	secrets := map[string]string{"alice": "alice-Secret-1", "bob": "bob-Secret-2", "ops": "ops-Secret-3"}
	writePasswordFile(t, pwfile, secrets)
	n := startAuthNode(t, func(c *configs.Config) {
		c.Auth.PasswordFile = pwfile
		c.Presence.Observers = []string{"ops"}
		c.Presence.Visibility = configs.VisibilitySelf
	})
	ops := newObserver(t, n.MQTTAddr(), "presence/users/+", withUser("ops"), withPassword(secrets["ops"]))
	// bob is online first, so that alice's subscriptions find his
	// retained presence.
	bob := newObserver(t, n.MQTTAddr(), "presence/users/+", withUser("bob"), withPassword(secrets["bob"]))
	bobOn := ops.waitStatus("bob", presence.Online)
	bob.waitStatus("bob", presence.Online)

	alice := newObserver(t, n.MQTTAddr(), "presence/users/+", withUser("alice"), withPassword(secrets["alice"]))
	aliceOn := alice.waitStatus("alice", presence.Online)
	if got := subAck(t, alice.c, "presence/users/bob"); got != rcNotAuthorized {
		t.Errorf("alice's presence/users/bob: SUBACK %#x, want %#x", got, rcNotAuthorized)
	}

	// bob changes and leaves; ops sees it all.
	if rc := bob.c.publish(t, "presence/set", `{"status":"busy","text":"bob's secret"}`, 1, false); rc != 0 {
		t.Fatalf("bob's presence/set: PUBACK %#x", rc)
	}
	ctNext(ops, "bob", bobOn.Version, "busy", func(p presence.Aggregate) bool { return p.Status == presence.Busy })
	bob.waitFor("bob", "busy", func(p presence.Aggregate) bool { return p.Status == presence.Busy })
	bob.c.disconnect()
	ops.waitStatus("bob", presence.Offline)

	// alice's own change comes after all of bob's: once she has it,
	// anything of bob's would have come before.
	if rc := alice.c.publish(t, "presence/set", `{"status":"away","text":"marker"}`, 1, false); rc != 0 {
		t.Fatalf("alice's presence/set: PUBACK %#x", rc)
	}
	ctNext(alice, "alice", aliceOn.Version, "marker", func(p presence.Aggregate) bool { return p.Text == "marker" })
	ctNext(ops, "alice", aliceOn.Version, "marker", func(p presence.Aggregate) bool { return p.Text == "marker" })
	if h := alice.history("bob"); len(h) != 0 {
		t.Errorf("alice received bob's presence: %+v", h)
	}
	for _, topic := range ctTopics(alice) {
		if topic != "presence/users/alice" {
			t.Errorf("alice received %s", topic)
		}
	}
	for _, topic := range ctTopics(bob) {
		if topic != "presence/users/bob" {
			t.Errorf("bob received %s", topic)
		}
	}
	if len(ops.history("bob")) < 3 || len(ops.history("alice")) < 2 {
		t.Errorf("ops saw bob %d times and alice %d times", len(ops.history("bob")), len(ops.history("alice")))
	}
	ops.check()
	alice.check()
	bob.check()

	cfg := authConfig(t, func(c *configs.Config) { c.Presence.Visibility = configs.VisibilitySelf })
	if nn, err := presenced.NewBroker(cfg, slog.New(slog.DiscardHandler)); err == nil {
		_ = nn.Stop(context.Background())
		t.Errorf("presenced.NewBroker accepted visibility self without an authentication method")
	} else if !strings.Contains(err.Error(), "visibility") {
		t.Errorf("presenced.NewBroker: %v, want an error naming presence.visibility", err)
	}
}

// externalIPv4 returns an address of this host that is not loopback, or nil.
func externalIPv4() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.To4()
		}
	}
	return nil
}

// Without an authentication method, MQTT listens on loopback only even when
// told 0.0.0.0, and says why; auth.allow_anonymous opens it.
func TestAuthLoopbackPosture(t *testing.T) {
	ext := externalIPv4()
	for _, anonymous := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow_anonymous %v", anonymous), func(t *testing.T) {
			n := startAuthNode(t, func(c *configs.Config) {
				c.MQTT.Addr, c.MQTT.WSAddr = "0.0.0.0:0", "0.0.0.0:0"
				c.Auth.AllowAnonymous = anonymous
			})
			warned := strings.Contains(n.log.String(), "no authentication configured: MQTT listens on loopback only")
			for _, addr := range []string{n.MQTTAddr(), n.WSAddr()} {
				host, port, err := net.SplitHostPort(addr)
				if err != nil {
					t.Fatalf("address %q: %v", addr, err)
				}
				ip := net.ParseIP(host)
				if !anonymous && (ip == nil || !ip.Equal(net.IPv4(127, 0, 0, 1))) {
					t.Errorf("without authentication the listener is on %s, want 127.0.0.1", addr)
				}
				if anonymous && (ip == nil || !ip.IsUnspecified()) {
					t.Errorf("with allow_anonymous the listener is on %s, want the wildcard address", addr)
				}
				if ext == nil {
					continue
				}
				c, err := net.DialTimeout("tcp", net.JoinHostPort(ext.String(), port), waitTimeout)
				if err == nil {
					_ = c.Close()
				}
				if !anonymous && err == nil {
					t.Errorf("without authentication %s answers on %s", addr, ext)
				}
				if anonymous && err != nil {
					t.Errorf("with allow_anonymous %s does not answer on %s: %v", addr, ext, err)
				}
			}
			if warned == anonymous {
				t.Errorf("allow_anonymous %v: loopback warning logged %v\n%s", anonymous, warned, n.log)
			}
			// Either way, a client connects on loopback with any name.
			obs := newObserver(t, "127.0.0.1:"+portOf(t, n.MQTTAddr()), "presence/users/+")
			dial5(t, "127.0.0.1:"+portOf(t, n.MQTTAddr()), "una-1", "una")
			obs.waitStatus("una", presence.Online)
			obs.check()
		})
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// adminDo sends GET path to an admin address with an Authorization header
// (none when empty).
func adminDo(t *testing.T, addr, path, authorization string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := mnHTTP.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, b
}

// adminStats is the part of GET /api/v1/stats these tests read.
type adminStats struct {
	Listeners map[string]struct {
		TLSFailures int64 `json:"tls_failures"`
	} `json:"listeners"`
	Auth *struct {
		Accepted, Anonymous, Refused int64
		ClientIDDenied               int64 `json:"client_id_denied"`
	} `json:"auth"`
	AdminRefused int64 `json:"admin_refused"`
}

func getStats(t *testing.T, addr, authorization string) adminStats {
	t.Helper()
	code, body := adminDo(t, addr, "/api/v1/stats", authorization)
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/stats: %d %s", code, body)
	}
	var s adminStats
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("stats: %v: %s", err, body)
	}
	return s
}

// admin.token guards everything but /healthz and /readyz; a non-loopback
// admin address without a token is refused by validation.
func TestAuthAdminToken(t *testing.T) {
	const token = "admin-Token-7f3c9a"
	n := startAuthNode(t, func(c *configs.Config) { c.Admin.Token = token })
	addr := n.AdminAddr()
	for _, c := range []struct {
		path, auth string
		want       int
	}{
		{"/api/v1/stats", "", http.StatusUnauthorized},
		{"/api/v1/stats", "Bearer wrong-token", http.StatusUnauthorized},
		{"/api/v1/stats", "Basic " + token, http.StatusUnauthorized},
		{"/api/v1/users/alice", "", http.StatusUnauthorized},
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
		{"/api/v1/stats", "Bearer " + token, http.StatusOK},
		{"/api/v1/users/alice", "Bearer " + token, http.StatusNotFound},
	} {
		if code, body := adminDo(t, addr, c.path, c.auth); code != c.want {
			t.Errorf("GET %s with %q: %d %s, want %d", c.path, c.auth, code, body, c.want)
		}
	}
	if s := getStats(t, addr, "Bearer "+token); s.AdminRefused != 4 {
		t.Errorf("admin_refused %d, want 4", s.AdminRefused)
	}
	if strings.Contains(n.log.String(), token) {
		t.Errorf("the log holds the admin token:\n%s", n.log)
	}

	cfg := configs.Defaults()
	cfg.Admin.Addr = "0.0.0.0:8080"
	cfg.ApplyDefaults()
	err := cfg.Validate()
	if !errors.Is(err, configs.ErrInvalid) || !strings.Contains(err.Error(), "admin") {
		t.Errorf("non-loopback admin.addr without a token: %v, want an invalid admin value", err)
	}
	cfg.Admin.Token = token
	if err := cfg.Validate(); err != nil {
		t.Errorf("non-loopback admin.addr with a token: %v", err)
	}
}

// mqtt.ws_allowed_origins: an upgrade from another Origin is refused with
// 403; the allowed Origin and no Origin (not a browser) connect.
func TestAuthWebSocketOrigin(t *testing.T) {
	n := startAuthNode(t, func(c *configs.Config) { c.MQTT.WSAllowedOrigins = []string{"https://app.example"} })
	url := "ws://" + n.WSAddr() + "/mqtt"
	if _, resp, err := wsDial(url, nil, "https://evil.example"); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("Origin https://evil.example: %v (%s), want 403", err, statusOfResp(resp))
	}
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	for _, c := range []struct{ id, origin string }{{"kim-app", "https://app.example"}, {"kim-cli", ""}} {
		conn, resp, err := wsDial(url, nil, c.origin)
		if err != nil {
			t.Fatalf("Origin %q: %v (%s)", c.origin, err, statusOfResp(resp))
		}
		if _, code := try5(t, conn, c.id, withUser("kim")); code != 0 {
			t.Errorf("Origin %q: CONNACK %#x", c.origin, code)
		}
		obs.waitFor("kim", "session "+c.id, hasSession(c.id))
	}
	obs.check()
}

// binAuth starts the binary with a YAML config file (and Redis with
// INTEGRATION_STORE=redis) and returns it with its MQTT, WebSocket and
// admin addresses.
func binAuth(t *testing.T, yaml string) (p *binProc, mqttAddr, wsAddr, adminAddr string) {
	t.Helper()
	bin := mnBinary(t)
	file := filepath.Join(t.TempDir(), "presenced.yaml")
	writeAtomic(t, file, []byte(yaml))
	args := []string{"--config", file, "--mqtt-addr", "127.0.0.1:0", "--ws-addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--node-id", "bin-auth", "--log-format", "json"}
	if os.Getenv("INTEGRATION_STORE") == "redis" {
		args = append(args, "--redis-addr", redistest.Start(t).Addr())
	}
	p = binStart(t, bin, binEnv(), args...)
	started := p.waitLine(t, "presenced started")
	mqttAddr, _ = started["mqtt"].(string)
	wsAddr, _ = started["ws"].(string)
	adminAddr, _ = started["admin"].(string)
	if mqttAddr == "" || wsAddr == "" || adminAddr == "" {
		t.Fatalf("started line: %v", started)
	}
	return p, mqttAddr, wsAddr, adminAddr
}

// hup sends SIGHUP and waits for the reload's log line.
func (p *binProc) hup(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP: %v", err)
	}
	p.waitLine(t, "reloaded: password file, token keys, TLS certificates, admin token file")
}

// The real binary reloads its password file and admin token file on
// SIGHUP, without dropping connections.
func TestAuthReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	pwfile := filepath.Join(dir, "passwd")
	tokenFile := filepath.Join(dir, "admin.token")
	writePasswordFile(t, pwfile, map[string]string{"alice": "Old-Password-1", "ops": "ops-Secret-3"})
	writeAtomic(t, tokenFile, []byte("Old-Admin-Token\n"))
	p, mqttAddr, _, adminAddr := binAuth(t, fmt.Sprintf(
		"auth:\n  password_file: %s\nadmin:\n  token_file: %s\npresence:\n  observers: [ops]\n", pwfile, tokenFile))

	obs := newObserver(t, mqttAddr, "presence/users/+", withUser("ops"), withPassword("ops-Secret-3"))
	alice := dial5(t, mqttAddr, "alice-kept", "alice", withPassword("Old-Password-1"))
	on := obs.waitFor("alice", "session alice-kept", hasSession("alice-kept"))

	writePasswordFile(t, pwfile, map[string]string{"alice": "New-Password-2", "ops": "ops-Secret-3"})
	writeAtomic(t, tokenFile, []byte("New-Admin-Token\n"))
	p.hup(t)
	testkit.Wait(t, waitTimeout, "the new password accepted, the old refused", func() error {
		if code := try(t, ctDialTCP(t, mqttAddr), 5, "alice-new", "alice", "New-Password-2"); code != 0 {
			return fmt.Errorf("new password: CONNACK %#x", code)
		}
		if code := try(t, ctDialTCP(t, mqttAddr), 5, "alice-old", "alice", "Old-Password-1"); code != rcBadUserNameOrPass {
			return fmt.Errorf("old password: CONNACK %#x", code)
		}
		return nil
	})
	if code, _ := adminDo(t, adminAddr, "/api/v1/stats", "Bearer Old-Admin-Token"); code != http.StatusUnauthorized {
		t.Errorf("old admin token after the reload: %d, want 401", code)
	}
	// The connection made with the old password is still up.
	if rc := alice.publish(t, "presence/set", `{"status":"away","text":"kept"}`, 1, false); rc != 0 {
		t.Fatalf("alice-kept after the reload: PUBACK %#x", rc)
	}
	ctNext(obs, "alice", on.Version, "alice-kept away", func(p presence.Aggregate) bool {
		s, ok := ctSessionOf(p, "alice-kept")
		return ok && s.Status == presence.Away
	})
	s := getStats(t, adminAddr, "Bearer New-Admin-Token")
	if s.Auth == nil || s.Auth.Refused < 1 || s.AdminRefused != 1 {
		t.Errorf("stats after the reload: %+v", s)
	}
	for _, secret := range []string{"Old-Password-1", "New-Password-2", "Old-Admin-Token", "New-Admin-Token"} {
		if strings.Contains(p.stdout.String(), secret) || strings.Contains(p.stderr.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
	obs.check()
}
