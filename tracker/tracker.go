package tracker

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	"github.com/presenced/presenced/internal/names"
	"github.com/presenced/presenced/presence"
)

// Store is what the tracker needs of a presence store. Every operation is
// atomic and epoch-checked: a write naming a session at an epoch that is not
// its current live one returns an error wrapping presence.ErrStaleEpoch (or
// presence.ErrNotLive) and changes nothing.
type Store interface {
	Open(ctx context.Context, a presence.OpenArgs) (presence.Session, error)
	End(ctx context.Context, a presence.EndArgs) error
	Update(ctx context.Context, ref presence.SessionRef, upd presence.Update) error
	SetAccount(ctx context.Context, user string, upd presence.AccountUpdate) error
	// Renew extends the named sessions' store-side expiry and returns those
	// the store no longer has live at that epoch.
	Renew(ctx context.Context, refs []presence.SessionRef, ttl time.Duration) ([]presence.SessionRef, error)
	// Own is the read of Audit: the live sessions the store holds of this
	// node, with their own state.
	Own(ctx context.Context) ([]presence.StoredSession, error)
}

// Batcher is a store that can make many writes in one round trip (the
// Redis store pipelines them). Each write is checked and applied as alone,
// in the order given; for each, it returns the epoch an open was given and
// the error the single operation would have returned. The tracker never
// puts two writes of one session in a batch.
type Batcher interface {
	Batch(ctx context.Context, ws []presence.Write) (epochs []uint64, errs []error)
}

// maxBatch bounds the writes of one batch.
const maxBatch = 256

// Tracker writes this node's sessions to the store.
type Tracker struct {
	store   Store
	batch   Batcher // store, when it batches; else nil
	plan    presence.Plan
	idle    presence.IdleRules
	outage  func(error) bool
	log     *slog.Logger
	seed    maphash.Seed
	shards  []*queue
	retryIn time.Duration
	// observer is Options.Observe (nil: nothing is timed).
	observer func(op Op, d time.Duration)
	// sessions is Options.Sessions (nil: no session lines).
	sessions *slog.Logger

	mu    sync.Mutex
	slots map[string]*slot // by client id, which is the session id
	accts map[string]*acct // by user

	stop chan struct{}
	wg   sync.WaitGroup

	// scratchHeld is the sum of the workers' scratch.held(), for tests;
	// linger is scratchLinger (a test's own).
	scratchHeld atomic.Int64
	linger      time.Duration

	Stats Stats
}

// Stats are counts read with atomic loads.
type Stats struct {
	Depth       atomic.Int64 // items waiting in the queues or being written
	Retrying    atomic.Int64 // items waiting to be tried again after a store failure
	Stale       atomic.Int64 // writes the store refused as stale
	StaleEvents atomic.Int64 // hook events of a replaced connection, ignored
	Errors      atomic.Int64 // store failures (retried)
	Opened      atomic.Int64
	Ended       atomic.Int64
	Updated     atomic.Int64
	Lost        atomic.Int64 // sessions the store no longer had at renewal
	IdleEntered atomic.Int64 // sessions shown idle for want of activity
	IdleLeft    atomic.Int64 // sessions brought back from auto-idle
	Batches     atomic.Int64 // batches of writes made in one round trip (Batcher)
	Batched     atomic.Int64 // writes made in those batches
	// EndedBy counts the ends written, by presence.EndReasons index (the
	// last: any other reason); Ended is their sum.
	EndedBy [len(presence.EndReasons) + 1]atomic.Int64
}

// slot is one connection's session: what the store should hold
// (presence.Wanted) and what it was last told (presence.Written), kept in
// a compact form of their own (wantState, haveState, slotRare) so that a
// slot fits Go's 224-byte size class (issue 23; TestSlotIsCompact): their
// flags and queued share one word, a wanted session's status and end
// reason share one field, and what few connections have (a will, a
// check-in period, a status text …) is kept aside. wanted and written
// rebuild the presence values (copies, on the stack) for presence's pure
// functions.
type slot struct {
	key  string // the broker's key of the client id (presence.ClientKey): two users' sessions of one id are two slots; never changes
	mu   sync.Mutex
	act  *presence.Activity // the connection's activity (nil: idle is off); under mu
	log  sessionLog         // the session log's memory (Options.Sessions); under mu
	want wantState          // under mu, as the rest
	have haveState
	rare *slotRare // nil: none of its fields is set (TestSlotRareFieldsKeptAside)
	// The flags, side by side in one word, and the wanted connection's
	// listener as a code (names.Code; 0 with a listener that has none,
	// kept in rare).
	live, established, autoIdle bool // want's: presence.Wanted's Live, Established, AutoIdle
	open                        bool // have's: presence.Written's Open
	queued                      bool
	listener                    uint8
}

