package store

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"

	"github.com/presenced/presenced/presence"
)

// Memory keeps every user record in this process. It is the single-node
// store: one mutex guards the map, and each operation is a pure function of
// the presence package applied under it, so each is atomic exactly as a Redis
// script will be.
type Memory struct {
	now    func() time.Time
	rules  presence.Rules
	report func(Event) // called under mu, in commit order; must not block

	mu sync.Mutex
	// users are read with get, written with put (record.go). A pointer
	// each: a map slot is 24 bytes, where a record inline made it 128, and
	// a map holds a third or more of its slots empty (issue 23). The
	// reaper reads each record's due time from it in place (record.due:
	// no copy, no aggregate derived).
	users  map[string]*record
	groups map[string]map[string]struct{} // group -> members (groups.go)
	claims map[string][]string            // user -> groups its last token claimed

	nodes map[string]presence.NodeHistory // node -> its history, under mu (memory_nodes.go)
	names *btree.BTreeG[string]           // the users' names, ordered, under mu (memory_list.go)

	logOnce sync.Once
	glog    *memoryLog // the group log (grouplog.go)

	inc       string        // this run's incarnation
	retention time.Duration // how long an offline user is kept (Forget's owner asks Retention)
	reapEvery time.Duration // the reaper's interval (Tasks)
	reaped    atomic.Int64  // sessions the reaper ended
	missed    atomic.Int64  // dormant sessions the reaper ended as missed (memory_dormant.go)
}

// NewMemory returns an empty store. now is the clock (time.Now in
// production); report receives every committed change, in commit order, while
// the store's lock is held, so it must return at once (a Feed's Push does).
func NewMemory(rules presence.Rules, now func() time.Time, report func(Event)) *Memory {
	return &Memory{now: now, rules: rules, report: report, users: make(map[string]*record), names: newIndex(), inc: newIncarnation(),
		retention: 30 * 24 * time.Hour, reapEvery: time.Second}
}

// Start implements Store: the memory store has nothing to connect.
func (m *Memory) Start(context.Context) error { return nil }

// Stop implements Store: the memory store has no background work.
func (m *Memory) Stop() {}

// Ready implements Store: the memory store always answers.
func (m *Memory) Ready() bool { return true }

// Stats implements Store.
func (m *Memory) Stats() Stats { return Stats{Reaped: m.reaped.Load(), Missed: m.missed.Load()} }

// Incarnation implements Store: a name for this run, made at construction.
func (m *Memory) Incarnation() string { return m.inc }

// Retention implements Store.
func (m *Memory) Retention() time.Duration { return m.retention }

// Tasks implements Store: the reaper, which ends the sessions whose
// store-side expiry has passed.
func (m *Memory) Tasks() []Task {
	return []Task{{Name: "reap", Every: m.reapEvery, Budget: m.reapEvery, Run: func(ctx context.Context) error {
		_, err := m.Reap(ctx)
		return err
	}}}
}

// Own implements Store: the memory store loses no write, so there is
// nothing to compare.
func (m *Memory) Own(context.Context) ([]presence.StoredSession, error) { return nil, nil }

// Tombstone implements Store: the memory store never loses a user.
func (m *Memory) Tombstone(context.Context, map[string]uint64) (int, error) { return 0, nil }

// commit stores u, derives its aggregate and reports it when it changed,
// with the sessions this change ended (ended, in the order they ended).
func (m *Memory) commit(u presence.User, now time.Time, cause presence.Cause, ended ...presence.Session) {
	u, p, changed := u.Commit(m.rules, now)
	if _, ok := m.users[u.Name]; !ok {
		m.indexAdd(u.Name)
	}
	m.put(u)
	if changed {
		p.Ended = presence.EndedViews(ended) // the report's, not Current's
		m.report(Event{Kind: Changed, Aggregate: p, Cause: cause})
	}
}

// Open starts a session with the user's next epoch, taking over a live
// session with the same id in the same step.
func (m *Memory) Open(_ context.Context, a presence.OpenArgs) (presence.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	a.Conn = a.Conn.Bounded()
	u, s, taken, err := m.get(a.User).Open(a, now)
	if err != nil {
		return presence.Session{}, fmt.Errorf("open %s/%s: %w", a.User, a.ID, err)
	}
	if taken != nil {
		m.commit(u, now, presence.Cause{}, *taken)
	} else {
		m.commit(u, now, presence.Cause{})
	}
	return s, nil
}

// End ends a live session when the epoch is its current one.
func (m *Memory) End(_ context.Context, a presence.EndArgs) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	u, ended, err := m.get(a.User).End(a.ID, a.Epoch, a.Reason, a.LastWords, now)
	if err != nil {
		return fmt.Errorf("end %s/%s: %w", a.User, a.ID, err)
	}
	u = u.SeenAt(ended, a.LastSign) // last_seen: the last sign of life, when earlier than the end
	m.commit(u, now, presence.Cause{Ended: a.Reason, WillDelay: a.WillDelay}, ended)
	return nil
}

