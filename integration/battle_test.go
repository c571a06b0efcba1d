package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	mqtt3 "github.com/eclipse/paho.mqtt.golang"
	mqtt3packets "github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// battler is a device that shares its client id with another and
// reconnects as soon as it is kicked: at once when it was taken over,
// after battleRetry when its CONNECT was refused.
type battler struct {
	connects atomic.Int64 // CONNACK success
	refused  atomic.Int64 // CONNACK with the code expected of a battle
	other    atomic.Int64 // any other failure
	lastErr  atomic.Value
	hold     func()        // ends the connection it holds at the end, if any
	done     chan struct{} // closed when it stopped trying
}

const (
	battleReconnect = 5 * time.Millisecond   // after being taken over
	battleRetry     = 100 * time.Millisecond // after a refusal
)

// battle5 runs an MQTT 5 battler until ctx ends; a refusal must be 0x9F.
func battle5(ctx context.Context, t *testing.T, addr, id, user string) *battler {
	b := &battler{done: make(chan struct{}), hold: func() {}}
	go func() {
		defer close(b.done)
		for ctx.Err() == nil {
			conn, err := net.DialTimeout("tcp", addr, waitTimeout)
			if err != nil {
				b.other.Add(1)
				b.lastErr.Store(err.Error())
				sleepCtx(ctx, battleRetry)
				continue
			}
			c, ack, err := connect5(t, conn, id, user)
			switch {
			case err == nil:
				b.connects.Add(1)
			case ack != nil && ack.ReasonCode == 0x9F:
				b.refused.Add(1)
				sleepCtx(ctx, battleRetry)
				continue
			default:
				b.other.Add(1)
				b.lastErr.Store(fmt.Sprintf("connect: %v (ack %+v)", err, ack))
				sleepCtx(ctx, battleRetry)
				continue
			}
			select {
			case <-c.Done(): // taken over
				sleepCtx(ctx, battleReconnect)
			case <-ctx.Done(): // stop trying, keep the connection for now
				b.hold = c.disconnect
				return
			}
		}
	}()
	return b
}

// battle3 runs an MQTT 3.1.1 battler until ctx ends; a refusal must be
// return code 0x03 (server unavailable).
func battle3(ctx context.Context, addr, id, user string) *battler {
	b := &battler{done: make(chan struct{}), hold: func() {}}
	go func() {
		defer close(b.done)
		for ctx.Err() == nil {
			lost := make(chan struct{})
			opts := mqtt3.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetUsername(user).
				SetProtocolVersion(4).SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).
				SetKeepAlive(30 * time.Second).SetConnectTimeout(waitTimeout).
				SetConnectionLostHandler(func(mqtt3.Client, error) { close(lost) })
			c := mqtt3.NewClient(opts)
			tok := c.Connect()
			if !tok.WaitTimeout(waitTimeout) {
				b.other.Add(1)
				b.lastErr.Store("connect: no answer")
				continue
			}
			switch err := tok.Error(); {
			case err == nil:
				b.connects.Add(1)
			case errors.Is(err, mqtt3packets.ErrorRefusedServerUnavailable):
				b.refused.Add(1)
				sleepCtx(ctx, battleRetry)
				continue
			default:
				b.other.Add(1)
				b.lastErr.Store(fmt.Sprintf("connect: %v", err))
				sleepCtx(ctx, battleRetry)
				continue
			}
			select {
			case <-lost:
				sleepCtx(ctx, battleReconnect)
			case <-ctx.Done():
				b.hold = func() { c.Disconnect(0) }
				return
			}
		}
	}()
	return b
}