// wantState is presence.Wanted but its flags (the slot's) and its rare
// fields (slotRare), with Status and Reason in one field, statusOr: what
// counts of a session is its own status while its connection lives and
// its end reason once it ended, never both. Connect sets Reason "" with
// Live true; only Disconnect sets Reason, and Live false with it; and
// once Live is false nothing reads Status (Plan.Next writes a status only
// in an open or an update, of a live connection:
// TestPlanIgnoresStatusOnceEnded; CheckIdle skips an ended one), so a
// presence/set that comes after is not kept (setStatus).
type wantState struct {
	conn     presence.ConnID
	user     string
	device   string
	statusOr string // Wanted.Status while live; Wanted.Reason once ended
	net      netFacts
}

// netFacts is presence.Conn but its Listener (the slot's listener).
type netFacts struct {
	username, ip string
	port         int
	expiry       uint32
	keepAlive    uint16
	protoVer     uint8
	cleanStart   bool
}

// haveState is presence.Written but its Open (the slot's open) and its
// Text (slotRare).
type haveState struct {
	conn   presence.ConnID
	user   string
	epoch  uint64
	device string
	status presence.Status
}

// slotRare is what few connections have: a will's text or delay, a
// dormant device's check-in period, a last sign of life (set only as a
// connection ends), a status text (wanted, and written), a listener
// without a code (names.Code). Kept aside, so
// that a slot holds 8 bytes for these 104.
type slotRare struct {
	lastWords      *string
	willDelay      time.Duration
	expect, margin time.Duration
	lastSign       time.Time
	text, haveText string // Wanted.Text, Written.Text
	listener       string // Wanted.Net.Listener, when it has no code
}

// setRare changes the slot's rare fields with f, making them when there
// are none, and dropping them when f left none set. s.mu is held.
func (s *slot) setRare(f func(r *slotRare)) {
	if s.rare == nil {
		s.rare = new(slotRare)
	}
	f(s.rare)
	if *s.rare == (slotRare{}) {
		s.rare = nil
	}
}

// wanted returns what the store should hold for the slot. s.mu is held.
func (s *slot) wanted() presence.Wanted {
	n := &s.want.net
	w := presence.Wanted{
		Conn: s.want.conn, User: s.want.user, Device: s.want.device,
		Established: s.established, Live: s.live, AutoIdle: s.autoIdle,
		Net: presence.Conn{Username: n.username, IP: n.ip, Port: n.port, Listener: names.Name(s.listener),
			ProtoVer: n.protoVer, CleanStart: n.cleanStart, KeepAlive: n.keepAlive, Expiry: n.expiry},
	}
	if r := s.rare; r != nil {
		w.Text, w.LastWords, w.WillDelay, w.Expect, w.Margin, w.LastSign = r.text, r.lastWords, r.willDelay, r.expect, r.margin, r.lastSign
		if r.listener != "" {
			w.Net.Listener = r.listener
		}
	}
	if s.live {
		w.Status = presence.Status(s.want.statusOr)
	} else {
		w.Reason = presence.EndReason(s.want.statusOr)
	}
	return w
}

// listenerCode gives a listener its code (names.Code; a test's own).
var listenerCode = names.Code

// setWanted makes w what the store should hold for the slot: all of it
// but the Status of one that is not Live, or its Reason if it is (see
// wantState). s.mu is held.
func (s *slot) setWanted(w presence.Wanted) {
	code, coded := listenerCode(w.Net.Listener)
	listener := "" // kept in rare: one without a code
	if !coded {
		listener = w.Net.Listener
	}
	if s.rare != nil || w.Text != "" || w.LastWords != nil || w.WillDelay != 0 || w.Expect != 0 || w.Margin != 0 || !w.LastSign.IsZero() || listener != "" {
		s.setRare(func(r *slotRare) {
			r.text, r.lastWords, r.willDelay, r.expect, r.margin, r.lastSign = w.Text, w.LastWords, w.WillDelay, w.Expect, w.Margin, w.LastSign
			r.listener = listener
		})
	}
	n := &w.Net
	s.want = wantState{conn: w.Conn, user: w.User, device: w.Device, statusOr: string(w.Status),
		net: netFacts{username: n.Username, ip: n.IP, port: n.Port, expiry: n.Expiry, keepAlive: n.KeepAlive, protoVer: n.ProtoVer, cleanStart: n.CleanStart}}
	s.listener = code
	if !w.Live {
		s.want.statusOr = string(w.Reason)
	}
	s.established, s.live, s.autoIdle = w.Established, w.Live, w.AutoIdle
}

