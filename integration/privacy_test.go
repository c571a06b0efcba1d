package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// The privacy matrix (issue 22): viewer (self, another user, a service
// account, a group mate) × setting (visible, invisible, last_seen quarter,
// hidden) × filter (the exact topic, presence/users/+, the group topic) ×
// retained (subscribed after the change) / live (subscribed before).
// Nothing private reaches a viewer who must not see it, and the user and
// the service account get the truth on presence/users/... . The group
// topic carries the public view to everyone (docs/presence.md).
func TestPrivacyMatrix(t *testing.T) {
	for _, setting := range []string{"visible", "invisible", "quarter", "hidden"} {
		t.Run(setting, func(t *testing.T) { privacyMatrix(t, setting) })
	}
}

// pvViewers are the viewers of the matrix, by role: their user names.
var pvViewers = map[string]string{"self": "alice", "other": "carol", "service": "ops", "mate": "bob"}

// pvFilters are the filters of the matrix.
var pvFilters = []string{"presence/users/alice", "presence/users/+", "presence/groups/team"}

// pvSetting is each setting's presence/set.
var pvSetting = map[string]string{
	"visible":   `{"scope":"account","invisible":false,"last_seen":"exact"}`,
	"invisible": `{"scope":"account","invisible":true}`,
	"quarter":   `{"scope":"account","last_seen":"quarter"}`,
	"hidden":    `{"scope":"account","last_seen":"hidden"}`,
}

// pvNode is a node (the binary's composition) of the matrix: passwords for
// its users (without authentication every connection is a service
// account), ops a service account, the team [alice, bob, zed], visibility
// open (carol may read alice: the other user), pacing off; edit, when not
// nil, changes the config after.
type pvNode struct {
	*authNode
	pw map[string]string
}

func privacyNode(t *testing.T, edit func(*configs.Config)) pvNode {
	t.Helper()
	file := filepath.Join(t.TempDir(), "groups.yaml")
	writeAtomic(t, file, []byte("groups:\n  team: [alice, bob, zed]\n"))
	pwfile := filepath.Join(t.TempDir(), "passwd")
	pw := map[string]string{}
	for i, u := range []string{"alice", "bob", "carol", "ops", "zed"} {
		pw[u] = fmt.Sprintf("%s-Secret-%d", u, i)
	}
	writePasswordFile(t, pwfile, pw)
	n := startAuthNode(t, func(c *configs.Config) {
		pacingOff(c)
		c.Auth.PasswordFile = pwfile
		c.Presence.Observers = []string{"ops"}
		c.Presence.GroupsFile = file
		c.Presence.GroupBatch = configs.Duration(20 * time.Millisecond)
		if edit != nil {
			edit(c)
		}
	})
	return pvNode{n, pw}
}

// as are the options that connect as user.
func (n pvNode) as(user string) []connectOpt {
	return []connectOpt{withUser(user), withPassword(n.pw[user])}
}

// pvObservers subscribes one connection per viewer and filter.
func pvObservers(t *testing.T, n pvNode, noSelf bool) map[string]*observer {
	t.Helper()
	obs := map[string]*observer{}
	for role, user := range pvViewers {
		if noSelf && role == "self" {
			continue // a connection of alice's would bring her back
		}
		for _, f := range pvFilters {
			obs[role+" "+f] = newObserver(t, n.MQTTAddr(), f, n.as(user)...)
		}
	}
	return obs
}

