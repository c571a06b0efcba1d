package lifecycle

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

var update = flag.Bool("update", false, "write the golden files of ours")

// sample is one session of the golden events.
var sample = presence.SessionView{ID: "sensor-7", Epoch: 42, Node: "node-a", Device: "sensor", Status: presence.Online,
	ConnectedAt: time.UnixMilli(1733112000123).UTC(),
	Conn:        presence.Conn{Username: "alice", IP: "192.0.2.10", Port: 1883, Listener: "tcp", ProtoVer: 5, KeepAlive: 30, CleanStart: true, Expiry: 60}}

func goldenEvents() map[string]presence.LifecycleEvent {
	at := time.UnixMilli(1733112060456).UTC()
	return map[string]presence.LifecycleEvent{
		"connected":    {Kind: presence.LifecycleConnected, User: "alice", Session: sample, At: sample.ConnectedAt, Version: 7},
		"disconnected": {Kind: presence.LifecycleDisconnected, User: "alice", Session: sample, Reason: presence.EndClean, At: at, Version: 8},
		"connect_failed": {Kind: presence.LifecycleConnectFailed, User: "mallory",
			Session: presence.SessionView{ID: "sensor-9", Conn: presence.Conn{Username: "mallory", IP: "192.0.2.66"}}, Reason: RefusedAuth, At: at},
	}
}

// fields returns a JSON object's keys with the JSON type of each value.
func fields(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = reflect.TypeOf(v).String()
	}
	return out
}

