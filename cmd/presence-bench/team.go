package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// The team scenario: a group whose members all watch it, brought online by
// a morning burst, watched three ways side by side:
//
//   - presenced-group: every watcher subscribes to presence/groups/team
//     (a retained snapshot, then batched deltas);
//   - presenced-memory: every watcher subscribes to the other members'
//     presence/users/{user} topics, one SUBSCRIBE of members−1 filters;
//   - mosquitto-lastwill: the same user topics, with the classic retained
//     online + last-will offline pattern.
//
// presenced-group then measures a large group on its own (a fresh broker
// with one group of --team-big-members, all online): the snapshot's size,
// how long a new watcher takes to get it, and the broker's CPU per member
// change.
const (
	scenarioTeam     = "team"
	groupTopicPrefix = "presence/groups/"
	teamGroup        = "team"
	bigGroup         = "big"
	watcherBuf       = 4 << 10
)

// memberNames are the team's users: m000, m001, …
func memberNames(n int) []string {
	w := max(3, len(strconv.Itoa(n-1)))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%0*d", w, i)
	}
	return out
}

// teamSize is the number of members (each with a device and a watcher)
// this process can hold.
func teamSize(cfg config, fdLimit uint64) int {
	return max(2, min(cfg.Team.Members, (int(fdLimit)-300-10)/2))
}

// presencedConfigFor is what the team scenario sets in presenced's config:
// presenced-group gets the team's group; presenced-memory lets a watcher
// hold one filter per other member (mqtt.max_subscriptions is 100 by
// default).
func presencedConfigFor(cfg config, sys, scenario string, fdLimit uint64) presencedConfig {
	pc := presencedConfigForScenario(cfg, sys, scenario, fdLimit)
	pc.PacingOff = !slices.Contains(resilienceScenarios, scenario)
	return pc
}

func presencedConfigForScenario(cfg config, sys, scenario string, fdLimit uint64) presencedConfig {
	if scenario != scenarioTeam {
		return presencedConfig{}
	}
	n := teamSize(cfg, fdLimit)
	switch sys {
	case systemGroup:
		return presencedConfig{Groups: map[string][]string{teamGroup: memberNames(n)}, GroupBatch: cfg.Team.Batch}
	case result.SystemMemory:
		return presencedConfig{MaxSubscriptions: max(100, n)}
	}
	return presencedConfig{}
}

// teamRun is what one run of the team scenario carries from phase to
// phase.
type teamRun struct {
	e        *runEnv
	n        int // members, each with a device and a watcher
	members  []string
	isMember map[string]bool
	group    bool // presenced-group: the watchers subscribe to the group topic
	ka       int  // the devices' keep-alive, in seconds

	watchers      []*observer
	msgs0, bytes0 []int64 // each watcher's, before the burst

	devs        []*device // nil where a member failed to connect
	up          []string  // the members that connected
	cpu0, cpu1  time.Duration
	start       time.Duration // the burst's
	lastConnect time.Duration
	need        [][]string    // per watcher: the members it must show online
	end         time.Duration // the end of the judged time
}

// team: N members, each with a watcher subscribed before the burst; every
// member connects once at a random time within the burst.
func (e *runEnv) team() error {
	t := &teamRun{e: e}
	t.params()
	if err := runPhases(t.watch, t.burst, t.converge); err != nil {
		return err
	}
	t.report()
	if t.group {
		return e.teamBig()
	}
	return nil
}

