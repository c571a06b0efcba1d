package integration

import (
	"context"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// Another Redis client SPUBLISHes a forged change of alice with a huge
// version on her channel: observers never see it, and her real changes
// after it still reach them (before, the forgery showed her dnd and froze
// every later change of hers).
func TestRedisForgedChangeDoesNotFreezeAUser(t *testing.T) {
	srv := redistest.Start(t)
	n := startNode(t, func(c *configs.Config) {
		c.Redis.Addrs = []string{srv.Addr()}
		c.Redis.NodeTTL = configs.Duration(3 * time.Second)
		c.Redis.SweepInterval = configs.Duration(500 * time.Millisecond)
	})
	obs := newObserver(t, n.MQTTAddr(), "presence/users/alice")
	alice := dial5(t, n.MQTTAddr(), "alice-1", "alice")
	obs.waitFor("alice", "online", func(p presence.Aggregate) bool { return p.Status == presence.Online })
	forged := `{"u":"alice","v":"18446744073709551615","st":"dnd","tx":"forged","since":"1","ss":{}}`
	if err := srv.Client(t).SPublish(context.Background(), "presenced:c:{alice}", forged).Err(); err != nil {
		t.Fatal(err)
	}
	if rc := alice.publish(t, "presence/set", `{"status":"busy","text":"real"}`, 1, false); rc != 0 {
		t.Fatalf("presence/set: PUBACK %#x", rc)
	}
	obs.waitFor("alice", "her real change after the forgery", func(p presence.Aggregate) bool {
		return p.Status == presence.Busy && p.Text == "real"
	})
	if p, _ := obs.last("alice"); p.Text == "forged" || p.Status == presence.DND {
		t.Errorf("the forgery is shown: %+v", p)
	}
}