// Update changes a live session's own status, text or device.
func (m *Memory) Update(_ context.Context, ref presence.SessionRef, upd presence.Update) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	u, _, err := m.get(ref.User).UpdateSession(ref.ID, ref.Epoch, upd)
	if err != nil {
		return fmt.Errorf("update %s/%s: %w", ref.User, ref.ID, err)
	}
	m.commit(u, now, presence.Cause{})
	return nil
}

// SetAccount changes a user's account setting.
func (m *Memory) SetAccount(_ context.Context, user string, upd presence.AccountUpdate) error {
	if err := presence.ValidUser(user); err != nil {
		return fmt.Errorf("set account: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	u := m.get(user)
	u.Name = user
	u, err := u.SetAccountAt(upd, now) // privacy: issue 22
	if err != nil {
		return fmt.Errorf("set account %s: %w", user, err)
	}
	m.commit(u, now, presence.Cause{})
	return nil
}

// Renew extends the store-side expiry of each named session to now+ttl. It
// returns the sessions the store no longer has live at that epoch.
func (m *Memory) Renew(_ context.Context, refs []presence.SessionRef, ttl time.Duration) ([]presence.SessionRef, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var stale []presence.SessionRef
	for _, r := range refs {
		rec := m.users[r.User]
		if rec == nil {
			stale = append(stale, r) // no such user: no such session
			continue
		}
		u, err := rec.user().Renew(r.ID, r.Epoch, now, ttl)
		if err != nil {
			stale = append(stale, r)
			continue
		}
		*rec = repack(*rec, u, rec.version, rec.since()) // a renewal changes no aggregate
	}
	return stale, nil
}

// Reap ends, as timeouts, the live sessions whose expiry has passed. It scans
// every user: O(users) per call, well under a millisecond at 15k sessions.
func (m *Memory) Reap(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var due []string
	for name, r := range m.users {
		if d, ok := r.due(); ok && !now.Before(d) {
			due = append(due, name)
		}
	}
	n := 0
	for _, name := range due {
		u := m.get(name)
		if d, ok := u.NextDeadline(); ok && !now.Before(d) {
			var reaped []presence.Session
			u, reaped = u.Reap(now)
			n += len(reaped)
			m.reaped.Add(int64(len(reaped)))
			m.commit(u, now, presence.Cause{Ended: presence.EndTimeout}, reaped...)
		}
		m.reapDormant(m.get(name), now)
	}
	return n, nil
}

// Forget drops the users who are offline and were last seen before
// before: the memory store keeps an offline user for a retention, as Redis
// does with a key expiry. It returns how many it dropped. The user's
// presence is not reported again: whoever publishes it forgets it by the
// same rule (publisher.Forget).
func (m *Memory) Forget(before time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for name, r := range m.users {
		if r.live() == 0 && r.lastSeen().Before(before) && m.get(name).Current.Status == presence.Offline {
			delete(m.users, name)
			m.indexDelete(name)
			n++
		}
	}
	return n
}

// Get returns a user's current aggregate, with the sessions it ended last
// as a read of the user reports them (tests compare the stores with it).
func (m *Memory) Get(_ context.Context, user string) (presence.Aggregate, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.lookup(user)
	if !ok || u.Current.Version == 0 {
		return presence.Aggregate{}, false, nil
	}
	p := u.Current
	p.Ended = u.RecentlyEnded()
	return p, true, nil
}

// User returns a user's whole record: live and recently ended sessions.
func (m *Memory) User(_ context.Context, user string) (presence.User, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.lookup(user)
	return u, ok, nil
}

// Load reports every user's current aggregate as a change, sorted by user
// name: the initial load goes the same way as every commit.
func (m *Memory) Load(context.Context) error {
	m.reportCurrent(nil)
	return nil
}

// reportCurrent reports the current aggregate of each of users (nil: every
// user) the store has, with the sessions it ended last (oldest first), as
// Redis does, sorted by name, outside the lock.
func (m *Memory) reportCurrent(users []string) {
	m.mu.Lock()
	var all []presence.Aggregate
	add := func(u presence.User) {
		if u.Current.Version != 0 {
			p := u.Current
			p.Ended = u.RecentlyEnded()
			all = append(all, p)
		}
	}
	if users == nil {
		for name := range m.users {
			add(m.get(name))
		}
	}
	for _, name := range users {
		add(m.get(name))
	}
	m.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].User < all[j].User })
	for _, p := range all {
		m.report(Event{Kind: Changed, Aggregate: p})
	}
}