// params sizes the team to what this process can hold, names its members
// and records the run's parameters; the devices' keep-alive is long enough
// that none needs a PINGREQ during the run.
func (t *teamRun) params() {
	e, r, cfg := t.e, t.e.run, t.e.cfg.Team
	t.n = teamSize(e.cfg, e.fdLimit)
	n := t.n
	if n < cfg.Members {
		e.note("team members: %d wanted, but this process can hold only %d client sockets (RLIMIT_NOFILE %d): ran %d", cfg.Members, e.socketCap(), e.fdLimit, n)
	}
	t.members = memberNames(n)
	t.isMember = make(map[string]bool, n)
	for _, u := range t.members {
		t.isMember[u] = true
	}
	t.group = e.sys.name == systemGroup
	// Long enough that no device needs a PINGREQ during the run.
	t.ka = int(min(65535, 2*cfg.Burst.Seconds()+60))
	r.Params["members"] = n
	r.Params["watchers"] = n
	r.Params["burst_s"] = cfg.Burst.Seconds()
	r.Params["keepalive_s"] = t.ka
	if t.group {
		r.Params["watch"] = groupTopicPrefix + teamGroup
		r.Params["batch_ms"] = ms(cfg.Batch)
	} else {
		r.Params["watch"] = fmt.Sprintf("the %d other members' user topics", n-1)
		if e.sys.maxSubs > 0 {
			r.Params["max_subscriptions"] = e.sys.maxSubs
		}
	}
}

// watch connects the watchers before the burst, side by side (the first
// subscriptions to a group race to have it watched on the node): each on
// the group topic, or on the other members' user topics. Every group
// watcher has the snapshot before the burst begins; one that never gets it
// is noted, and shows as gaps. It then records what each watcher has
// received so far.
func (t *teamRun) watch() error {
	e, r, n := t.e, t.e.run, t.n
	t.watchers = make([]*observer, n)
	failed, err := connectMany(n, e.cfg.ConnectWorkers, t.watcher)
	if failed > 0 {
		return fmt.Errorf("%d of %d watchers failed to connect: %w", failed, n, err)
	}
	withSnapshot := func() int {
		k := 0
		for _, o := range t.watchers {
			if o.msgs.Load() > 0 {
				k++
			}
		}
		return k
	}
	if t.group {
		if k, ok := e.waitProgress(mono()+10*time.Second, 5*time.Second, n, withSnapshot); !ok {
			r.Extra["watchers_without_snapshot"] = float64(n - k)
			e.note("%d of %d watchers received no snapshot on subscribing (within 5 s of the last that did)", n-k, n)
		}
	}
	t.msgs0 = make([]int64, n)
	t.bytes0 = make([]int64, n)
	for i, o := range t.watchers {
		t.msgs0[i], t.bytes0[i] = o.msgs.Load(), o.bytes.Load()
	}
	return nil
}

// watcher connects member i's watcher: on the group topic, or on every
// other member's user topic (one SUBSCRIBE), covering those members.
func (t *teamRun) watcher(i int) error {
	cfg := t.e.cfg.Team
	filters := []string{groupTopicPrefix + teamGroup}
	cover := func(u string) bool { return t.isMember[u] }
	if !t.group {
		filters = make([]string, 0, t.n-1)
		for j, u := range t.members {
			if j != i {
				filters = append(filters, topicPrefix+u)
			}
		}
		self := t.members[i]
		cover = func(u string) bool { return t.isMember[u] && u != self }
	}
	o, err := t.e.newObserverFilters("w-"+t.members[i], filters, watcherBuf, cover)
	if err != nil {
		return err
	}
	if t.group {
		o.mu.Lock()
		o.batch = cfg.Batch
		o.mu.Unlock()
	}
	t.watchers[i] = o
	return nil
}

// burst connects each member's device once, at a random time within the
// burst, reading the broker's CPU time first.
func (t *teamRun) burst() error {
	e, n, cfg := t.e, t.n, t.e.cfg.Team
	rng := rand.New(rand.NewSource(1))
	offsets := make([]time.Duration, n)
	for i := range offsets {
		offsets[i] = time.Duration(rng.Int63n(int64(cfg.Burst)))
	}
	t.devs = make([]*device, n)
	var wg sync.WaitGroup
	var connFailed atomic.Int64
	var firstErr atomic.Value
	var err error
	if t.cpu0, err = e.sys.cpu(); err != nil {
		return err
	}
	t.start = mono() + 100*time.Millisecond
	for i, u := range t.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.sleepUntil(t.start + offsets[i])
			if e.cancelled() {
				return
			}
			d, err := e.connectDevice(u, u+"-d", t.ka, connectTimeout)
			if err != nil {
				connFailed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			t.devs[i] = d
		}()
	}
	wg.Wait()
	if f := connFailed.Load(); f > 0 {
		e.note("%d of %d members failed to connect: %v", f, n, firstErr.Load())
	}
	t.up = usersOf(t.devs)
	if len(t.up) == 0 {
		return fmt.Errorf("no member connected: %v", firstErr.Load())
	}
	for _, d := range t.devs {
		if d != nil {
			t.lastConnect = max(t.lastConnect, d.c.ConnectAt)
		}
	}
	return nil
}

