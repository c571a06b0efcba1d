package groups

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
	"github.com/presenced/presenced/store"
)

// Store is what the stage needs of the store: the groups, the group log
// and the claims, and to hear the batches of the groups watched here.
type Store interface {
	store.Groups
	store.GroupLog
	store.Claims
	ListenGroups(ctx context.Context, groups []string) error
	UnlistenGroups(ctx context.Context, groups []string) error
}

// Presence is presence as published (the publisher): what observers are
// shown of a user, as values.
type Presence interface {
	Current(user string) (presence.Shown, bool)
}

// Outlet is how the stage reaches the subscribers of the group topics (the
// delivery stage).
type Outlet interface {
	// Step runs fn inside the delivery's fence, exclusively, as one step
	// against every subscription's reading of the retained messages. The
	// stage takes topicMu inside it: the fence comes first, since a
	// SUBSCRIBE holds it for reading while the hooks (Watch) take topicMu.
	Step(fn func(t Topics))
}

// Topics is the Outlet inside one step of the fence.
type Topics interface {
	// Advance stores snapshot as topic's retained message and publishes
	// live on topic (QoS 1, not retained), with no subscription's reading
	// of the retained messages between the two. With to set, the live
	// message is for those of to that subscribed before and so missed the
	// retained one, only.
	Advance(topic string, to []*mqtt.Client, snapshot, live []byte) error
	// Retain stores payload as topic's retained message again, delivering
	// nothing; Clear removes it.
	Retain(topic string, payload []byte)
	Clear(topic string)
	// Send publishes payload live on topic (QoS 1, not retained) with the
	// MQTT 5 properties props (none when zero) for the subscribers in to
	// only, retaining nothing (a resume's reply).
	Send(topic string, to []*mqtt.Client, payload []byte, props packets.Properties) error
}

// Visibility is who reads a group's topic, and its members' presence.
type Visibility int

// The visibilities (presence.visibility).
const (
	Open     Visibility = iota // everyone
	Private                    // service accounts only
	ByGroups                   // the group's members, and service accounts
)

// Options configure the stage.
type Options struct {
	Prefix     string        // the topic prefix, e.g. "presence"
	Visibility Visibility    // presence.visibility
	Window     time.Duration // at most one delta per group per window (presence.group_batch)
	File       string        // presence.groups_file; empty: none
	Now        func() time.Time
	Log        *slog.Logger
	Store      Store
	Presence   Presence
	Outlet     Outlet
	// Viewer says who reads through a connection: its user ("" for an
	// observer) and whether it is a service account (the presence hook).
	Viewer func(cl *mqtt.Client) (user string, service bool)
	// Introduce sends user's current presence, on this node, to the
	// subscriptions to it of the viewers for whom may holds (under
	// visibility ByGroups: the mates who may read it from now on). It is
	// called on the pump's goroutine (Joined).
	Introduce func(user string, may func(viewer string) bool)
	// Lead is told the members of every group while this node leads the
	// group topics (the leader needs their presence: the interest stage
	// shows them), and nil when it stops leading; nil: not told.
	Lead func(members []string)
	// Resume bounds this node's log of the batches it applied, per group,
	// from which a subscriber coming back with the version it holds is
	// sent what it missed (presence.group_resume_*); zero: no log, every
	// resume gets the snapshot.
	Resume roster.LogLimits
	// Addressed: what Topics.Send sends reaches the subscribers in its to
	// only (the server has the delivery's Guard, WithACL). Without it a
	// resume's reply reaches every subscriber of the group on the node,
	// so it is never compressed (EncodingProperty): a subscriber that did
	// not ask would get DEFLATE.
	Addressed bool
}

// Stage is the groups stage (see the package doc).
type Stage struct {
	o      Options
	topics string // prefix/groups/

	index  *roster.Index  // who belongs to which group
	board  *roster.Board  // the leader's: every group, cut into batches
	mirror *roster.Mirror // the group topics as published, for those watched here

	topicMu sync.Mutex                           // a group's snapshot retained, then its delta published
	waiting map[string]map[*mqtt.Client]struct{} // subscriptions to a group watched at version 0, under topicMu
	resumes map[string]map[*mqtt.Client]resumeAt // resumes to serve: group -> subscriber -> version held (and encoding), under topicMu
	dlog    *roster.DeltaLog                     // the batches applied here, per group (resume)

	resumeWake chan struct{}
	// Resumes are the resumes' counts.
	Resumes ResumeStats
	joins   chan []roster.Change // membership changes, for the pump

	readMu   sync.Mutex          // guards dirty, resyncs and listens
	dirty    map[string]struct{} // groups to read again ("": all)
	resyncs  map[string]struct{} // watched groups to read again from the log
	listens  map[string]bool     // groups to hear (true) or no longer (false) here
	readWake chan struct{}

	fileMu     sync.Mutex          // guards fileGroups
	fileGroups map[string]struct{} // the groups last written from the file

	claimsMu    sync.Mutex          // guards claimsDirty and claimsHeld
	claimsDirty map[string][]string // claims to write, per user
	claimsHeld  map[string][]string // claims not yet known written, per user: laid over what is read from the store
	claimsWake  chan struct{}
	// applyMu is held by a read of groups from the store until it is
	// applied, and by the claims writer to let go of a written claim: a
	// read that began before a claim was written cannot then drop the
	// member the claim added. Lock order: applyMu, then claimsMu.
	applyMu sync.Mutex

	leading atomic.Bool  // this node leads the group topics
	looks   atomic.Int64 // the leader loop's looks (wake-ups), for its test

	stop chan struct{}
	wg   sync.WaitGroup
}