func TestGoldenDialects(t *testing.T) {
	cases := []struct {
		dialect Dialect
		name    string // file prefix
		kind    string
		topic   string
		extra   []string // fields ours adds to the vendor's sample
	}{
		{AWS{}, "aws", "connected", "$aws/events/presence/connected/sensor-7", nil},
		{AWS{}, "aws", "disconnected", "$aws/events/presence/disconnected/sensor-7", nil},
		{AWS{}, "aws", "connect_failed", "$aws/events/presence/connect_failed/sensor-9", nil},
		// EMQX 5 adds protocol to its 4.x-era documented sample (emqx_sys's
		// common fields), and connected_at to the disconnected one.
		{EMQX{}, "emqx", "connected", "$SYS/brokers/node-a/clients/sensor-7/connected", []string{"protocol"}},
		{EMQX{}, "emqx", "disconnected", "$SYS/brokers/node-a/clients/sensor-7/disconnected", []string{"connected_at", "protocol"}},
	}
	evs := goldenEvents()
	for _, tc := range cases {
		t.Run(tc.name+"_"+tc.kind, func(t *testing.T) {
			topic, got, ok := tc.dialect.Encode(evs[tc.kind])
			if !ok || topic != tc.topic {
				t.Fatalf("topic %q (%v), want %q", topic, ok, tc.topic)
			}
			var pretty bytes.Buffer
			_ = json.Indent(&pretty, got, "", "    ")
			pretty.WriteByte('\n')
			ours := filepath.Join("testdata", tc.name+"_"+tc.kind+".json")
			if *update {
				if err := os.WriteFile(ours, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(ours)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Errorf("payload\n%s\nwant (%s)\n%s", pretty.Bytes(), ours, want)
			}
			vendor, err := os.ReadFile(filepath.Join("testdata", tc.name+"_"+tc.kind+".vendor.json"))
			if err != nil {
				t.Fatal(err)
			}
			vf, of := fields(t, vendor), fields(t, got)
			for k, typ := range vf {
				if of[k] != typ {
					t.Errorf("field %q: ours %q, the vendor's sample %q", k, of[k], typ)
				}
			}
			var added []string
			for k := range of {
				if _, ok := vf[k]; !ok {
					added = append(added, k)
				}
			}
			slices.Sort(added)
			if !slices.Equal(added, tc.extra) {
				t.Errorf("fields ours adds: %v, want %v", added, tc.extra)
			}
		})
	}
}

func TestAWSReasons(t *testing.T) {
	want := map[presence.EndReason]string{
		presence.EndClean: "CLIENT_INITIATED_DISCONNECT", presence.EndTimeout: "MQTT_KEEP_ALIVE_TIMEOUT",
		presence.EndNetwork: "CONNECTION_LOST", presence.EndTakeover: "DUPLICATE_CLIENTID",
		presence.EndKicked: "SERVER_INITIATED_DISCONNECT", presence.EndDrain: "SERVER_INITIATED_DISCONNECT",
		presence.EndShutdown: "SERVER_INITIATED_DISCONNECT", presence.EndNodeLost: "CONNECTION_LOST", "": "UNKNOWN",
		presence.EndMissed: "MQTT_KEEP_ALIVE_TIMEOUT",
	}
	for _, r := range append(presence.EndReasons[:], "") {
		if got := AWSDisconnectReason(r); got != want[r] {
			t.Errorf("%q: %s, want %s", r, got, want[r])
		}
	}
	for r, w := range map[presence.EndReason]string{RefusedAuth: "AUTHORIZATION_FAILED", RefusedThrottle: "THROTTLED",
		RefusedProtocol: "CLIENT_ERROR", RefusedServer: "SERVER_INITIATED_DISCONNECT"} {
		if got := AWSConnectFailureReason(r); got != w {
			t.Errorf("refusal %q: %s, want %s", r, got, w)
		}
	}
	ev := goldenEvents()["disconnected"]
	ev.Reason = presence.EndNetwork
	_, b, _ := AWS{}.Encode(ev)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m["clientInitiatedDisconnect"] != false {
		t.Errorf("a network drop is client initiated: %s", b)
	}
}

func TestEMQXReasons(t *testing.T) {
	want := map[presence.EndReason]string{
		presence.EndClean: "normal", presence.EndTimeout: "keepalive_timeout", presence.EndNetwork: "sock_closed",
		presence.EndTakeover: "takenover", presence.EndKicked: "kicked", presence.EndDrain: "drain",
		presence.EndShutdown: "shutdown", presence.EndNodeLost: "node_lost", "": "unknown",
		presence.EndMissed: "missed",
	}
	for _, r := range append(presence.EndReasons[:], "") {
		if got := EMQXReason(r); got != want[r] {
			t.Errorf("%q: %s, want %s", r, got, want[r])
		}
	}
	if _, _, ok := (EMQX{}).Encode(goldenEvents()["connect_failed"]); ok {
		t.Error("EMQX has no connect_failed event")
	}
}

func TestPrefixesAndBadIDs(t *testing.T) {
	ev := goldenEvents()["connected"]
	if topic, _, _ := (AWS{Prefix: "events/aws"}).Encode(ev); topic != "events/aws/connected/sensor-7" {
		t.Errorf("aws prefix: %s", topic)
	}
	if topic, _, _ := (EMQX{Prefix: "sys/brokers"}).Encode(ev); topic != "sys/brokers/node-a/clients/sensor-7/connected" {
		t.Errorf("emqx prefix: %s", topic)
	}
	for _, id := range []string{"", "a+b", "a#"} {
		ev.Session.ID = id
		if _, _, ok := (AWS{}).Encode(ev); ok {
			t.Errorf("client id %q published", id)
		}
	}
}

func TestSessionIdentifier(t *testing.T) {
	a := SessionIdentifier("alice", "c1", 7)
	if a != SessionIdentifier("alice", "c1", 7) {
		t.Fatal("not deterministic")
	}
	if len(a) != 32 || a[12] != '5' {
		t.Errorf("%s: not a version 5 UUID in 32 hex digits", a)
	}
	for _, b := range []string{SessionIdentifier("alice", "c1", 8), SessionIdentifier("bob", "c1", 7), SessionIdentifier("alice", "c2", 7),
		SessionIdentifier("alicec", "1", 7)} {
		if a == b {
			t.Errorf("two sessions share %s", a)
		}
	}
}

func TestRefusalReason(t *testing.T) {
	for _, tc := range []struct {
		v, code byte
		want    presence.EndReason
	}{
		{4, 0x04, RefusedAuth}, {4, 0x05, RefusedAuth}, {4, 0x03, RefusedThrottle}, {4, 0x02, RefusedProtocol},
		{5, 0x86, RefusedAuth}, {5, 0x87, RefusedAuth}, {5, 0x97, RefusedThrottle}, {5, 0x9F, RefusedThrottle},
		{5, 0x9C, RefusedServer}, {5, 0x8B, RefusedServer}, {5, 0x85, RefusedProtocol}, {5, 0x82, RefusedProtocol},
	} {
		if got := RefusalReason(tc.v, tc.code); got != tc.want {
			t.Errorf("v%d 0x%02x: %s, want %s", tc.v, tc.code, got, tc.want)
		}
	}
}

func TestReaches(t *testing.T) {
	const p = "$aws/events/presence"
	for f, want := range map[string]bool{
		"$aws/#": true, "$aws/events/+/connected/x": true, p: true, p + "/connected/x": true, p + "/#": true,
		"$aws/events": false, "$aws/things/x": false, "#": true, "+/events/presence/x": true, "$aws/events/presencex": false,
	} {
		if got := Reaches(f, p); got != want {
			t.Errorf("Reaches(%q): %v, want %v", f, got, want)
		}
	}
}