// converge waits until every watcher shows every member that connected
// online, reads the broker's CPU time then, and holds a little for late
// messages. The watchers are checked in order, each once it has received
// at least as many messages as it must, so that the bench parses little
// while deliveries are still arriving.
func (t *teamRun) converge() error {
	e, r, n, cfg := t.e, t.e.run, t.n, t.e.cfg.Team
	t.need = make([][]string, n)
	for i, o := range t.watchers {
		for _, u := range t.up {
			if o.covers(u) {
				t.need[i] = append(t.need[i], u)
			}
		}
	}
	minMsgs := func(i int) int64 {
		if t.group {
			return 1
		}
		return int64(len(t.need[i]))
	}
	done := 0
	converged := func() int {
		for done < n {
			o := t.watchers[done]
			if o.msgs.Load()-t.msgs0[done] < minMsgs(done) || o.count(t.need[done], online) != len(t.need[done]) {
				break
			}
			done++
		}
		return done
	}
	if got, ok := e.waitProgress(mono()+60*time.Second, 10*time.Second, n, converged); !ok {
		r.Extra["watchers_not_converged"] = float64(n - got)
		e.note("%d of %d watchers never showed every member online (the count stopped growing for 10 s; first such watcher: %s)", n-got, n, t.watchers[got].state())
	}
	var err error
	if t.cpu1, err = e.sys.cpu(); err != nil {
		return err
	}
	// Late messages (a duplicate, a batch cut after the last change) still
	// count: hold for two batch windows.
	time.Sleep(max(2*cfg.Batch, 300*time.Millisecond))
	t.end = mono()
	return nil
}

// delays is, per member shown online to every watcher that covers it, the
// time from its CONNECT to the moment the last watcher received a state
// showing it online (for mosquitto, of that connection), in ms; the last
// such moment; and how many members were not shown to every watcher.
func (t *teamRun) delays(tls []Timeline) (delays []float64, lastSeen time.Duration, missed int) {
	for _, d := range t.devs {
		if d == nil {
			continue
		}
		a := action{kind: 'c', at: d.c.ConnectAt, id: d.id, serial: d.serial}
		var worst time.Duration
		all := true
		for w, o := range t.watchers {
			if !o.covers(d.user) {
				continue
			}
			at, ok := t.e.firstMatch(a, accepted(tls[w][d.user]))
			if !ok {
				all = false
				break
			}
			worst = max(worst, at)
		}
		if !all {
			missed++
			continue
		}
		delays = append(delays, ms(worst-a.at))
		lastSeen = max(lastSeen, worst)
	}
	return delays, lastSeen, missed
}

// finalViews counts the (watcher, member) pairs judged at the end, every
// member that connected, and those the watcher does not show online.
func (t *teamRun) finalViews(tls []Timeline) (wrong, judged int) {
	for w := range t.watchers {
		for _, u := range t.need[w] {
			judged++
			if ob, ok := latestAccepted(tls[w][u]); !ok || !ob.Online {
				wrong++
			}
		}
	}
	return wrong, judged
}