// New returns the stage; Load then Start it.
func New(o Options) *Stage {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Stage{
		o: o, topics: o.Prefix + "/groups/",
		index:   roster.NewIndex(),
		mirror:  roster.NewMirror(),
		waiting: make(map[string]map[*mqtt.Client]struct{}),
		resumes: make(map[string]map[*mqtt.Client]resumeAt), dlog: roster.NewDeltaLog(o.Resume, o.Now), resumeWake: make(chan struct{}, 1),
		joins: make(chan []roster.Change, 16),
		dirty: make(map[string]struct{}), resyncs: make(map[string]struct{}), listens: make(map[string]bool), readWake: make(chan struct{}, 1),
		claimsDirty: make(map[string][]string), claimsHeld: make(map[string][]string), claimsWake: make(chan struct{}, 1),
		stop: make(chan struct{}),
	}
	s.board = roster.NewBoard(s.index, o.Window, o.Now, o.Presence.Current)
	return s
}

// Load writes the groups file to the store (if any) and reads every group
// into the roster: before Start, so that the first connections find their
// groups.
func (s *Stage) Load(ctx context.Context) error {
	if s.dlog.On() {
		s.o.Store.KeepBatches(s.o.Resume.MaxDeltas) // read back by a node that begins to watch a group
	}
	if s.o.File != "" {
		file, err := roster.LoadFile(s.o.File)
		if err != nil {
			return fmt.Errorf("presence.groups_file: %w", err)
		}
		if err := s.SetGroups(ctx, file); err != nil {
			return err
		}
	}
	groups, err := s.o.Store.AllGroups(ctx)
	if err != nil {
		return fmt.Errorf("initial load of the groups: %w", err)
	}
	s.index.Replace(groups)
	return nil
}

// Start starts the reader, the claims writer, the resume worker and the
// leader loop.
func (s *Stage) Start() {
	s.wg.Add(4)
	go s.worker(s.readWake, s.readChanged)
	go s.worker(s.resumeWake, s.serveAllResumes)
	go s.worker(s.claimsWake, s.writeDirtyClaims)
	go s.leadLoop()
}

// Stop stops the goroutines and waits for them.
func (s *Stage) Stop() {
	close(s.stop)
	s.wg.Wait()
}

// wake wakes a worker without waiting.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// worker runs work each time it is woken, and a second after a run that
// failed, until Stop.
func (s *Stage) worker(woken <-chan struct{}, work func() error) {
	defer s.wg.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-woken:
		case <-retry.C:
		}
		if work() != nil {
			retry.Reset(time.Second)
		}
	}
}

// Store is where the groups are kept: the admin API writes through it,
// and every node follows.
func (s *Stage) Store() store.Groups { return s.o.Store }

// Has reports whether group exists.
func (s *Stage) Has(group string) bool { return s.index.Has(group) }

// Member reports whether user belongs to group.
func (s *Stage) Member(group, user string) bool { return s.index.Member(group, user) }

// GroupsOf returns the groups of user.
func (s *Stage) GroupsOf(user string) []string { return s.index.GroupsOf(user) }

// Watched reports whether group's topic is kept on this node.
func (s *Stage) Watched(group string) bool {
	_, ok := s.mirror.Version(group)
	return ok
}

// Sizes returns every group's name and size.
func (s *Stage) Sizes() map[string]int {
	out := make(map[string]int)
	for _, g := range s.index.Groups() {
		out[g] = s.index.Size(g)
	}
	return out
}

// SeesUser is the Guard's rule for presence/users/{user} under the
// visibility; nil: everyone's.
func (s *Stage) SeesUser() func(viewer, user string) bool {
	switch s.o.Visibility {
	case Private:
		return func(string, string) bool { return false }
	case ByGroups:
		return s.index.Mates
	}
	return nil
}

// SeesGroup is the Guard's rule for presence/groups/{group}; nil: every
// group's.
func (s *Stage) SeesGroup() func(viewer, group string) bool {
	switch s.o.Visibility {
	case Private:
		return func(string, string) bool { return false }
	case ByGroups:
		return func(viewer, group string) bool { return s.index.Member(group, viewer) }
	}
	return nil
}

// Note records a member's newly published presence on the leader's board
// (the publisher's Published).
func (s *Stage) Note(a presence.Aggregate) { s.board.Note(a) }

// Repair checks the board's occupancy counts, kept incrementally, against
// the members, and reports how many groups were wrong (the pump, now and
// then).
func (s *Stage) Repair() int { return s.board.Repair() }

// Joins delivers membership changes to the pump, which hands them to
// Joined.
func (s *Stage) Joins() <-chan []roster.Change { return s.joins }

// Mates returns the users who share a group with user (user not included).
func (s *Stage) Mates(user string) []string {
	seen := make(map[string]struct{})
	var out []string
	for _, g := range s.index.GroupsOf(user) {
		members, _ := s.index.Members(g)
		for _, m := range members {
			if _, ok := seen[m]; !ok && m != user {
				seen[m] = struct{}{}
				out = append(out, m)
			}
		}
	}
	return out
}