// noBattleDamping turns takeover battle damping off, for tests of many
// takeovers of one id that are not about it.
func noBattleDamping(c *configs.Config) { c.Presence.TakeoverBattle.Takeovers = configs.TakeoversOff }

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Two devices, one MQTT 5 and one MQTT 3.1.1, share a client id and each
// reconnects as soon as it is kicked. Once the takeovers pass the limit,
// the battle is detected once, newcomers are refused (0x9F; 3.1.1: 0x03)
// with a back-off while the connection in place keeps the session, the
// retained publishes of the user drop to a trickle, the admin API shows the
// battle, the counters match what the clients saw, and the user is never
// shown offline.
func TestTakeoverBattleIsDamped(t *testing.T) {
	const (
		id, user  = "alice-shared", "alice"
		takeovers = 20
		measure   = 3 * time.Second // of damped battle
	)
	n := startNode(t, func(c *configs.Config) {
		c.Presence.TakeoverBattle = configs.TakeoverBattleConfig{Takeovers: takeovers, Window: configs.Duration(10 * time.Second),
			Backoff: configs.Duration(500 * time.Millisecond), MaxBackoff: configs.Duration(2 * time.Second)}
	})
	obs := newObserver(t, n.MQTTAddr(), "presence/users/"+user)
	published := func() int { return len(obs.history(user)) }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	b5 := battle5(ctx, t, n.MQTTAddr(), id, user)
	b3 := battle3(ctx, n.MQTTAddr(), id, user)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-b5.done
			<-b3.done
		}
	}
	defer stop()
	why := func(b *battler) string { v, _ := b.lastErr.Load().(string); return v }

	testkit.Wait(t, waitTimeout, "the battle detected", func() error {
		return testkit.Why(n.Stats().Get("takeover_battles_total") > 0, fmt.Sprintf("%d takeovers, v5 %q v3 %q", n.Stats().Get("takeovers_total"), why(b5), why(b3)))
	})
	detected, before := time.Now(), published()

	// The battle goes on, damped, until both kinds of refusal have been
	// seen and the measuring time has passed.
	testkit.Wait(t, waitTimeout+measure, "refusals over both protocols", func() error {
		return testkit.Why(b5.refused.Load() > 0 && b3.refused.Load() > 0 && time.Since(detected) >= measure,
			fmt.Sprintf("refused v5 %d, v3 %d after %s", b5.refused.Load(), b3.refused.Load(), time.Since(detected)))
	})
	code, body := adminGet(t, n, "/api/v1/battles")
	var list struct{ Battles []hooks.Battle }
	if err := json.Unmarshal(body, &list); code != 200 || err != nil {
		t.Fatalf("GET /api/v1/battles: %d %s", code, body)
	}
	if len(list.Battles) != 1 || list.Battles[0].ClientID != id || list.Battles[0].User != user ||
		list.Battles[0].Refused == 0 || list.Battles[0].Takeovers < takeovers || list.Battles[0].Until.Before(detected) {
		t.Errorf("battles: %s", body)
	}
	stop()
	end, after := time.Now(), published()
	defer b5.hold()
	defer b3.hold()

	for _, b := range []*battler{b5, b3} {
		if b.other.Load() != 0 {
			t.Errorf("a battler failed otherwise than by the battle's refusal: %d times, last %s", b.other.Load(), why(b))
		}
	}
	s := n.Stats()
	if s.Get("takeover_battles_total") != 1 {
		t.Errorf("takeover_battles %d, want 1 (one episode)", s.Get("takeover_battles_total"))
	}
	if refused := b5.refused.Load() + b3.refused.Load(); s.Of("connect_refusals_total", "takeover_battle") != refused {
		t.Errorf("takeover_battle_refused %d, the clients saw %d refusals", s.Of("connect_refusals_total", "takeover_battle"), refused)
	}
	if connects := b5.connects.Load() + b3.connects.Load(); s.Get("takeovers_total") != connects-1 {
		t.Errorf("takeovers %d, the clients connected %d times (all but the first a takeover)", s.Get("takeovers_total"), connects)
	}

	// The user stays online throughout.
	testkit.Wait(t, waitTimeout, "the last takeover published", func() error {
		p, ok := obs.last(user)
		return testkit.Why(ok && len(p.Sessions) == 1 && p.Status == presence.Online, fmt.Sprintf("%+v", p))
	})
	for _, p := range obs.history(user) {
		if p.Status != presence.Online {
			t.Fatalf("user shown %s during the battle (version %d)", p.Status, p.Version)
		}
	}
	obs.check()

	rateBefore := float64(before) / detected.Sub(start).Seconds()
	rateAfter := float64(after-before) / end.Sub(detected).Seconds()
	t.Logf("retained publishes of %s: before damping %d in %s (%.1f/s, %.0f/min); damped %d in %s (%.2f/s, %.0f/min); "+
		"%d takeovers, %d refused (v5 %d, v3 %d)", user, before, detected.Sub(start).Round(time.Millisecond), rateBefore, rateBefore*60,
		after-before, end.Sub(detected).Round(time.Millisecond), rateAfter, rateAfter*60,
		s.Get("takeovers_total"), s.Of("connect_refusals_total", "takeover_battle"), b5.refused.Load(), b3.refused.Load())
	if rateAfter*5 > rateBefore {
		t.Errorf("damping cut the publish rate from %.1f/s only to %.1f/s", rateBefore, rateAfter)
	}
}