// report records what the watchers received and the delays, the broker's
// CPU per member, the final views and, for the group topic, its faults,
// and judges the watchers.
func (t *teamRun) report() {
	e, r, n := t.e, t.e.run, t.n
	var total, totalBytes, subscribed int64
	for i, o := range t.watchers {
		total += o.msgs.Load() - t.msgs0[i]
		totalBytes += o.bytes.Load() - t.bytes0[i]
		subscribed += t.msgs0[i]
	}
	tls := make([]Timeline, n)
	for i, o := range t.watchers {
		tls[i] = o.timeline()
	}
	delays, lastSeen, missed := t.delays(tls)
	wrongFinal, judged := t.finalViews(tls)

	connected := len(t.up)
	r.Metrics.Sessions = connected
	r.Metrics.Latency = summarize(delays)
	r.Samples = thin(delays, 2000)
	r.Metrics.MessagesPerChange = round3(float64(total) / float64(connected))
	r.Extra["msgs_total"] = float64(total)
	r.Extra["msgs_per_watcher"] = round1(float64(total) / float64(n))
	r.Extra["bytes_per_watcher"] = round1(float64(totalBytes) / float64(n))
	if subscribed > 0 {
		r.Extra["msgs_on_subscribe_per_watcher"] = round3(float64(subscribed) / float64(n))
	}
	r.Extra["broker_cpu_ms"] = round1(ms(t.cpu1 - t.cpu0))
	r.Extra["broker_cpu_us_per_member"] = round1(float64(t.cpu1-t.cpu0) / float64(time.Microsecond) / float64(connected))
	r.Extra["connect_spread_s"] = round3((t.lastConnect - t.start).Seconds())
	if lastSeen > 0 {
		r.Extra["all_seen_after_last_connect_ms"] = round1(ms(lastSeen - t.lastConnect))
	}
	r.Extra["wrong_final"] = float64(wrongFinal)
	r.Extra["final_views_judged"] = float64(judged)
	if wrongFinal > 0 {
		e.note("%d of %d (watcher, member) pairs did not show the member online at the end", wrongFinal, judged)
	}
	if missed > 0 {
		r.Extra["members_not_seen_by_all"] = float64(missed)
		e.note("%d of %d members were never shown online to every watcher (left out of the delay)", missed, connected)
	}
	if t.group {
		gaps, backward, deltas := 0, 0, 0
		for _, o := range t.watchers {
			g, b, d := o.groupFaults()
			gaps, backward, deltas = gaps+g, backward+b, deltas+d
		}
		r.Extra["deltas_per_watcher"] = round1(float64(deltas) / float64(n))
		r.Extra["group_gaps"] = float64(gaps)
		r.Extra["group_backward"] = float64(backward)
		if gaps+backward > 0 {
			e.note("group topic: %d deltas did not follow the version the watcher held, %d snapshots went back", gaps, backward)
		}
	}
	e.evaluateObservers(t.end, t.watchers...)
	r.Metrics.ObserverMsgs = total
}

// firstMatch is the receive time of the first state at or after a that
// reflects it.
func (e *runEnv) firstMatch(a action, shown []Obs) (time.Duration, bool) {
	for _, ob := range shown {
		if ob.At >= a.at && e.matches(a, ob) {
			return ob.At, true
		}
	}
	return 0, false
}

// teamBigRun is what the large-group measurement carries from phase to
// phase.
type teamBigRun struct {
	e     *runEnv
	m     int // members of the large group
	topic string
	w     *observer // the watcher subscribed before the members connect
	devs  []*device
	up    []string // the members that connected
}

// teamBig restarts presenced-group with one large group, brings every
// member online, and measures the snapshot a new watcher gets and the CPU
// per member change.
func (e *runEnv) teamBig() error {
	b := &teamBigRun{e: e}
	return runPhases(b.bringOnline, b.newWatchers, b.changes)
}

