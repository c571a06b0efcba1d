package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// Issue 18 (a session leak): 3,000 CONNECT-then-RST of ONE user, far over
// presence.max_sessions_per_user, many in parallel. Each CONNECT over the
// cap ends the user's oldest live session as kicked, and that oldest is
// often a connection still being established, or one just reset: the
// kick raced the new connection's own Connect to the tracker, and the
// tracker kept a session nobody would ever end (tracked_sessions stayed
// above 0 with no connection, the user shown offline). Every round must
// leave no tracked session well before the keep-alive could end anything.
func TestConnectThenResetOneUser(t *testing.T) {
	const (
		rounds    = 4
		perRound  = 3000
		inFlight  = 64
		keepAlive = 60
		user      = "rst-one"
	)
	n := startNode(t, func(c *configs.Config) {
		c.MQTT.MaxConnectionsPerAddress = 0
	})
	limit := n.cfg.Presence.MaxSessionsPerUser
	// What cleans up a connection mochi never reports is the pump's tidy,
	// once a second; a leaked session would stay until nothing ends it. The
	// bound is far below 1.5 × the keep-alive, which would end any
	// connection still open.
	bound := waitTimeout
	if bound >= keepAlive*time.Second {
		t.Fatalf("bound %v is not below the keep-alive %ds: the test would prove nothing", bound, keepAlive)
	}
	for r := range rounds {
		hellos := make([][]byte, perRound)
		for i := range hellos {
			hellos[i] = connectBytes(t, byte(4+i%2), fmt.Sprintf("rst-%d-%04d", r, i), user, keepAlive)
		}
		failed := resetStorm(n.MQTTAddr(), hellos, nil, inFlight)
		if f := failed; f != 0 {
			t.Fatalf("round %d: %d of %d connections could not be made", r, f, perRound)
		}
		settled, err := testkit.Poll(bound, testkit.Tick, func() error {
			s := n.Stats()
			return testkit.Why(s.Get("sessions") == 0 && s.Get("connections") == 0,
				fmt.Sprintf("tracked %d, connections %d, tracker queue %d",
					s.Get("sessions"), s.Get("connections"), s.Get("tracker_queue_depth")))
		})
		st := n.Stats()
		t.Logf("round %d: %d CONNECT-then-RST of one user (limit %d), settled in %v; kicked %d, abandoned %d so far",
			r, perRound, limit, settled.Round(time.Millisecond), st.Get("sessions_kicked_total"), st.Get("connections_abandoned_total"))
		if err != nil {
			t.Fatalf("round %d: sessions left tracked %v after the storm: %v", r, bound, err)
		}
	}
	u, found, err := n.Presence.User(t.Context(), user)
	if err != nil {
		t.Fatal(err)
	}
	if found && (len(u.Sessions) != 0 || u.Current.Status != presence.Offline) {
		t.Errorf("%s: sessions %+v, current %+v", user, u.Sessions, u.Current)
	}
	if n.Stats().Get("sessions_kicked_total") == 0 {
		t.Errorf("no session kicked: the storm never went over the limit, the test proves nothing")
	}
}