// setStatus sets the own status of a live connection (an ended one has
// none that counts: wantState). s.mu is held.
func (s *slot) setStatus(st presence.Status) {
	if s.live {
		s.want.statusOr = string(st)
	}
}

// setText sets the wanted status text. s.mu is held.
func (s *slot) setText(text string) {
	if s.rare != nil || text != "" {
		s.setRare(func(r *slotRare) { r.text = text })
	}
}

// written returns what the store was last told for the slot. s.mu is held.
func (s *slot) written() presence.Written {
	h := presence.Written{
		Conn: s.have.conn, User: s.have.user, Epoch: s.have.epoch, Open: s.open,
		Device: s.have.device, Status: s.have.status,
	}
	if s.rare != nil {
		h.Text = s.rare.haveText
	}
	return h
}

// setWritten records h as what the store was last told. s.mu is held.
func (s *slot) setWritten(h presence.Written) {
	s.have = haveState{conn: h.Conn, user: h.User, epoch: h.Epoch, device: h.Device, status: h.Status}
	s.open = h.Open
	s.setHaveText(h.Text)
}

// setHaveText sets the written status text. s.mu is held.
func (s *slot) setHaveText(text string) {
	if s.rare != nil || text != "" {
		s.setRare(func(r *slotRare) { r.haveText = text })
	}
}

// clientID returns the session id the store holds and presence shows: the
// client id of s.key (presence.ClientIDOf, a part of it). Not a field: 16
// bytes a slot that would hold nothing key does not (issue 23).
func (s *slot) clientID() string { return presence.ClientIDOf(s.key) }

type acct struct {
	user    string
	mu      sync.Mutex
	pending presence.AccountUpdate
	queued  bool
}

// Options configure a tracker.
type Options struct {
	Node string        // this node, written into each session
	TTL  time.Duration // each session's store-side expiry
	// Shards is how many worker goroutines write side by side. Default:
	// one for a store that batches (a Batcher: Redis), whose worker sends
	// every dirty session's next write in one pipelined round, so that
	// the writes that gather while a round is out go together in the next
	// (measured: 15 % less redis-server CPU per change than four workers
	// at 3,000 changes/s, bench/README.md "The Redis path"); four for one
	// that does not (memory), whose writes are calls in this process.
	Shards int
	// Outage reports the store errors that mean "unreachable", which the
	// store logs once per outage itself: the tracker logs those writes at
	// debug level only. Nil: none.
	Outage func(error) bool
	Log    *slog.Logger
	// Idle says after how long without activity a session is shown idle
	// (CheckIdle); zero: never.
	Idle presence.IdleRules
	// Observe, when set, is told how long each store call took (failed
	// ones included), by op: open, end, update, account, renew, and batch
	// (one pipelined round trip of many writes).
	Observe func(op Op, d time.Duration)
	// Sessions, when set, gets one info line per session opened and per
	// session ended (sessionlog.go). Nil: none.
	Sessions *slog.Logger
}

// Op names a store call (Options.Observe).
type Op int

// The store calls.
const (
	OpOpen Op = iota
	OpEnd
	OpUpdate
	OpAccount
	OpRenew
	OpBatch
	NumOps
)

// OpNames are the names of the ops, by Op.
var OpNames = [NumOps]string{"open", "end", "update", "account", "renew", "batch"}

// observe tells Options.Observe how long op took since start.
func (t *Tracker) observe(op Op, start time.Time) {
	if t.observer != nil {
		t.observer(op, time.Since(start))
	}
}

// New returns a tracker writing to store; Start starts its workers.
func New(store Store, o Options) *Tracker {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	batch, _ := store.(Batcher)
	if o.Shards <= 0 {
		o.Shards = 4
		if batch != nil {
			o.Shards = 1
		}
	}
	if o.Outage == nil {
		o.Outage = func(error) bool { return false }
	}
	t := &Tracker{
		store: store, plan: presence.Plan{Node: o.Node, TTL: o.TTL}, idle: o.Idle, outage: o.Outage, log: o.Log, observer: o.Observe, sessions: o.Sessions,
		seed:    maphash.MakeSeed(),
		retryIn: 200 * time.Millisecond,
		linger:  scratchLinger,
		slots:   make(map[string]*slot),
		accts:   make(map[string]*acct),
		stop:    make(chan struct{}),
	}
	t.batch = batch
	for range o.Shards {
		t.shards = append(t.shards, newQueue(&t.Stats.Depth))
	}
	return t
}