// bringOnline records the parameters, restarts the broker with the large
// group, subscribes a watcher to it and connects every member, timing
// until the watcher shows them all online.
func (b *teamBigRun) bringOnline() error {
	e, r, cfg := b.e, b.e.run, b.e.cfg.Team
	b.m = e.capDevices(cfg.BigMembers, cfg.BigWatch+10, "team large-group members")
	m := b.m
	users := make([]string, m)
	for i := range users {
		users[i] = "b" + strconv.Itoa(i) // as loadDevices names them
	}
	r.Params["big_members"] = m
	r.Params["big_new_watchers"] = cfg.BigWatch
	r.Params["big_change_rate_per_s"] = cfg.BigRate

	e.closeAll()
	e.sys.kill()
	e.sys.groups = map[string][]string{bigGroup: users}
	if err := e.sys.start(); err != nil {
		return fmt.Errorf("restart with the %d-member group: %w", m, err)
	}
	e.watchDrops()
	b.topic = groupTopicPrefix + bigGroup
	isMember := make(map[string]bool, m)
	for _, u := range users {
		isMember[u] = true
	}
	var err error
	if b.w, err = e.newObserverFilters("w-big", []string{b.topic}, 64<<10, func(u string) bool { return isMember[u] }); err != nil {
		return err
	}
	t0 := mono()
	if b.devs, _, _, err = e.loadDevices("b", m, 600); err != nil {
		return fmt.Errorf("large group: %w", err)
	}
	b.up = usersOf(b.devs)
	if got, ok := e.waitProgress(mono()+60*time.Second, 10*time.Second, len(b.up), func() int { return b.w.count(b.up, online) }); !ok {
		return fmt.Errorf("large group: the watcher showed %d of %d members online (%s)", got, len(b.up), b.w.state())
	}
	r.Extra["big_all_online_s"] = round3((mono() - t0).Seconds())
	return nil
}

// newWatchers subscribes new watchers, one after the other, and times each
// from dialing to the snapshot, which must hold every member with those
// online.
func (b *teamBigRun) newWatchers() error {
	e, r, cfg := b.e, b.e.run, b.e.cfg.Team
	var firsts []float64
	for j := range cfg.BigWatch {
		o := newObserver(e.sys.parser())
		e.mu.Lock()
		e.obs = append(e.obs, o)
		e.mu.Unlock()
		c, err := o.connectFilters(e.sys.addr(), "w-big-new-"+strconv.Itoa(j), []string{b.topic}, 10*time.Second, 64<<10)
		if err != nil {
			return fmt.Errorf("large group: new watcher: %w", err)
		}
		var g groupMsg
		if !e.waitUntil(mono()+10*time.Second, func() bool {
			var ok bool
			g, ok = o.firstGroupMsg()
			return ok
		}) {
			return fmt.Errorf("large group: a new watcher got no group message within 10 s (%s; first message: %q)", o.state(), o.firstRaw())
		}
		if !g.snapshot || g.entries != b.m || g.online != len(b.up) {
			return fmt.Errorf("large group: a new watcher's first message is not the snapshot of %d members, %d online: %+v", b.m, len(b.up), g)
		}
		firsts = append(firsts, ms(g.at-c.DialStart))
		r.Extra["big_snapshot_bytes"] = float64(g.bytes)
		o.close()
	}
	if len(firsts) > 0 {
		s := summarize(firsts)
		r.Extra["big_first_snapshot_p50_ms"] = s.P50
		r.Extra["big_first_snapshot_max_ms"] = s.Max
	}
	return nil
}

