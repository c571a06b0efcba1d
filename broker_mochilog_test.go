package presenced

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"
)

// mochi's records that carry a whole packet are logged with a summary:
// type, topic, id, QoS and the payload's size, never the payload.
func TestMochiLogSummarisesPackets(t *testing.T) {
	var buf bytes.Buffer
	log := mochiLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "a/b", PacketID: 7,
		Payload: bytes.Repeat([]byte("Z"), 1<<20)}
	log.Error("publish packet error", "error", "not authorized", "hook", "x", "packet", pk)
	log.With("client", "c1").Warn("error processing packet", "pk", pk)
	log.Info("added hook", "hook", "presence")
	out := buf.String()
	if len(out) > 1000 || strings.Contains(out, "WlpaWlpa") || strings.Contains(out, "ZZZZ") {
		t.Fatalf("%d bytes logged:\n%.2000s", len(out), out)
	}
	for _, want := range []string{
		`"packet":{"type":"Publish","topic":"a/b","id":7,"qos":1,"payload_bytes":1048576}`,
		`"client":"c1","pk":{"type":"Publish"`,
		`"component":"mochi"`,
		`"msg":"added hook","component":"mochi","hook":"presence"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
}
