package integration

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/roster"
)

// groupView is a subscriber's view of a group topic rebuilt from what it
// received, as docs/groups.md says an observer does: a message with
// members replaces it; a delta applies when it follows the version held.
type groupView struct {
	state      *roster.Snapshot
	gaps, dups int
	snapshots  int // messages with members
	deltas     int
	bytes      int // PUBLISH payload and topic bytes received
	deflated   int // messages in raw DEFLATE (content-encoding deflate)
}

// contentEncoding is a PUBLISH's content-encoding user property.
func contentEncoding(p *paho.Publish) string {
	if p.Properties == nil {
		return ""
	}
	return p.Properties.User.Get("content-encoding")
}

func (v *groupView) receive(t *testing.T, p *paho.Publish) {
	t.Helper()
	v.bytes += len(p.Payload) + len(p.Topic)
	payload := p.Payload
	if contentEncoding(p) == "deflate" { // a resume's reply asked in raw DEFLATE
		v.deflated++
		b, err := io.ReadAll(flate.NewReader(bytes.NewReader(p.Payload)))
		if err != nil {
			t.Fatalf("inflate the group message: %v", err)
		}
		if p.Properties.ContentType != "application/json" || p.Properties.PayloadFormat == nil || *p.Properties.PayloadFormat != 0 {
			t.Fatalf("a deflated group message's properties: %+v", p.Properties)
		}
		payload = b
	}
	var m groupMsg
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatalf("group message %q: %v", payload, err)
	}
	if m.Members != nil {
		v.snapshots++
		v.state = &roster.Snapshot{Group: m.Group, Version: m.Version, Members: m.Members, Counts: m.Counts}
		return
	}
	v.deltas++
	switch {
	case v.state == nil || m.Follows > v.state.Version:
		v.gaps++
	case m.Follows < v.state.Version:
		v.dups++
	default:
		mir := roster.NewMirror()
		mir.Set(*v.state)
		next, _ := mir.Apply(m.Delta)
		v.state = &next
	}
}

// drain receives what is queued for c into v, until cond holds (or the
// wait times out).
func (v *groupView) until(t *testing.T, c *client5, what string, cond func(*groupView) bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for !cond(v) {
		select {
		case p := <-c.msgs:
			v.receive(t, p)
		case <-deadline:
			t.Fatalf("%s: not within %v (view at %v, %d snapshots, %d deltas)", what, waitTimeout, v.version(), v.snapshots, v.deltas)
		}
	}
}

func (v *groupView) version() uint64 {
	if v.state == nil {
		return 0
	}
	return v.state.Version
}

// members is the view's members as JSON, for comparing two views.
func (v *groupView) members() string {
	if v.state == nil {
		return ""
	}
	ms := slices.Clone(v.state.Members)
	sort.Slice(ms, func(i, j int) bool { return ms[i].User < ms[j].User })
	b, _ := json.Marshal(ms)
	return string(b)
}

// subscribeVersion subscribes c to filter at QoS 1 with the resume's user
// property (none when version is empty), and any more user properties
// given as key, value pairs (the encoding).
func subscribeVersion(t *testing.T, c *client5, filter, version string, more ...string) {
	t.Helper()
	s := &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}}
	var user paho.UserProperties
	if version != "" {
		user = append(user, paho.UserProperty{Key: "version", Value: version})
	}
	for i := 0; i+1 < len(more); i += 2 {
		user = append(user, paho.UserProperty{Key: more[i], Value: more[i+1]})
	}
	if user != nil {
		s.Properties = &paho.SubscribeProperties{User: user}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sa, err := c.Subscribe(ctx, s)
	if err != nil || len(sa.Reasons) != 1 || sa.Reasons[0] != 1 {
		t.Fatalf("subscribe %s (version %q): %v %+v", filter, version, err, sa)
	}
}

// resumeAway is how long the client is away in TestGroupResume:
// RESUME_AWAY (e.g. 30s, the scenario), else 2s (what the client
// is sent depends on the changes, not on the time, within the log's
// bounds).
func resumeAway(t *testing.T) time.Duration {
	if s := os.Getenv("RESUME_AWAY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("RESUME_AWAY: %v", err)
		}
		return d
	}
	return 2 * time.Second
}