// changes has members change status at the given rate until the watcher
// shows every change, and records the broker's CPU per member change, the
// rate achieved, the deltas sent and the group topic's faults.
func (b *teamBigRun) changes() error {
	e, r, cfg, w := b.e, b.e.run, b.e.cfg.Team, b.w
	var movers []*device
	for _, d := range b.devs {
		if d != nil && len(movers) < cfg.BigChanges {
			movers = append(movers, d)
		}
	}
	k := len(movers)
	r.Params["big_changes"] = k
	tagOf := make(map[string]string, k)
	changed := make([]string, k)
	var tagMu sync.Mutex
	every := time.Duration(float64(time.Second) / cfg.BigRate)
	msgsW0 := w.msgs.Load()
	cpu0, err := e.sys.cpu()
	if err != nil {
		return err
	}
	start := mono() + 50*time.Millisecond
	for j, d := range movers {
		e.sleepUntil(start + time.Duration(j)*every)
		tag := nextTag()
		tagMu.Lock()
		tagOf[d.user], changed[j] = tag, d.user
		tagMu.Unlock()
		if _, err := d.setStatus("away", tag); err != nil {
			return fmt.Errorf("large group: status change: %w", err)
		}
	}
	lastChange := mono()
	has := func(u string, ob Obs) bool {
		tagMu.Lock()
		defer tagMu.Unlock()
		return ob.Text == tagOf[u]
	}
	if got, ok := e.waitProgress(mono()+30*time.Second, 10*time.Second, k, func() int { return w.count(changed, has) }); !ok {
		return fmt.Errorf("large group: the watcher showed %d of %d status changes", got, k)
	}
	seen := mono()
	cpu1, err := e.sys.cpu()
	if err != nil {
		return err
	}
	r.Extra["big_cpu_us_per_change"] = round1(float64(cpu1-cpu0) / float64(time.Microsecond) / float64(k))
	r.Extra["big_changes_per_s"] = round1(float64(k) / max(lastChange-start, time.Millisecond).Seconds())
	r.Extra["big_change_deltas"] = float64(w.msgs.Load() - msgsW0)
	r.Extra["big_all_changes_seen_after_last_ms"] = round1(ms(seen - lastChange))
	gaps, backward, _ := w.groupFaults()
	if gaps+backward > 0 {
		r.Extra["big_group_gaps"] = float64(gaps + backward)
		e.note("large group: %d deltas did not follow, or snapshots went back", gaps+backward)
	}
	return nil
}

// groupMsg is one message of a group topic.
type groupMsg struct {
	at       time.Duration
	version  uint64
	follows  uint64
	snapshot bool // a snapshot ("members"); else a delta ("follows", "changes")
	entries  int  // members in a snapshot, changes in a delta
	online   int
	bytes    int
}

// memberEntry is one member's state in a group message.
type memberEntry struct {
	user string
	ob   Obs
}

// parseGroup reads a group snapshot or delta (roster.Snapshot,
// roster.Delta): each member entry becomes that member's state, versioned
// by the member's presence version.
func parseGroup(payload []byte) (groupMsg, []memberEntry, bool) {
	var v struct {
		Version uint64            `json:"version"`
		Follows *uint64           `json:"follows"`
		Members []json.RawMessage `json:"members"`
		Changes []json.RawMessage `json:"changes"`
		Online  int               `json:"online"`
	}
	if err := json.Unmarshal(payload, &v); err != nil {
		return groupMsg{}, nil, false
	}
	g := groupMsg{version: v.Version, snapshot: v.Follows == nil, online: v.Online, bytes: len(payload)}
	raws := v.Members
	if !g.snapshot {
		g.follows, raws = *v.Follows, v.Changes
	}
	g.entries = len(raws)
	entries := make([]memberEntry, 0, len(raws))
	for _, raw := range raws {
		var mb struct {
			User    string `json:"user"`
			Status  string `json:"status"`
			Text    string `json:"text"`
			Version uint64 `json:"version"`
		}
		if err := json.Unmarshal(raw, &mb); err != nil || mb.User == "" || mb.Status == "" {
			return groupMsg{}, nil, false
		}
		entries = append(entries, memberEntry{mb.User, Obs{
			Online: mb.Status != "offline", Status: mb.Status, Text: mb.Text,
			Version: mb.Version, Hash: payloadHash(raw),
		}})
	}
	return g, entries, true
}

// flushGroup records a group message and its member states; o.mu is held.
func (o *observer) flushGroup(m rawMsg) {
	g, entries, ok := parseGroup(m.payload)
	if !ok {
		o.bad.Add(1)
		return
	}
	g.at = m.at
	o.groups = append(o.groups, g)
	for _, en := range entries {
		en.ob.At = m.at
		o.tl[en.user] = append(o.tl[en.user], en.ob)
	}
}

// firstGroupMsg is the first group message the observer received.
func (o *observer) firstGroupMsg() (groupMsg, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flush()
	if len(o.groups) == 0 {
		return groupMsg{}, false
	}
	return o.groups[0], true
}

