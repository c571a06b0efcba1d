package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis down at start is one clear error naming the address, and no
// warning that presence changes are held (nothing is: the node does not
// start). An outage after the start is ridden out (multinode_test.go).
func TestStartRedisDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	var logged bytes.Buffer
	r := NewRedis(RedisOptions{
		Client: c, Prefix: "t:down:", Node: "n1", NodeTTL: 3 * time.Second, Retention: time.Hour,
		Log: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})), Report: func(Event) {},
	})
	err = r.Start(context.Background())
	if err == nil {
		r.Stop()
		t.Fatal("Start succeeded with nothing listening")
	}
	want := "redis: cannot reach " + addr + " at start: dial tcp " + addr + ": "
	if !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "(presenced needs Redis at start; it rides out outages after that)") {
		t.Errorf("error %q, want %q... and why", err, want)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("error %v does not wrap ErrUnavailable", err)
	}
	if strings.Contains(logged.String(), "held") || strings.Contains(logged.String(), "unreachable") {
		t.Errorf("logged %q, want no outage warning", logged.String())
	}
	if n := r.stats.outages.Load(); n != 0 {
		t.Errorf("%d outages counted, want 0", n)
	}
}