// A 10,000-member group: a client subscribes (the snapshot), goes away
// while 100 members change (they connect, spread over the time away), and
// re-subscribes with the version it holds: it gets one delta, no retained
// snapshot, a few KB instead of the snapshot's ~800 KB, and holds the same
// members as a watcher that stayed. With a version the node does not know
// (too old) it gets the snapshot instead; with garbage, the retained
// snapshot, as without the property.
func TestGroupResume(t *testing.T) {
	const size, changes = 10000, 100
	users := make([]string, size)
	for i := range users {
		users[i] = fmt.Sprintf("member-%05d", i) // 12 bytes
	}
	file := filepath.Join(t.TempDir(), "groups.yaml")
	writeAtomic(t, file, []byte("groups:\n  team: ["+strings.Join(users, ", ")+"]\n"))
	n := startNode(t, func(c *configs.Config) { c.Presence.GroupsFile = file })
	const topic = "presence/groups/team"

	// A watcher that stays: the reference.
	ref := dial5(t, n.MQTTAddr(), "ref", "ops")
	var refView groupView
	subscribeVersion(t, ref, topic, "")
	refView.until(t, ref, "the reference's snapshot", func(v *groupView) bool { return v.state != nil })

	phone := dial5(t, n.MQTTAddr(), "phone-1", "viewer")
	var view groupView
	subscribeVersion(t, phone, topic, "")
	view.until(t, phone, "the phone's snapshot", func(v *groupView) bool { return v.state != nil })
	snapshotBytes := view.bytes
	// Let a batch in flight settle: the phone holds what it was sent.
	testkit.Wait(t, waitTimeout, "the phone current", func() error {
		for len(phone.msgs) > 0 {
			view.receive(t, <-phone.msgs)
		}
		for len(ref.msgs) > 0 {
			refView.receive(t, <-ref.msgs)
		}
		return testkit.Why(view.version() == refView.version(), "behind")
	})
	held := view.version()
	heldState := *view.state
	heldState.Members = slices.Clone(heldState.Members)
	phone.disconnect()

	// Away: 100 members connect, spread over the time away.
	away := resumeAway(t)
	left := time.Now()
	for i := range changes {
		dial5(t, n.MQTTAddr(), users[i*size/changes]+"-phone", users[i*size/changes])
		time.Sleep(away / changes)
	}
	refView.until(t, ref, "the 100 online at the reference", func(v *groupView) bool { return v.state.Online >= changes })
	if d := time.Since(left); d < away {
		time.Sleep(away - d)
	}

	// Back, with the version held.
	phone = dial5(t, n.MQTTAddr(), "phone-2", "viewer")
	view.bytes, view.snapshots, view.deltas = 0, 0, 0
	start := time.Now()
	subscribeVersion(t, phone, topic, fmt.Sprint(held))
	want := refView.version()
	view.until(t, phone, "the resumed phone current", func(v *groupView) bool { return v.version() >= want })
	converged := time.Since(start)
	if view.snapshots != 0 || view.gaps+view.dups != 0 {
		t.Fatalf("resumed: %d snapshots, %d gaps, %d duplicates", view.snapshots, view.gaps, view.dups)
	}
	resumeBytes := view.bytes
	testkit.Wait(t, waitTimeout, "the same members as the reference", func() error {
		for len(phone.msgs) > 0 {
			view.receive(t, <-phone.msgs)
		}
		for len(ref.msgs) > 0 {
			refView.receive(t, <-ref.msgs)
		}
		return testkit.Why(view.version() == refView.version() && view.members() == refView.members(), "differ")
	})
	t.Logf("resume after %v away with %d member changes: %d bytes in %d message(s) in %v (the snapshot: %d bytes)",
		away, changes, resumeBytes, view.deltas, converged.Round(10*time.Microsecond), snapshotBytes)
	// One member entry per member changed (each about 87 bytes here: a
	// 12-byte name, online, a 16-digit version), plus the delta's own
	// fields and the topic: deterministic.
	if limit := changes*90 + 300; resumeBytes > limit {
		t.Errorf("the resume took %d bytes, want at most %d", resumeBytes, limit)
	}
	if view.deflated != 0 {
		t.Errorf("a resume without the encoding property got %d message(s) in DEFLATE", view.deflated)
	}

	// The same resume asking for the reply in raw DEFLATE (another phone
	// that held the same version): the same state, in fewer bytes.
	zphone := dial5(t, n.MQTTAddr(), "phone-z", "viewer")
	zview := groupView{state: &heldState}
	start = time.Now()
	subscribeVersion(t, zphone, topic, fmt.Sprint(held), "encoding", "deflate")
	want = refView.version()
	zview.until(t, zphone, "the deflate phone current", func(v *groupView) bool { return v.version() >= want })
	zconverged := time.Since(start)
	if zview.snapshots != 0 || zview.gaps+zview.dups != 0 || zview.deflated != 1 {
		t.Fatalf("resumed with deflate: %d snapshots, %d gaps, %d duplicates, %d deflated", zview.snapshots, zview.gaps, zview.dups, zview.deflated)
	}
	zbytes := zview.bytes
	testkit.Wait(t, waitTimeout, "the deflate phone holds the reference's members", func() error {
		for len(zphone.msgs) > 0 {
			zview.receive(t, <-zphone.msgs)
		}
		for len(ref.msgs) > 0 {
			refView.receive(t, <-ref.msgs)
		}
		return testkit.Why(zview.version() == refView.version() && zview.members() == refView.members(), "differ")
	})
	if zview.deflated != 1 || zview.gaps+zview.dups != 0 {
		t.Fatalf("after the reply: %d deflated (want the reply only), %d gaps, %d duplicates", zview.deflated, zview.gaps, zview.dups)
	}
	t.Logf("resume with encoding=deflate: %d bytes in %d message(s) in %v (plain: %d bytes)",
		zbytes, zview.deltas, zconverged.Round(10*time.Microsecond), resumeBytes)
	// The target, with a margin: about 25 bytes per member changed
	// in DEFLATE here (the names and versions are alike).
	if zbytes >= 5000 {
		t.Errorf("the resume with encoding=deflate took %d bytes, want < 5,000", zbytes)
	}

	// A version the node does not know (below its log): the snapshot.
	other := dial5(t, n.MQTTAddr(), "phone-3", "viewer")
	var ov groupView
	start = time.Now()
	subscribeVersion(t, other, topic, "1")
	ov.until(t, other, "the snapshot for an unknown version", func(v *groupView) bool { return v.state != nil })
	t.Logf("for comparison, the snapshot (a version the node does not know): %d bytes in %v", ov.bytes, time.Since(start).Round(10*time.Microsecond))
	if ov.snapshots != 1 || ov.gaps+ov.dups != 0 {
		t.Fatalf("unknown version: %d snapshots, %d gaps, %d dups", ov.snapshots, ov.gaps, ov.dups)
	}
	// The same with encoding=deflate: the snapshot, in raw DEFLATE.
	zother := dial5(t, n.MQTTAddr(), "phone-3z", "viewer")
	var zov groupView
	start = time.Now()
	subscribeVersion(t, zother, topic, "1", "encoding", "deflate")
	zov.until(t, zother, "the deflated snapshot for an unknown version", func(v *groupView) bool { return v.state != nil })
	t.Logf("the snapshot with encoding=deflate: %d bytes in %v", zov.bytes, time.Since(start).Round(10*time.Microsecond))
	if zov.snapshots != 1 || zov.deflated != 1 || zov.members() != ov.members() && zov.version() == ov.version() {
		t.Fatalf("unknown version, deflate: %d snapshots, %d deflated", zov.snapshots, zov.deflated)
	}
	// Garbage: the retained snapshot.
	g := dial5(t, n.MQTTAddr(), "phone-4", "viewer")
	var gv groupView
	subscribeVersion(t, g, topic, "twelve")
	gv.until(t, g, "the snapshot for garbage", func(v *groupView) bool { return v.state != nil })
	st := n.Stats()
	if st.Get("group_resume_deflated_total") != 2 || st.Get("group_resume_deflate_saved_bytes_total") <= 0 {
		t.Errorf("stats: deflated %d, saved %d bytes", st.Get("group_resume_deflated_total"), st.Get("group_resume_deflate_saved_bytes_total"))
	}
	if st.Get("group_resumes_total") != 2 || st.Of("group_resume_fallbacks_total", "too_old") != 2 || st.Of("group_resume_fallbacks_total", "garbage") != 1 {
		t.Errorf("stats: resumes %d, too_old %d, garbage %d", st.Get("group_resumes_total"),
			st.Of("group_resume_fallbacks_total", "too_old"), st.Of("group_resume_fallbacks_total", "garbage"))
	}
	t.Logf("log: %d groups, %d batches, %d bytes", st.Get("group_resume_log_groups"), st.Get("group_resume_log_deltas"), st.Get("group_resume_log_bytes"))
}