func privacyMatrix(t *testing.T, setting string) {
	n := privacyNode(t, nil)
	addr := n.MQTTAddr()
	zed := dial5(t, addr, "zed-1", "zed", withPassword(n.pw["zed"])) // the marker: a visible member
	live := pvObservers(t, n, false)
	alice := dial5(t, addr, "alice-phone", "alice", withPassword(n.pw["alice"]))
	// Every connection of alice's is shown: the change after is the
	// setting's (versions above v0 are checked).
	v0 := live["service "+pvFilters[0]].waitFor("alice", "her 4 sessions", func(p presence.Aggregate) bool { return len(p.Sessions) == 4 }).Version
	if rc := alice.publish(t, "presence/set", pvSetting[setting], 1, false); rc != 0 {
		t.Fatalf("privacy set: %#x", rc)
	}
	if rc := alice.publish(t, "presence/set", `{"scope":"account","status":"busy","text":"secret-text"}`, 1, false); rc != 0 {
		t.Fatalf("busy: %#x", rc)
	}
	truth := live["service "+pvFilters[0]].waitFor("alice", "busy, the truth", func(p presence.Aggregate) bool {
		return p.Status == presence.Busy && p.Text == "secret-text"
	})
	retained := pvObservers(t, n, false)
	pvCheck(t, setting, "online", v0, live, retained, truth, zed)

	// Offline: every connection of alice's ends (her own viewers too);
	// the others see what her last_seen setting allows.
	for role, o := range live {
		if strings.HasPrefix(role, "self ") {
			o.c.disconnect()
		}
	}
	for role, o := range retained {
		if strings.HasPrefix(role, "self ") {
			o.c.disconnect()
		}
	}
	alice.disconnect()
	gone := live["service "+pvFilters[1]].waitStatus("alice", presence.Offline)
	after := pvObservers(t, n, true)
	for role := range live {
		if strings.HasPrefix(role, "self ") {
			delete(live, role)
		}
	}
	pvCheck(t, setting, "offline", v0, live, after, gone, zed)
}

// pvCheck waits for what each viewer must get of alice's truth and
// checks, once zed's marker has reached them all, that none got a leak.
func pvCheck(t *testing.T, setting, phase string, v0 uint64, live, retained map[string]*observer, truth presence.Aggregate, zed *client5) {
	t.Helper()
	private := setting != "visible"
	entitled := func(role string) bool { return strings.HasPrefix(role, "self ") || strings.HasPrefix(role, "service ") }
	for _, set := range []map[string]*observer{live, retained} {
		for role, o := range set {
			if strings.HasSuffix(role, "groups/team") {
				continue
			}
			if entitled(role) || !private || setting != "invisible" {
				// The truth to the entitled; a visible status to everyone
				// but for an invisible user.
				want := truth.Status
				o.waitFor("alice", role+": status "+string(want), func(p presence.Aggregate) bool { return p.Status == want })
			}
			if entitled(role) {
				o.waitFor("alice", role+": the truth", func(p presence.Aggregate) bool {
					return p.Version >= truth.Version && p.Status == truth.Status && p.Text == truth.Text &&
						(len(p.Sessions) > 0) == (len(truth.Sessions) > 0) && p.LastSeen.Equal(truth.LastSeen)
				})
			}
		}
	}
	// The marker: zed's change reaches every connection after alice's
	// (users topics: each observer hears zed too; the group topic's batch
	// with zed comes after alice's).
	marker := fmt.Sprintf("%s-%d", phase, time.Now().UnixNano())
	if rc := zed.publish(t, "presence/set", `{"text":"`+marker+`"}`, 1, false); rc != 0 {
		t.Fatalf("marker: %#x", rc)
	}
	for _, set := range []map[string]*observer{live, retained} {
		for role, o := range set {
			if role == "" {
				continue
			}
			switch {
			case strings.HasSuffix(role, "groups/team"):
				testkit.Wait(t, waitTimeout, role+": the marker", func() error {
					for _, m := range o.groupMsgs(t, "team") {
						for _, mb := range append(m.Members, m.Changes...) {
							if mb.User == "zed" && mb.Text == marker {
								return nil
							}
						}
					}
					return fmt.Errorf("no marker yet")
				})
			case strings.HasSuffix(role, "users/alice"):
				if _, ok := o.last("zed"); !ok {
					o.subscribe("presence/users/zed") // a retained copy after alice's, in order
				}
				o.waitFor("zed", role+": the marker", func(p presence.Aggregate) bool { return p.Text == marker })
			default:
				o.waitFor("zed", role+": the marker", func(p presence.Aggregate) bool { return p.Text == marker })
			}
		}
	}
	leaks, checked := 0, 0
	for _, set := range []map[string]*observer{live, retained} {
		for role, o := range set {
			if !entitled(role) {
				// Versions strictly increase for everyone else. The
				// entitled may get one version twice when a change of
				// the truth alone races their SUBSCRIBE (docs/presence.md).
				o.check()
			}
			if entitled(role) && !strings.HasSuffix(role, "groups/team") {
				continue
			}
			for _, raw := range ctRaw(o, "presence/users/alice") {
				p, err := presence.ParseAggregate([]byte(raw))
				if err != nil {
					t.Fatal(err)
				}
				if p.Version <= v0 && !strings.HasSuffix(role, "retained") {
					continue // before the setting: alice was visible
				}
				checked++
				if why := pvLeak(setting, p.Status, p.Text, p.LastSeen, len(p.Sessions), truth); why != "" {
					leaks++
					t.Errorf("%s (%s, %s): %s: %s", role, setting, phase, why, raw)
				}
			}
			for _, m := range o.groupMsgs(t, "team") {
				for _, mb := range append(m.Members, m.Changes...) {
					if mb.User != "alice" || mb.Version <= v0 {
						continue
					}
					checked++
					var ls time.Time
					if mb.LastSeen != nil {
						ls = *mb.LastSeen
					}
					if why := pvLeak(setting, mb.Status, mb.Text, ls, -1, truth); why != "" {
						leaks++
						t.Errorf("%s (%s, %s): group entry %s: %+v", role, setting, phase, why, mb)
					}
				}
			}
		}
	}
	t.Logf("%s, %s: %d deliveries to viewers who may not see the truth checked, %d leaks", setting, phase, checked, leaks)
}

