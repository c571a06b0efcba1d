package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"testing/slogtest"
	"time"

	"github.com/rs/zerolog"
)

var rfc3339MilliUTC = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// lines decodes one JSON object per line.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func newJSON(t *testing.T, level string) (*bytes.Buffer, zerolog.Logger, *slog.Logger) {
	t.Helper()
	var buf bytes.Buffer
	zl, sl, err := NewLogger(&buf, level, "json")
	if err != nil {
		t.Fatalf("NewLogger: %v", err)
	}
	return &buf, zl, sl
}

func TestSlogJSON(t *testing.T) {
	t.Parallel()
	buf, _, sl := newJSON(t, "info")

	sl.With("component", "mochi").
		WithGroup("client").With("id", "c1").
		Warn("hello", "n", 3, slog.Group("net", "addr", "1.2.3.4:5", "tls", true), "err", errors.New("boom"))

	got := lines(t, buf)
	if len(got) != 1 {
		t.Fatalf("got %d lines: %s", len(got), buf)
	}
	m := got[0]
	ts, _ := m["time"].(string)
	if !rfc3339MilliUTC.MatchString(ts) {
		t.Errorf("time %q is not RFC 3339 with ms in UTC", ts)
	}
	delete(m, "time")
	want := map[string]any{
		"level":     "warn",
		"message":   "hello",
		"component": "mochi",
		"client": map[string]any{
			"id":  "c1",
			"n":   float64(3),
			"net": map[string]any{"addr": "1.2.3.4:5", "tls": true},
			"err": "boom",
		},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got  %v\nwant %v", m, want)
	}
}

func TestZerologJSON(t *testing.T) {
	t.Parallel()
	buf, zl, _ := newJSON(t, "debug")
	zl.Debug().Str("k", "v").Msg("zero")

	got := lines(t, buf)
	if len(got) != 1 {
		t.Fatalf("got %d lines: %s", len(got), buf)
	}
	m := got[0]
	if m["message"] != "zero" || m["level"] != "debug" || m["k"] != "v" {
		t.Errorf("got %v", m)
	}
	if ts, _ := m["time"].(string); !rfc3339MilliUTC.MatchString(ts) {
		t.Errorf("time %q is not RFC 3339 with ms in UTC", ts)
	}
}

func TestSlogUsesRecordTime(t *testing.T) {
	t.Parallel()
	buf, _, sl := newJSON(t, "info")
	at := time.Date(2025, 3, 4, 5, 6, 7, 890_123_456, time.FixedZone("X", 3600))
	r := slog.NewRecord(at, slog.LevelInfo, "m", 0)
	if err := sl.Handler().Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := lines(t, buf)[0]["time"]; got != "2025-03-04T04:06:07.890Z" {
		t.Errorf("time = %v", got)
	}
}

func TestLevels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		logger string     // level given to NewLogger
		record slog.Level // level of the slog record
		want   string     // level field written, or "" for dropped
	}{
		{"info", slog.LevelDebug, ""},
		{"info", slog.LevelInfo, "info"},
		{"info", slog.LevelInfo + 2, "info"},
		{"info", slog.LevelWarn, "warn"},
		{"info", slog.LevelError, "error"},
		{"info", slog.LevelError + 4, "error"},
		{"debug", slog.LevelDebug, "debug"},
		{"debug", slog.LevelDebug - 4, ""}, // below debug is trace, never enabled
		{"warn", slog.LevelInfo, ""},
		{"warn", slog.LevelWarn, "warn"},
		{"error", slog.LevelWarn + 3, ""},
		{"error", slog.LevelError, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.logger+"/"+tt.record.String(), func(t *testing.T) {
			t.Parallel()
			buf, _, sl := newJSON(t, tt.logger)
			ctx := context.Background()
			if got := sl.Enabled(ctx, tt.record); got != (tt.want != "") {
				t.Errorf("Enabled = %v", got)
			}
			sl.Log(ctx, tt.record, "msg")
			got := lines(t, buf)
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("want nothing, got %s", buf)
			case tt.want != "" && (len(got) != 1 || got[0]["level"] != tt.want):
				t.Errorf("want level %q, got %s", tt.want, buf)
			}
		})
	}
}

func TestDebugDroppedAtInfo(t *testing.T) {
	t.Parallel()
	buf, zl, sl := newJSON(t, "info")
	sl.Debug("slog debug")
	zl.Debug().Msg("zerolog debug")
	sl.Info("kept")
	got := lines(t, buf)
	if len(got) != 1 || got[0]["message"] != "kept" {
		t.Errorf("got %s", buf)
	}
}

func TestNewLoggerErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ level, format, want string }{
		{"verbose", "json", `log level "verbose"`},
		{"INFO", "json", `log level "INFO"`},
		{"", "json", `log level ""`},
		{"info", "text", `log format "text"`},
		{"info", "", `log format ""`},
	}
	for _, tt := range tests {
		_, sl, err := NewLogger(&bytes.Buffer{}, tt.level, tt.format)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewLogger(%q, %q) error = %v, want it to mention %s", tt.level, tt.format, err, tt.want)
		}
		if sl != nil {
			t.Errorf("NewLogger(%q, %q) returned a slog logger with an error", tt.level, tt.format)
		}
	}
}

func TestConsole(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	zl, sl, err := NewLogger(&buf, "debug", "console")
	if err != nil {
		t.Fatal(err)
	}
	sl.With("component", "mochi").Info("from slog", "client", "c1")
	zl.Warn().Str("user", "alice").Msg("from zerolog")

	out := buf.String()
	for _, want := range []string{"from slog", "component=mochi", "client=c1", "from zerolog", "user=alice", "INF", "WRN"} {
		if !strings.Contains(out, want) {
			t.Errorf("console output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colour codes written to a non-terminal:\n%q", out)
	}
	stamp := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z `)
	if n := len(stamp.FindAllString(out, -1)); n != 2 {
		t.Errorf("want 2 lines starting with a UTC ms timestamp, got %d:\n%s", n, out)
	}
}

// TestSlogHandlerContract runs the standard library's slog.Handler checks:
// groups, inline groups, empty groups, With, LogValuer resolution, zero time.
func TestSlogHandlerContract(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	newHandler := func(t *testing.T) slog.Handler {
		buf.Reset()
		_, sl, err := NewLogger(&buf, "debug", "json")
		if err != nil {
			t.Fatal(err)
		}
		return sl.Handler()
	}
	result := func(t *testing.T) map[string]any {
		got := lines(t, &buf)
		if len(got) != 1 {
			t.Fatalf("want one line, got %q", buf.String())
		}
		m := got[0]
		// zerolog names the message "message"; slogtest expects slog's key.
		if msg, ok := m["message"]; ok {
			m[slog.MessageKey] = msg
			delete(m, "message")
		}
		return m
	}
	slogtest.Run(t, newHandler, result)
}
