package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// healthServer serves /readyz and /healthz with the given status on
// loopback and returns its address.
func healthServer(t *testing.T, ready int) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(ready)
		if ready == http.StatusOK {
			_, _ = w.Write([]byte("ready\n"))
		} else {
			_, _ = w.Write([]byte("draining\n"))
		}
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestRunHealth(t *testing.T) {
	t.Parallel()
	ready := healthServer(t, http.StatusOK)
	draining := healthServer(t, http.StatusServiceUnavailable)
	_, readyPort, _ := net.SplitHostPort(ready)

	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "presenced.yaml")
	if err := os.WriteFile(cfgFile, []byte("admin:\n  addr: \"127.0.0.1:"+readyPort+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A hung admin port: accepts, never answers.
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hung.Close() })

	tests := []struct {
		name        string
		args        []string
		env         []string
		code        int
		out, errOut string
	}{
		{"ready", []string{"--addr", ready}, nil, 0, "200 ready", ""},
		{"healthz", []string{"--addr", ready, "--path", "/healthz"}, nil, 0, "200 ok", ""},
		{"draining", []string{"--addr", draining}, nil, 1, "", "503 draining"},
		{"not listening", []string{"--addr", closedAddr(t)}, nil, 1, "", "connection refused"},
		{"no answer", []string{"--addr", hung.Addr().String(), "--timeout", "200ms"}, nil, 1, "", "deadline exceeded"},
		{"every interface is asked on loopback", []string{"--addr", ":" + readyPort}, nil, 0, "http://127.0.0.1:" + readyPort + "/readyz: 200 ready", ""},
		{"address from PRESENCED_CONFIG", nil, []string{"PRESENCED_CONFIG=" + cfgFile}, 0, "200 ready", ""},
		{"address from --config", []string{"--config", cfgFile}, nil, 0, "200 ready", ""},
		{"address from the environment", nil, []string{"PRESENCED_ADMIN_ADDR=0.0.0.0:" + readyPort, "PRESENCED_ADMIN_TOKEN=x"}, 0, "200 ready", ""},
		{"admin off", nil, []string{"PRESENCED_ADMIN_ADDR=off"}, 2, "", "admin.addr is off"},
		{"bad config", nil, []string{"PRESENCED_BOGUS=1"}, 2, "", "PRESENCED_BOGUS"},
		{"missing config file", []string{"--config", filepath.Join(dir, "none.yaml")}, nil, 2, "", "none.yaml"},
		{"bad address", []string{"--addr", "nohost"}, nil, 2, "", "nohost"},
		{"addr and config", []string{"--addr", ready, "--config", cfgFile}, nil, 2, "", "usage"},
		{"extra argument", []string{"--addr", ready, "x"}, nil, 2, "", "usage"},
		{"unknown flag", []string{"--bogus"}, nil, 2, "", "usage"},
		{"help", []string{"--help"}, nil, 0, "usage: presenced health", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := run(append([]string{"health"}, tt.args...), tt.env, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit code %d, want %d (stdout %q, stderr %q)", code, tt.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.out) || (tt.out == "" && stdout.Len() != 0) {
				t.Errorf("stdout %q, want it to hold %q", stdout.String(), tt.out)
			}
			if !strings.Contains(stderr.String(), tt.errOut) || (tt.errOut == "" && stderr.Len() != 0) {
				t.Errorf("stderr %q, want it to hold %q", stderr.String(), tt.errOut)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestHealthURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		":8080":             "http://127.0.0.1:8080/readyz",
		"0.0.0.0:8080":      "http://127.0.0.1:8080/readyz",
		"[::]:8080":         "http://[::1]:8080/readyz",
		"127.0.0.1:9":       "http://127.0.0.1:9/readyz",
		"[::1]:9":           "http://[::1]:9/readyz",
		"presenced-1:8080":  "http://presenced-1:8080/readyz",
		"192.168.1.10:8080": "http://192.168.1.10:8080/readyz",
	} {
		got, err := healthURL(addr, "/readyz")
		if err != nil || got != want {
			t.Errorf("healthURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if _, err := healthURL("8080", "/readyz"); err == nil {
		t.Error("healthURL(8080) accepted an address without a port separator")
	}
}