// refused reports the errors that trying again cannot fix: the store
// refused the write for what it says.
func refused(err error) bool {
	for _, e := range []error{presence.ErrBadName, presence.ErrBadStatus, presence.ErrBadPayload, presence.ErrBadTransition} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Start starts the workers.
func (t *Tracker) Start() {
	for _, q := range t.shards {
		t.wg.Add(1)
		go t.work(q)
	}
}

// Flush waits until every queue is empty (every write made, not merely
// taken) or ctx ends.
func (t *Tracker) Flush(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for t.Stats.Depth.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// Stop stops the workers and waits for them.
func (t *Tracker) Stop() {
	close(t.stop)
	t.wg.Wait()
}

func (t *Tracker) shard(key string) *queue {
	return t.shards[maphash.String(t.seed, key)%uint64(len(t.shards))]
}

func (t *Tracker) work(q *queue) {
	defer t.wg.Done()
	var sc scratch         // this worker's own
	var linger *time.Timer // armed while sc holds a burst's arrays
	defer func() {
		if linger != nil {
			linger.Stop()
		}
		t.scratchHeld.Add(-int64(sc.held()))
	}()
	for {
		var drop <-chan time.Time
		if sc.held() > keepScratch {
			if linger == nil {
				linger = time.NewTimer(t.linger)
			} else {
				linger.Reset(t.linger)
			}
			drop = linger.C
		}
		select {
		case <-t.stop:
			return
		case <-drop:
			// A burst is over: its arrays (up to maxBatch writes,
			// about 180 KiB) go back to the garbage collector.
			t.scratchHeld.Add(-int64(sc.held()))
			sc = scratch{}
			continue
		case <-q.signal:
		}
		was := sc.held()
		its := q.take()
		for len(its) > 0 {
			n := min(len(its), maxBatch)
			t.syncItems(its[:n], &sc)
			its = its[n:]
		}
		t.scratchHeld.Add(int64(sc.held() - was))
	}
}

// keepScratch is how many writes' arrays a worker keeps between syncs for
// good; it gives back larger ones, which only a burst makes, once no work
// came for scratchLinger (Tracker.linger).
const (
	keepScratch   = 16
	scratchLinger = time.Second
)

// retry puts an item back after a pause, unless the tracker is stopping.
func (t *Tracker) retry(it item) {
	t.wg.Add(1)
	t.Stats.Retrying.Add(1)
	go func() {
		defer t.wg.Done()
		defer t.Stats.Retrying.Add(-1)
		timer := time.NewTimer(t.retryIn)
		defer timer.Stop()
		select {
		case <-t.stop:
		case <-timer.C:
			t.enqueue(it)
		}
	}()
}

func (t *Tracker) enqueue(it item) {
	switch v := it.(type) {
	case *slot:
		v.mu.Lock()
		if v.queued {
			v.mu.Unlock()
			return
		}
		v.queued = true
		v.mu.Unlock()
		t.shard(v.clientID()).push(v)
	case *acct:
		v.mu.Lock()
		if v.queued {
			v.mu.Unlock()
			return
		}
		v.queued = true
		v.mu.Unlock()
		t.shard(v.user).push(v)
	}
}

// change applies fn, under the slot's mu, to the wanted state of session
// id if conn is still its connection; events of a replaced connection are
// counted and ignored.
func (t *Tracker) change(conn presence.ConnID, id string, fn func(s *slot)) {
	t.mu.Lock()
	s := t.slots[id]
	t.mu.Unlock()
	if s == nil {
		t.Stats.StaleEvents.Add(1)
		return
	}
	s.mu.Lock()
	if s.want.conn != conn {
		s.mu.Unlock()
		t.Stats.StaleEvents.Add(1)
		return
	}
	fn(s)
	s.mu.Unlock()
	t.enqueue(s)
}

// Connect is called when connection conn of user, with session id id, is
// about to be established (before CONNACK). It replaces any earlier
// connection with the same id. act is the connection's activity, which the
// hook records and CheckIdle reads (nil: the session is never shown idle).
// net is the connection's facts, which the store keeps with the session.
func (t *Tracker) Connect(conn presence.ConnID, id, user, device string, act *presence.Activity, net presence.Conn) {
	t.mu.Lock() // held while want is set, so that sync cannot drop the slot in between
	s := t.slots[id]
	if s == nil {
		s = &slot{key: id}
		t.slots[id] = s
	}
	s.mu.Lock()
	s.setWanted(presence.Wanted{Conn: conn, User: user, Device: device, Status: presence.Online, Live: true, Net: net})
	s.act = act
	s.mu.Unlock()
	t.mu.Unlock()
	t.enqueue(s)
}

// Established is called once CONNACK has been sent.
func (t *Tracker) Established(conn presence.ConnID, id string) {
	t.change(conn, id, func(s *slot) { s.established = true })
}

// Set applies a presence/set: at session scope to the session, at account
// scope to its user.
func (t *Tracker) Set(conn presence.ConnID, id, user string, req presence.SetRequest) {
	if req.Scope == presence.ScopeAccount {
		t.setAccount(user, req.AccountUpdate())
		return
	}
	t.change(conn, id, func(s *slot) {
		if s.autoIdle { // a presence/set is activity
			s.autoIdle = false
			t.Stats.IdleLeft.Add(1)
		}
		if req.Status != nil {
			s.setStatus(*req.Status)
		}
		if req.Text != nil {
			s.setText(*req.Text)
		}
		if req.Device != nil {
			s.want.device = *req.Device
		}
	})
}

// Active brings back the own status of a session its node showed idle for
// want of activity: called once when the connection is active again
// (presence.Activity.Touch reported it). It costs one store write.
func (t *Tracker) Active(conn presence.ConnID, id string) {
	t.change(conn, id, func(s *slot) {
		if s.autoIdle {
			s.autoIdle = false
			t.Stats.IdleLeft.Add(1)
		}
	})
}

// CheckIdle applies presence.IdleDecide at now to every live session that
// records its activity: one whose own status is online and that showed no
// activity for its idle time is shown idle (one store write), and one shown
// idle that was active since, or whose own status the client changed, is
// brought back (one store write). It returns how many sessions it changed.
func (t *Tracker) CheckIdle(now time.Time) (entered, left int) {
	all := t.allSlots()
	for _, s := range all {
		s.mu.Lock()
		act := s.act
		if act == nil || !s.live || !s.established {
			s.mu.Unlock()
			continue
		}
		last := act.Last()
		changed := false
		switch presence.IdleDecide(last, presence.Status(s.want.statusOr), s.autoIdle, t.idle.After(s.want.device), now) { // live: statusOr is its status
		case presence.IdleEnter:
			if act.MarkIdle(last) { // else activity came in between: not idle
				s.autoIdle, changed = true, true
				entered++
			}
		case presence.IdleLeave:
			act.ClearIdle()
			s.autoIdle, changed = false, true
			left++
		}
		s.mu.Unlock()
		if changed {
			t.enqueue(s)
		}
	}
	t.Stats.IdleEntered.Add(int64(entered))
	t.Stats.IdleLeft.Add(int64(left))
	return entered, left
}

func (t *Tracker) setAccount(user string, upd presence.AccountUpdate) {
	t.mu.Lock()
	a := t.accts[user]
	if a == nil {
		a = &acct{user: user}
		t.accts[user] = a
	}
	t.mu.Unlock()
	a.mu.Lock()
	a.pending = mergeAccount(upd, a.pending)
	a.mu.Unlock()
	t.enqueue(a)
}

// mergeAccount is the account update later coalesced over earlier: each
// field the later gives wins (the privacy keys too, issue 22).
func mergeAccount(later, earlier presence.AccountUpdate) presence.AccountUpdate {
	return presence.AccountUpdate{
		Status: pick(later.Status, earlier.Status), Text: pick(later.Text, earlier.Text),
		Invisible: pick(later.Invisible, earlier.Invisible), LastSeen: pick(later.LastSeen, earlier.LastSeen),
	}
}

func pick[T any](later, earlier *T) *T {
	if later != nil {
		return later
	}
	return earlier
}

// LastWords records the text of the connection's will on presence/set,
// applied when its session ends uncleanly.
func (t *Tracker) LastWords(conn presence.ConnID, id, text string) {
	t.change(conn, id, func(s *slot) { s.setRare(func(r *slotRare) { r.lastWords = &text }) })
}

// WillDelay records the MQTT 5 will delay of a connection whose will
// applies; the end carries it (presence.EndArgs.WillDelay).
func (t *Tracker) WillDelay(conn presence.ConnID, id string, d time.Duration) {
	t.change(conn, id, func(s *slot) { s.setRare(func(r *slotRare) { r.willDelay = d }) })
}

// LastSign records the last sign of life of a connection that is ending
// (a keep-alive timeout's last packet): its end carries it
// (presence.EndArgs.LastSign), and the user's last_seen is that time.
// Call it before Disconnect.
func (t *Tracker) LastSign(conn presence.ConnID, id string, at time.Time) {
	t.change(conn, id, func(s *slot) { s.setRare(func(r *slotRare) { r.lastSign = at }) })
}

// Expect records the check-in period a connection's device declared, and
// its margin (presence/dormant.go), before its CONNACK: its session is
// opened with them.
func (t *Tracker) Expect(conn presence.ConnID, id string, period, margin time.Duration) {
	t.change(conn, id, func(s *slot) { s.setRare(func(r *slotRare) { r.expect, r.margin = period, margin }) })
}

// Disconnect is called when the connection has ended.
func (t *Tracker) Disconnect(conn presence.ConnID, id string, reason presence.EndReason) {
	t.change(conn, id, func(s *slot) {
		s.live = false
		s.want.statusOr = string(reason) // its Reason, from now on (wantState)
	})
}

// Len returns the number of connections tracked.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.slots)
}

// outcome sorts a store error for presence.Applied, counting and logging it.
func (t *Tracker) outcome(op, id string, err error) presence.Outcome {
	switch {
	case err == nil:
		return presence.Done
	case errors.Is(err, presence.ErrStaleEpoch) || errors.Is(err, presence.ErrNotLive):
		t.Stats.Stale.Add(1)
		t.log.Debug("stale write rejected", "op", op, "session", id, "err", err)
		return presence.Stale
	case refused(err):
		t.log.Warn("write refused", "op", op, "session", id, "err", err)
		return presence.Refused
	}
	t.Stats.Errors.Add(1)
	level := slog.LevelWarn
	if t.outage(err) {
		level = slog.LevelDebug // the store logs an outage once
	}
	t.log.Log(context.Background(), level, "store write failed; will retry", "op", op, "session", id, "err", err)
	return presence.Failed
}

// sync writes the difference between a slot's wanted and written state, one
// planned write at a time, and reports whether to try again later.
func (s *slot) sync(t *Tracker) bool { return t.syncSlots([]*slot{s}, new(scratch))[0] }

// scratch holds the slices a worker reuses from one sync to the next, so
// that a change costs no allocation of them. Each worker owns one; nothing
// in it outlives the sync that fills it (syncSlots clears it).
type scratch struct {
	slots  []*slot
	ss     []syncing
	idx    []int
	ws     []presence.Write
	retry  []bool
	epochs []uint64
	errs   []error
}

// held returns how many syncs' arrays sc holds: the capacity of its
// largest.
func (sc *scratch) held() int {
	return max(cap(sc.slots), cap(sc.ss), cap(sc.idx), cap(sc.ws), cap(sc.retry), cap(sc.epochs), cap(sc.errs))
}

// grown returns b emptied, with room for n elements.
func grown[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, 0, n)
	}
	return b[:0]
}