// firstRaw describes the first message the observer received, for errors.
func (o *observer) firstRaw() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.first
}

// groupFaults checks the observer's group messages against the contract.
func (o *observer) groupFaults() (gaps, backward, deltas int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flush()
	return groupFaults(o.groups)
}

// groupFaults counts, in receive order: deltas that do not follow the
// version held (or do not advance it by one), and snapshots older than the
// version held. A snapshot replaces what is held.
func groupFaults(msgs []groupMsg) (gaps, backward, deltas int) {
	var held uint64
	have := false
	for _, g := range msgs {
		if g.snapshot {
			if have && g.version < held {
				backward++
				continue
			}
			held, have = g.version, true
			continue
		}
		deltas++
		if !have || g.follows != held || g.version != g.follows+1 {
			gaps++
		}
		held = max(held, g.version)
		have = true
	}
	return gaps, backward, deltas
}

// teamCompare sets the group topic's figures against the user topics' in
// the same run, and judges the team targets, on the presenced-group run.
func teamCompare(runs []result.Run, batch time.Duration) {
	var g, users, mosq *result.Run
	for i := range runs {
		r := &runs[i]
		if r.Scenario != scenarioTeam || r.Error != "" {
			continue
		}
		switch r.System {
		case systemGroup:
			g = r
		case result.SystemMemory:
			users = r
		case result.SystemMosquitto:
			mosq = r
		}
	}
	if g == nil {
		return
	}
	if g.Extra == nil {
		g.Extra = map[string]float64{}
	}
	gm := g.Extra["msgs_total"]
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "missed"
	}
	if users != nil && gm > 0 {
		ratio := users.Extra["msgs_total"] / gm
		g.Extra["msgs_ratio_vs_user_topics"] = round1(ratio)
		g.Notes = append(g.Notes, fmt.Sprintf("target ≥ 20× fewer messages than presenced's user topics: %s× (%s against %s messages per watcher during the burst; the snapshot on subscribe not counted): %s",
			strconv.FormatFloat(round1(ratio), 'f', -1, 64), fmtFloat(users.Extra["msgs_per_watcher"]), fmtFloat(g.Extra["msgs_per_watcher"]), verdict(ratio >= 20)))
	} else {
		g.Notes = append(g.Notes, "target ≥ 20× fewer messages than user topics: not measured (no presenced-memory team run)")
	}
	if mosq != nil && gm > 0 {
		g.Extra["msgs_ratio_vs_mosquitto"] = round1(mosq.Extra["msgs_total"] / gm)
	}
	if b, ok := toFloat(g.Params["batch_ms"]); ok {
		batch = time.Duration(b * float64(time.Millisecond))
	}
	limit := ms(batch) + 50
	if l := g.Metrics.Latency; l != nil {
		g.Notes = append(g.Notes, fmt.Sprintf("target p99 from a member's CONNECT to every watcher showing it online ≤ batch window + 50 ms = %s ms: p99 %s ms: %s",
			fmtFloat(limit), fmtFloat(l.P99), verdict(l.P99 <= limit)))
	}
	wrong := g.Extra["wrong_final"]
	c := g.Correct
	g.Notes = append(g.Notes, fmt.Sprintf("target zero wrong states at the end: %s of %s (watcher, member) views not online, %d ghosts, %d wrong offline, %d stale, %d backward, %s group gaps: %s",
		fmtFloat(wrong), fmtFloat(g.Extra["final_views_judged"]), c.Ghosts, c.WrongOffline, c.StaleOverwrites, c.BackwardVersion, fmtFloat(g.Extra["group_gaps"]+g.Extra["group_backward"]),
		verdict(wrong == 0 && c == (result.Correctness{}) && g.Extra["group_gaps"]+g.Extra["group_backward"] == 0 && g.Extra["members_not_seen_by_all"] == 0)))
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// toFloat reads a number parameter (it may have gone through JSON).
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}