// Two nodes share Redis (the real binary). A client subscribed to a group
// on A goes away while members change, and comes back on B, which watches
// the group too (a watcher of its own): B's log holds the same batches, so
// the client gets one delta, no snapshot, and holds what B's watcher
// holds. On C, where nobody watched the group, the same resume is served
// from the batches the store's group log keeps; a version older than them
// gets the snapshot.
func TestGroupsMultiNodeResume(t *testing.T) {
	srv := redistest.Start(t)
	pwfile := filepath.Join(t.TempDir(), "passwd")
	pw := map[string]string{"ops": "ops-Secret-1", "viewer": "viewer-Secret-2"}
	var members []string
	for i := range 200 {
		u := fmt.Sprintf("m%03d", i)
		members = append(members, u)
		if i < 20 {
			pw[u] = u + "-Secret"
		}
	}
	writePasswordFile(t, pwfile, pw)
	env := []string{"PRESENCED_AUTH_PASSWORD_FILE=" + pwfile, "PRESENCED_PRESENCE_OBSERVERS=ops", "PRESENCED_ADMIN_TOKEN=" + groupsAdminToken}
	bin := mnBinary(t)
	a := mnStart(t, bin, "ra", []string{srv.Addr()}, env...)
	b := mnStart(t, bin, "rb", []string{srv.Addr()}, env...)
	c := mnStart(t, bin, "rc", []string{srv.Addr()}, env...)
	as := func(u string) []connectOpt { return []connectOpt{withPassword(pw[u])} }
	if code, body := groupsAdmin(t, a.admin, "PUT", "/api/v1/groups/team", map[string]any{"members": members}); code != 204 {
		t.Fatalf("PUT team: %d %s", code, body)
	}
	const topic = "presence/groups/team"
	for _, n := range []*mnProc{a, b, c} {
		testkit.Wait(t, waitTimeout, "node "+n.id+" has the team", func() error {
			code, body := groupsAdmin(t, n.admin, "GET", "/api/v1/groups", nil)
			return testkit.Why(code == 200 && strings.Contains(string(body), `"team":200`), string(body))
		})
	}
	watch := func(n *mnProc, id string) (*client5, *groupView) {
		cl := dial5(t, n.mqtt, id, "ops", as("ops")...)
		v := &groupView{}
		subscribeVersion(t, cl, topic, "")
		v.until(t, cl, id+"'s snapshot", func(v *groupView) bool { return v.state != nil && v.version() > 0 })
		return cl, v
	}
	refB, viewB := watch(b, "ref-b")

	phone := dial5(t, a.mqtt, "phone-a", "viewer", as("viewer")...)
	view := &groupView{}
	subscribeVersion(t, phone, topic, "")
	view.until(t, phone, "the phone's snapshot", func(v *groupView) bool { return v.state != nil && v.version() > 0 })
	testkit.Wait(t, waitTimeout, "the phone as current as B's watcher", func() error {
		for len(phone.msgs) > 0 {
			view.receive(t, <-phone.msgs)
		}
		for len(refB.msgs) > 0 {
			viewB.receive(t, <-refB.msgs)
		}
		return testkit.Why(view.version() == viewB.version(), fmt.Sprintf("phone %d, B %d", view.version(), viewB.version()))
	})
	held := view.version()
	phone.disconnect()

	// Away: 20 members connect, on A.
	for _, u := range members[:20] {
		dial5(t, a.mqtt, u+"-phone", u, as(u)...)
	}
	viewB.until(t, refB, "the 20 online at B's watcher", func(v *groupView) bool { return v.state.Online >= 20 })

	// Back on B, with the version held: one delta.
	phone = dial5(t, b.mqtt, "phone-b", "viewer", as("viewer")...)
	resumed := &groupView{state: view.state}
	start := time.Now()
	subscribeVersion(t, phone, topic, fmt.Sprint(held))
	want := viewB.version()
	resumed.until(t, phone, "the phone resumed on B", func(v *groupView) bool { return v.version() >= want })
	took := time.Since(start)
	if resumed.snapshots != 0 || resumed.gaps+resumed.dups != 0 || resumed.deltas != 1 {
		t.Fatalf("resumed on B: %d snapshots, %d deltas, %d gaps, %d dups", resumed.snapshots, resumed.deltas, resumed.gaps, resumed.dups)
	}
	if resumed.members() != viewB.members() {
		t.Fatalf("the phone on B holds\n%s\nB's watcher\n%s", resumed.members(), viewB.members())
	}
	t.Logf("resumed on the other node: %d bytes, 1 delta, in %v", resumed.bytes, took.Round(10*time.Microsecond))

	// On C, where nobody watched the team: C reads the group's snapshot
	// and the batches the store's group log keeps, and serves the resume
	// from them: one delta too.
	cold := dial5(t, c.mqtt, "phone-c", "viewer", as("viewer")...)
	cv := &groupView{state: view.state}
	start = time.Now()
	subscribeVersion(t, cold, topic, fmt.Sprint(held))
	cv.until(t, cold, "the phone on C", func(v *groupView) bool { return v.version() >= want })
	took = time.Since(start)
	if cv.snapshots != 0 || cv.deltas != 1 || cv.gaps+cv.dups != 0 || cv.members() != viewB.members() {
		t.Fatalf("on C: %d snapshots, %d deltas, %d gaps, %d dups; the same as B's watcher: %v", cv.snapshots, cv.deltas, cv.gaps, cv.dups, cv.members() == viewB.members())
	}
	t.Logf("resumed on a node that had not watched the group: %d bytes, 1 delta, in %v", cv.bytes, took.Round(10*time.Microsecond))
	// A version older than what the store keeps: the snapshot.
	old := dial5(t, c.mqtt, "phone-old", "viewer", as("viewer")...)
	ov := &groupView{}
	subscribeVersion(t, old, topic, "1")
	ov.until(t, old, "the snapshot on C", func(v *groupView) bool { return v.snapshots == 1 && v.version() >= want })
}