// pvLeak says what a delivery to a viewer who may not see alice's truth
// shows that her setting forbids ("": nothing). sessions -1: not in the
// message (the group topic's entries).
func pvLeak(setting string, status presence.Status, text string, lastSeen time.Time, sessions int, truth presence.Aggregate) string {
	switch setting {
	case "invisible":
		switch {
		case status != presence.Offline:
			return "status " + string(status)
		case sessions > 0:
			return "sessions"
		case text != "":
			return "text"
		case !lastSeen.IsZero() && !truth.LastSeen.IsZero() && lastSeen.Equal(truth.LastSeen):
			return "the true last_seen"
		}
	case "quarter":
		if !lastSeen.IsZero() && lastSeen.UnixMilli()%(15*60*1000) != 0 {
			return "last_seen finer than a quarter"
		}
	case "hidden":
		if !lastSeen.IsZero() {
			return "last_seen"
		}
	}
	return ""
}

// A presence/set with a bad privacy value is refused (0x99, payload format
// invalid), changes nothing, and is counted.
func TestPrivacySetRefused(t *testing.T) {
	n := privacyNode(t, nil)
	alice := dial5(t, n.MQTTAddr(), "alice-phone", "alice", withPassword(n.pw["alice"]))
	for _, bad := range []string{
		`{"scope":"account","last_seen":"fuzzy"}`,
		`{"invisible":true}`, // session scope
		`{"scope":"session","last_seen":"hidden"}`,
	} {
		if rc := alice.publish(t, "presence/set", bad, 1, false); rc != 0x99 {
			t.Errorf("%s: %#x, want 0x99", bad, rc)
		}
	}
	if rc := alice.publish(t, "presence/set", `{"scope":"account","invisible":"yes"}`, 1, false); rc != 0x99 {
		t.Errorf("invisible \"yes\": %#x, want 0x99", rc)
	}
	testkit.Wait(t, waitTimeout, "3 privacy refusals counted", func() error {
		s := n.Stats()
		return testkit.Why(s.Get("privacy_sets_refused_total") == 3 && s.Of("status_sets_refused_total", "invalid") == 4,
			fmt.Sprintf("privacy %d, invalid %d", s.Get("privacy_sets_refused_total"), s.Of("status_sets_refused_total", "invalid")))
	})
	code, body := adminDo(t, n.AdminAddr(), "/api/v1/users/alice/sessions", "")
	if code != 200 || strings.Contains(string(body), `"privacy"`) {
		t.Fatalf("alice's record: %d %s", code, body)
	}
}
