package integration

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/configs"
)

// startLevelNode is startAuthNode with the node's log at level (the
// binary's default is info).
func startLevelNode(t *testing.T, level slog.Level, edit func(*configs.Config)) *authNode {
	t.Helper()
	cfg := authConfig(t, edit)
	buf := &binBuffer{}
	var w io.Writer = buf
	if testing.Verbose() {
		w = io.MultiWriter(buf, testLogWriter{t})
	}
	n, err := presenced.NewBroker(cfg, slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
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

// Ten refused MQTT 5 QoS 1 publishes of 1 MB each (under presence/, which
// is read-only) are answered PUBACK 0x87 and make one info line of a few
// hundred bytes, without a byte of the payload (mochi logged each at error
// with the whole packet: 13 MB).
func TestRefusedPublishLogBounded(t *testing.T) {
	n := startLevelNode(t, slog.LevelInfo, nil)
	c := dial5(t, n.MQTTAddr(), "flood-1", "mallory")
	payload := strings.Repeat("Z", 1_000_000)
	before := len(n.log.String())
	for i := range 10 {
		if rc := c.publish(t, "presence/users/alice", payload, 1, true); rc != rcNotAuthorized {
			t.Fatalf("publish %d: PUBACK %#x, want %#x", i, rc, rcNotAuthorized)
		}
	}
	logged := n.log.String()[before:]
	if strings.Contains(logged, "ZZZZZZZZ") {
		t.Errorf("the log holds the payload")
	}
	if len(logged) > 1000 {
		t.Errorf("10 refused publishes logged %d bytes, want at most 1000", len(logged))
	}
	lines := n.logLines("publish refused")
	if len(lines) != 1 {
		t.Fatalf("%d \"publish refused\" lines, want 1 (once per client per minute):\n%s", len(lines), logged)
	}
	if l := lines[0]; l["client"] != "flood-1" || l["topic"] != "presence/users/alice" || l["level"] != "INFO" {
		t.Errorf("refusal line %v", l)
	}
	if bytes.Count([]byte(logged), []byte("\n")) > 2 {
		t.Errorf("log lines:\n%s", logged)
	}
}