// syncItems syncs items taken from a queue: the slots together, their
// writes batched (syncSlots), and the accounts one by one. Each item is put
// back after a pause when the store failed.
func (t *Tracker) syncItems(its []item, sc *scratch) {
	slots := grown(sc.slots, len(its))
	defer func() { clear(slots); sc.slots = slots[:0] }()
	for _, it := range its {
		s, ok := it.(*slot)
		if !ok {
			if it.sync(t) {
				t.retry(it)
			}
			t.Stats.Depth.Add(-1) // after the write, so Flush means "written"
			continue
		}
		slots = append(slots, s)
	}
	if len(slots) == 0 {
		return
	}
	for i, retry := range t.syncSlots(slots, sc) {
		if retry {
			t.retry(slots[i])
		}
		t.Stats.Depth.Add(-1)
	}
}

// syncing is one slot's sync in progress.
type syncing struct {
	s     *slot
	w     presence.Wanted
	h     presence.Written
	wr    presence.Write // the write in flight
	more  bool
	retry bool
}

// syncSlots writes the difference between each slot's wanted and written
// state, in rounds: each round makes the next planned write of every slot
// that has one, together (one round trip when the store is a Batcher), and
// the outcome of a slot's write decides its next one, so each session's
// writes are made one at a time and in order. slots holds no slot twice. It
// reports, for each slot, whether to try again later.
func (t *Tracker) syncSlots(slots []*slot, sc *scratch) []bool {
	ss := grown(sc.ss, len(slots))[:len(slots)]
	defer func() { clear(ss); sc.ss = ss[:0] }() // drop what the slots held
	for i, s := range slots {
		s.mu.Lock()
		s.queued = false
		ss[i] = syncing{s: s, w: s.wanted(), h: s.written(), more: true}
		s.mu.Unlock()
	}
	idx := grown(sc.idx, len(ss))
	ws := grown(sc.ws, len(ss))
	defer func() { sc.idx = idx[:0]; clear(ws); sc.ws = ws[:0] }()
	for {
		idx, ws = idx[:0], ws[:0]
		for i := range ss {
			x := &ss[i]
			if !x.more {
				continue
			}
			x.wr = t.plan.Next(x.s.clientID(), x.w, x.h)
			if x.wr.Kind == presence.WriteNone {
				x.more = false
				continue
			}
			idx = append(idx, i)
			ws = append(ws, x.wr)
		}
		if len(ws) == 0 {
			break
		}
		epochs, errs := t.write(ws, sc)
		for k, i := range idx {
			x := &ss[i]
			o := t.outcome(opName(x.wr.Kind), x.s.clientID(), errs[k])
			if o == presence.Done {
				if t.sessions != nil {
					t.logWrite(x, epochs[k], time.Now())
				}
				switch x.wr.Kind {
				case presence.WriteEnd:
					t.ended(x.wr.End.Reason)
				case presence.WriteOpen:
					t.Stats.Opened.Add(1)
				case presence.WriteUpdate:
					t.Stats.Updated.Add(1)
				}
			}
			x.retry = o == presence.Failed
			x.h, x.more = presence.Applied(x.h, x.w.Conn, x.wr, o, epochs[k])
		}
	}
	retry := grown(sc.retry, len(ss))[:len(ss)]
	sc.retry = retry[:0] // the caller reads it before the next sync
	for i := range ss {
		ss[i].s.finish(t, ss[i].h)
		retry[i] = ss[i].retry
	}
	return retry
}

