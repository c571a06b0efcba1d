package main

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const topicPrefix = "presence/users/"

// Gen identifies the connection generation a state shows for one session
// (client id): presenced's session epoch, or the bench's connection serial
// that the mosquitto payload carries. Generations increase with connection
// order for one client id.
type Gen struct {
	ID  string
	Gen uint64
}

// Obs is one presence state an observer received.
type Obs struct {
	At      time.Duration // monotonic receive time
	Online  bool          // status other than offline
	Status  string
	Text    string // the tag of the status change it reflects
	Version uint64 // presenced only; 0 for mosquitto
	Gens    []Gen
	Nodes   []string // presenced only: the node of each session, as Gens
	Hash    uint64   // of the payload: an identical redelivery is not a change
}

// parser turns a retained presence payload into an Obs.
type parser func(user string, payload []byte) (Obs, bool)

// parsePresenced reads presenced's JSON aggregate.
func parsePresenced(user string, payload []byte) (Obs, bool) {
	var v struct {
		Status   string `json:"status"`
		Text     string `json:"text"`
		Version  uint64 `json:"version"`
		Sessions []struct {
			ID    string `json:"id"`
			Epoch uint64 `json:"epoch"`
			Node  string `json:"node"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(payload, &v); err != nil || v.Status == "" {
		return Obs{}, false
	}
	o := Obs{Online: v.Status != "offline", Status: v.Status, Text: v.Text, Version: v.Version}
	for _, s := range v.Sessions {
		o.Gens = append(o.Gens, Gen{ID: s.ID, Gen: s.Epoch})
		o.Nodes = append(o.Nodes, s.Node)
	}
	return o, true
}

// Mosquitto payloads, written by the bench's devices:
//
//	online|<client id>#<serial>            after CONNACK
//	offline|<client id>#<serial>           the will, or before a clean DISCONNECT
//	<status>|<client id>#<serial>|<tag>    a status change
func lwPayload(status, clientID string, serial uint64, tag string) []byte {
	s := status + "|" + clientID + "#" + strconv.FormatUint(serial, 10)
	if tag != "" {
		s += "|" + tag
	}
	return []byte(s)
}

func parseLastWill(user string, payload []byte) (Obs, bool) {
	parts := strings.SplitN(string(payload), "|", 3)
	if len(parts) < 2 {
		return Obs{}, false
	}
	o := Obs{Status: parts[0], Online: parts[0] != "offline"}
	if len(parts) == 3 {
		o.Text = parts[2]
	}
	i := strings.LastIndexByte(parts[1], '#')
	if i < 0 {
		return Obs{}, false
	}
	serial, err := strconv.ParseUint(parts[1][i+1:], 10, 64)
	if err != nil {
		return Obs{}, false
	}
	o.Gens = []Gen{{ID: parts[1][:i], Gen: serial}}
	return o, true
}

func payloadHash(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

// observer records every presence state it receives, per user, with its
// receive time. Its client may be replaced (a reconnect after a broker
// restart); the timeline goes on. The reader goroutine only stores the raw
// message; payloads are parsed when the timeline is read, so that a slow
// parse never slows the reading of the socket.
type observer struct {
	parse  parser
	filter string
	batch  time.Duration // the group topic's batch window, for a group watcher (see ObserverView)
	msgs   atomic.Int64  // every PUBLISH received
	bytes  atomic.Int64  // their payload bytes
	bad    atomic.Int64  // payloads that did not parse

	mu     sync.Mutex
	raw    []rawMsg
	tl     map[string][]Obs
	groups []groupMsg // presence/groups/{group} messages, in receive order
	c      *client
	since  time.Duration          // when it first subscribed
	cover  func(user string) bool // when set, which users it covers (else from filter)
	first  string                 // the first message's topic and payload, for errors
}

type rawMsg struct {
	topic   string
	payload []byte
	at      time.Duration
}

func newObserver(p parser) *observer {
	return &observer{parse: p, tl: make(map[string][]Obs)}
}

func (o *observer) onPublish(topic string, payload []byte, at time.Duration) {
	o.msgs.Add(1)
	o.bytes.Add(int64(len(payload)))
	o.mu.Lock()
	if o.first == "" {
		o.first = topic + " " + string(payload[:min(len(payload), 200)])
	}
	o.raw = append(o.raw, rawMsg{topic, payload, at})
	o.mu.Unlock()
}

// flush parses what was received since the last flush; o.mu is held.
func (o *observer) flush() {
	for _, m := range o.raw {
		if strings.HasPrefix(m.topic, groupTopicPrefix) {
			o.flushGroup(m)
			continue
		}
		user, ok := strings.CutPrefix(m.topic, topicPrefix)
		if !ok {
			continue
		}
		ob, ok := o.parse(user, m.payload)
		if !ok {
			o.bad.Add(1)
			continue
		}
		ob.At = m.at
		ob.Hash = payloadHash(m.payload)
		o.tl[user] = append(o.tl[user], ob)
	}
	o.raw = o.raw[:0]
}

// covers tells whether the observer's subscription includes user.
func (o *observer) covers(user string) bool {
	if o.cover != nil {
		return o.cover(user)
	}
	return o.filter == topicPrefix+"+" || o.filter == topicPrefix+user
}

// connect connects the observer and subscribes it to filter.
func (o *observer) connect(addr, clientID, filter string, timeout time.Duration, readBuf int) error {
	_, err := o.connectFilters(addr, clientID, []string{filter}, timeout, readBuf)
	return err
}

// connectFilters connects the observer and subscribes it to every filter
// in one SUBSCRIBE; the observer's filter is the first one (set cover for
// the others). It returns the client.
func (o *observer) connectFilters(addr, clientID string, filters []string, timeout time.Duration, readBuf int) (*client, error) {
	c, err := connect(addr, connectOpts{ClientID: clientID, Keepalive: 60, ReadBuffer: readBuf, OnPublish: o.onPublish}, timeout)
	if err != nil {
		return nil, err
	}
	if err := c.Subscribe(timeout, filters...); err != nil {
		c.Close()
		return nil, err
	}
	o.mu.Lock()
	o.c = c
	if o.filter == "" {
		o.filter, o.since = filters[0], c.ConnackAt
	}
	o.mu.Unlock()
	go keepAlive(c, 20*time.Second)
	return c, nil
}

// keepAlive pings c every interval until it closes.
func keepAlive(c *client, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.Done():
			return
		case <-t.C:
			if c.Ping() != nil {
				return
			}
		}
	}
}

func (o *observer) close() {
	o.mu.Lock()
	c := o.c
	o.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// timeline returns a copy of what was received, per user.
func (o *observer) timeline() Timeline {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flush()
	t := make(Timeline, len(o.tl))
	for u, obs := range o.tl {
		t[u] = append([]Obs(nil), obs...)
	}
	return t
}

// count returns how many of users satisfy ok in the observer's latest
// accepted state (see shown).
func (o *observer) count(users []string, ok func(user string, ob Obs) bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flush()
	n := 0
	for _, u := range users {
		if ob, has := latestAccepted(o.tl[u]); has && ok(u, ob) {
			n++
		}
	}
	return n
}

// state describes the observer's connection, for notes.
func (o *observer) state() string {
	o.mu.Lock()
	c := o.c
	o.mu.Unlock()
	st := "connected"
	if c == nil {
		st = "not connected"
	} else if err := c.Err(); err != nil {
		st = "disconnected: " + err.Error()
	}
	return fmt.Sprintf("%d messages received, %s", o.msgs.Load(), st)
}

// view is what evaluate needs of the observer.
func (o *observer) view() ObserverView {
	tl := o.timeline()
	o.mu.Lock()
	defer o.mu.Unlock()
	return ObserverView{TL: tl, Since: o.since, Covers: o.covers, Batch: o.batch}
}

// latestAccepted is the state an observer following the contract shows: the
// last message, skipping any whose version is not above the highest seen.
func latestAccepted(obs []Obs) (Obs, bool) {
	var best Obs
	var has bool
	var maxV uint64
	for _, ob := range obs {
		if ob.Version != 0 {
			if ob.Version <= maxV {
				continue
			}
			maxV = ob.Version
		}
		best, has = ob, true
	}
	return best, has
}

// convergeAt replays the timeline of users in receive order and returns the
// first time at or after from when every user's shown state satisfies ok.
func convergeAt(tl Timeline, users []string, from time.Duration, ok func(user string, ob Obs) bool) (time.Duration, bool) {
	type ev struct {
		user string
		ob   Obs
	}
	var evs []ev
	for _, u := range users {
		for _, ob := range accepted(tl[u]) {
			evs = append(evs, ev{u, ob})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].ob.At < evs[j].ob.At })
	sat := make(map[string]bool, len(users))
	n := 0
	for _, e := range evs {
		now := ok(e.user, e.ob)
		if now != sat[e.user] {
			if now {
				n++
			} else {
				n--
			}
			sat[e.user] = now
		}
		if n == len(users) && e.ob.At >= from {
			return e.ob.At, true
		}
	}
	return 0, false
}

// accepted filters obs to those an observer following the contract keeps.
func accepted(obs []Obs) []Obs {
	out := make([]Obs, 0, len(obs))
	var maxV uint64
	for _, ob := range obs {
		if ob.Version != 0 {
			if ob.Version <= maxV {
				continue
			}
			maxV = ob.Version
		}
		out = append(out, ob)
	}
	return out
}