// ended counts an end written, by reason.
func (t *Tracker) ended(r presence.EndReason) {
	t.Stats.Ended.Add(1)
	t.Stats.EndedBy[r.Index()].Add(1)
}

func opName(k presence.WriteKind) string {
	switch k {
	case presence.WriteOpen:
		return "open"
	case presence.WriteEnd:
		return "end"
	}
	return "update"
}

// write makes writes of distinct sessions: in one round trip when the store
// is a Batcher and there is more than one, else one by one.
func (t *Tracker) write(ws []presence.Write, sc *scratch) ([]uint64, []error) {
	ctx := context.Background()
	if t.batch != nil && len(ws) > 1 {
		t.Stats.Batches.Add(1)
		t.Stats.Batched.Add(int64(len(ws)))
		defer t.observe(OpBatch, time.Now())
		return t.batch.Batch(ctx, ws)
	}
	epochs := grown(sc.epochs, len(ws))[:len(ws)]
	errs := grown(sc.errs, len(ws))[:len(ws)]
	clear(epochs)
	clear(errs)
	sc.epochs, sc.errs = epochs[:0], errs[:0] // read by the caller before the next write
	for i, wr := range ws {
		start := time.Now()
		switch wr.Kind {
		case presence.WriteEnd:
			errs[i] = t.store.End(ctx, wr.End)
			t.observe(OpEnd, start)
		case presence.WriteOpen:
			var sess presence.Session
			sess, errs[i] = t.store.Open(ctx, wr.Open)
			epochs[i] = sess.Epoch
			t.observe(OpOpen, start)
		case presence.WriteUpdate:
			errs[i] = t.store.Update(ctx, wr.Ref, wr.Update)
			t.observe(OpUpdate, start)
		}
	}
	return epochs, errs
}

// finish records what the store was told, and drops the slot once its
// connection has ended and nothing is left to write.
func (s *slot) finish(t *Tracker, h presence.Written) {
	s.mu.Lock()
	s.setWritten(h)
	done := presence.Finished(s.wanted(), h) && !s.queued
	s.mu.Unlock()
	if done {
		t.mu.Lock()
		s.mu.Lock()
		if presence.Finished(s.wanted(), s.written()) && !s.queued && t.slots[s.key] == s {
			delete(t.slots, s.key)
		}
		s.mu.Unlock()
		t.mu.Unlock()
	}
}

func (a *acct) sync(t *Tracker) bool {
	a.mu.Lock()
	upd := a.pending
	a.pending = presence.AccountUpdate{}
	a.queued = false
	a.mu.Unlock()
	if upd == (presence.AccountUpdate{}) {
		return false
	}
	start := time.Now()
	err := t.store.SetAccount(context.Background(), a.user, upd)
	t.observe(OpAccount, start)
	switch t.outcome("account", a.user, err) {
	case presence.Done:
		t.Stats.Updated.Add(1)
	case presence.Failed:
		a.mu.Lock() // put the update back under any newer one
		a.pending = mergeAccount(a.pending, upd)
		a.mu.Unlock()
		return true
	}
	return false
}

// Renew renews the store-side expiry of every session this node holds, in
// one bulk call, and opens again any that the store no longer has.
func (t *Tracker) Renew(ctx context.Context) error {
	all := t.allSlots()
	refs := make([]presence.SessionRef, 0, len(all))
	byID := make(map[string]*slot, len(all))
	for _, s := range all {
		s.mu.Lock()
		if s.open {
			refs = append(refs, presence.SessionRef{User: s.have.user, ID: s.clientID(), Epoch: s.have.epoch})
			byID[s.key] = s
		}
		s.mu.Unlock()
	}
	start := time.Now()
	stale, err := t.store.Renew(ctx, refs, t.plan.TTL)
	t.observe(OpRenew, start)
	if err != nil {
		return err
	}
	for _, r := range stale {
		s := byID[presence.ClientKey(r.User, r.ID)]
		if s == nil {
			s = byID[r.ID] // a bare id (a tracker used without the hook)
		}
		s.mu.Lock()
		lost := s.open && s.have.epoch == r.Epoch
		if lost {
			s.open = false
		}
		s.mu.Unlock()
		if lost {
			t.Stats.Lost.Add(1)
			t.log.Warn("store no longer had a live session; opening it again", "user", r.User, "session", r.ID, "epoch", r.Epoch)
			t.enqueue(s)
		}
	}
	return nil
}

// Reassert has every session this node holds opened again (with new
// epochs): the store lost them (Redis restarted empty, or this node was cut
// off and swept). Ends still pending for dead connections are dropped with
// them: there is nothing left to end.
func (t *Tracker) Reassert() { t.reassert(nil) }

// ReassertUsers is Reassert for the sessions of users only: the store lost
// some of their latest writes (a replica promoted before it had them).
// Each is opened again with a new epoch, taking the old one over in the
// same step, so its user is never shown offline.
func (t *Tracker) ReassertUsers(users map[string]struct{}) { t.reassert(users) }

// allSlots returns every slot tracked now.
func (t *Tracker) allSlots() []*slot {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := make([]*slot, 0, len(t.slots))
	for _, s := range t.slots {
		all = append(all, s)
	}
	return all
}

func (t *Tracker) reassert(users map[string]struct{}) {
	all := t.allSlots()
	for _, s := range all {
		s.mu.Lock()
		_, mine := users[s.want.user]
		if users == nil || mine {
			s.open = false
		}
		s.mu.Unlock()
		if users == nil || mine {
			t.enqueue(s)
		}
	}
}

// slotOf returns the slot of user's session id, or nil. t.mu is held.
func (t *Tracker) slotOf(user, id string) *slot {
	if s := t.slots[presence.ClientKey(user, id)]; s != nil {
		return s
	}
	if s := t.slots[id]; s != nil && s.key == s.clientID() { // a bare id (a tracker used without the hook)
		return s
	}
	return nil
}

// Ghosts returns those of refs, live sessions the store holds for this
// node, that this node does not hold: no connection has the session's id
// any more, or its connection ended and the end was written, and no write of
// it is under way or waiting to be tried again. They are sessions whose end
// the store lost (a Redis replica promoted without it), and ending them,
// epoch-checked, is safe. A session whose connection is live is never one:
// if the store holds it at an epoch this node does not know, an open of it
// is on its way or will be tried again, and takes the old epoch over.
func (t *Tracker) Ghosts(refs []presence.SessionRef) []presence.SessionRef {
	var out []presence.SessionRef
	for _, r := range refs {
		t.mu.Lock()
		s := t.slotOf(r.User, r.ID)
		t.mu.Unlock()
		if s == nil {
			out = append(out, r)
			continue
		}
		s.mu.Lock()
		// A write under way is of a live connection (an open, or an
		// update) or was queued again by the change that ended it.
		held := s.queued || s.live || (s.open && s.have.epoch == r.Epoch)
		s.mu.Unlock()
		if !held {
			out = append(out, r)
		}
	}
	return out
}

// Users returns the users of the sessions this node holds open.
func (t *Tracker) Users() map[string]struct{} {
	all := t.allSlots()
	users := make(map[string]struct{})
	for _, s := range all {
		s.mu.Lock()
		if s.open {
			users[s.have.user] = struct{}{}
		}
		s.mu.Unlock()
	}
	return users
}
