package redistest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// failoverPoll is the pause between two polls of a failover wait: short, so
// that the time a wait returns is within a few tens of milliseconds of the
// change, and long enough not to load a busy machine.
const failoverPoll = 25 * time.Millisecond

// WaitPromoted waits, after dead was killed (Kill), until one of dead's
// former replicas is a master that owns all of dead's former slots in the
// CLUSTER NODES of every running node, and every running node reports
// cluster_state:ok. It returns that new master and the time at which the
// poll first saw all this (polls run every 25 ms, each over connections kept
// open for the wait). It logs how long after the kill the replica first
// called itself master and the survivors agreed.
//
// What dead was comes from Kill (or Stop), which asked it just before the
// kill; if it did not answer then, from the survivors, as long as the
// failover has not happened yet. It fails the test
// when dead still runs, was not a master with slots, has no running former
// replica, or when the promotion is not seen within within.
func (c *Cluster) WaitPromoted(t testing.TB, dead *Server, within time.Duration) (*Server, time.Time) {
	t.Helper()
	if dead.running() {
		t.Fatalf("redistest: WaitPromoted: %s still runs: Kill it first", dead.Addr())
	}
	rec, err := c.recordOf(dead)
	if err != nil {
		t.Fatalf("redistest: WaitPromoted: %s: %v", dead.Addr(), err)
	}
	h := handover{from: dead, slots: rec.slots, to: map[string]*Server{}}
	var names []string
	for _, id := range rec.replicas {
		if r := c.byNodeID(id); r != nil && r.running() {
			h.to[id] = r
			names = append(names, r.Addr())
		}
	}
	if len(h.to) == 0 {
		t.Fatalf("redistest: WaitPromoted: %s had no running replica (its replicas: %v)", dead.Addr(), rec.replicas)
	}
	newMaster, at, selfAt, err := c.waitHandover(h, time.Now().Add(within))
	if err != nil {
		t.Fatalf("redistest: WaitPromoted: no replica of %s (%s) took over its slots %v within %v: %v%s",
			dead.Addr(), strings.Join(names, ", "), rec.slots, within, err, c.tails())
	}
	dead.mu.Lock()
	killedAt := dead.killedAt
	dead.mu.Unlock()
	if !killedAt.IsZero() {
		t.Logf("redistest: %s killed; %s called itself master after %v, every survivor agreed and was ok after %v",
			dead.Addr(), newMaster.Addr(), selfAt.Sub(killedAt).Round(time.Millisecond), at.Sub(killedAt).Round(time.Millisecond))
	}
	return newMaster, at
}

// FailoverTakeover has replica take over from its master at once: CLUSTER
// FAILOVER TAKEOVER, which neither waits for the master nor asks the other
// masters. It returns the master it replaces; WaitTakeover waits until the
// takeover is complete. It fails the test when replica does not run, is not
// a replica of a master with slots, or refuses.
func (c *Cluster) FailoverTakeover(t testing.TB, replica *Server) (former *Server) {
	t.Helper()
	out, err := query(replica.Addr(), []string{"CLUSTER", "NODES"})
	if err != nil {
		t.Fatalf("redistest: FailoverTakeover: %s: %v", replica.Addr(), err)
	}
	view, err := parseClusterNodes(out)
	if err != nil {
		t.Fatalf("redistest: FailoverTakeover: %s: %v", replica.Addr(), err)
	}
	me, _ := myself(view)
	m, ok := byID(view, me.master)
	if !me.has("slave") || !ok || len(m.slots) == 0 {
		t.Fatalf("redistest: FailoverTakeover: %s is not the replica of a master with slots:\n%s", replica.Addr(), out)
	}
	former = c.byNodeID(m.id)
	if former == nil {
		t.Fatalf("redistest: FailoverTakeover: %s follows %s, not a node of this cluster", replica.Addr(), m.addr)
	}
	c.mu.Lock()
	if c.takeovers == nil {
		c.takeovers = map[*Server]handover{}
	}
	c.takeovers[replica] = handover{from: former, slots: m.slots, to: map[string]*Server{me.id: replica}, demote: true}
	c.mu.Unlock()
	if _, err := query(replica.Addr(), []string{"CLUSTER", "FAILOVER", "TAKEOVER"}); err != nil {
		t.Fatalf("redistest: FailoverTakeover: %s: %v", replica.Addr(), err)
	}
	return former
}

// WaitTakeover waits until the takeover FailoverTakeover started on replica
// is complete: in the CLUSTER NODES of every running node, replica is a
// master owning all of its former master's slots, the former master (if it
// runs) calls itself a replica, and every running node reports
// cluster_state:ok. It returns the time the poll first saw all this (polls
// every 25 ms), and fails the test after within.
func (c *Cluster) WaitTakeover(t testing.TB, replica *Server, within time.Duration) time.Time {
	t.Helper()
	c.mu.Lock()
	h, ok := c.takeovers[replica]
	delete(c.takeovers, replica)
	c.mu.Unlock()
	if !ok {
		t.Fatalf("redistest: WaitTakeover: no FailoverTakeover of %s to wait for", replica.Addr())
	}
	_, at, _, err := c.waitHandover(h, time.Now().Add(within))
	if err != nil {
		t.Fatalf("redistest: WaitTakeover: %s did not take over %s's slots %v within %v: %v%s",
			replica.Addr(), h.from.Addr(), h.slots, within, err, c.tails())
	}
	return at
}

// handover is a change of master to wait for: one of to takes over slots
// from from.
type handover struct {
	from   *Server
	slots  []slotRange
	to     map[string]*Server // the candidates, by node id
	demote bool               // from, if it runs, must call itself a replica
}

// waitHandover polls until h is done as handedOver sees it, and returns the
// new master, when that was first seen, and when the new master first called
// itself one.
func (c *Cluster) waitHandover(h handover, deadline time.Time) (newMaster *Server, at, selfAt time.Time, err error) {
	err = pollUntil(deadline, func(cs conns) error {
		var e error
		newMaster, e = c.handedOver(cs, h, &selfAt)
		return e
	})
	return newMaster, time.Now(), selfAt, err
}

// handedOver checks h once on every running node, and sets *selfAt when a
// candidate first calls itself a master.
func (c *Cluster) handedOver(cs conns, h handover, selfAt *time.Time) (*Server, error) {
	agreed := ""
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		view, err := cs.nodes(n.Addr())
		if err != nil {
			return nil, err
		}
		me, _ := myself(view)
		if h.to[me.id] != nil && me.has("master") && selfAt.IsZero() {
			*selfAt = time.Now()
		}
		owner := ""
		for _, o := range view {
			if h.to[o.id] != nil && o.has("master") && !o.has("fail") && covers(o.slots, h.slots) {
				owner = o.id
			}
		}
		if owner == "" {
			return nil, fmt.Errorf("%s does not see a new owner of the slots yet", n.Addr())
		}
		if agreed != "" && owner != agreed {
			return nil, fmt.Errorf("the nodes disagree on the new owner: %s and %s", agreed, owner)
		}
		agreed = owner
		if h.demote && n == h.from && (!me.has("slave") || me.master != owner) {
			return nil, fmt.Errorf("%s does not call itself a replica of %s yet", n.Addr(), h.to[owner].Addr())
		}
		info, err := cs.clusterInfo(n.Addr())
		if err != nil {
			return nil, err
		}
		if info["cluster_state"] != "ok" {
			return nil, fmt.Errorf("%s: cluster_state is %q", n.Addr(), info["cluster_state"])
		}
	}
	if agreed == "" {
		return nil, fmt.Errorf("no node runs")
	}
	return h.to[agreed], nil
}

// recordOf is what dead was before it died: Kill's record, else what the
// running nodes still say of it.
func (c *Cluster) recordOf(dead *Server) (*nodeRecord, error) {
	dead.mu.Lock()
	rec, id := dead.before, dead.nodeID
	dead.mu.Unlock()
	if rec != nil {
		if !rec.master || len(rec.slots) == 0 {
			return nil, fmt.Errorf("was not a master with slots when killed")
		}
		return rec, nil
	}
	if id == "" {
		return nil, fmt.Errorf("its node id is unknown")
	}
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		out, err := query(n.Addr(), []string{"CLUSTER", "NODES"})
		if err != nil {
			continue
		}
		view, err := parseClusterNodes(out)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", n.Addr(), err)
		}
		d, ok := byID(view, id)
		if !ok || !d.has("master") || len(d.slots) == 0 {
			return nil, fmt.Errorf("%s does not see it as a master with slots (failed over already?)", n.Addr())
		}
		rec := &nodeRecord{id: id, master: true, slots: d.slots}
		for _, o := range view {
			if o.master == id {
				rec.replicas = append(rec.replicas, o.id)
			}
		}
		return rec, nil
	}
	return nil, fmt.Errorf("no running node answers")
}

// poll runs check every pollInterval until it returns nil or the deadline
// passes, over connections kept for the wait.
func (c *Cluster) poll(deadline time.Time, check func(conns) error) error {
	return pollEvery(pollInterval, deadline, check)
}

// pollUntil runs check every failoverPoll until it returns nil or the
// deadline passes, and returns check's last error then.
func pollUntil(deadline time.Time, check func(conns) error) error {
	return pollEvery(failoverPoll, deadline, check)
}

func pollEvery(every time.Duration, deadline time.Time, check func(conns) error) error {
	cs := conns{}
	defer cs.close()
	for {
		err := check(cs)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(every)
	}
}

// conns keeps one RESP connection per address for the polls of one wait, so
// that polling every few milliseconds does not open a connection per
// command. A connection that fails is closed, and dialled again next time.
type conns map[string]*respConn

// do runs one command on addr's connection, with a deadline of a second.
func (cs conns) do(addr string, args ...string) (any, error) {
	rc := cs[addr]
	if rc == nil {
		var err error
		if rc, err = dialRESP(addr); err != nil {
			return nil, fmt.Errorf("%s: %v", addr, err)
		}
		cs[addr] = rc
	}
	_ = rc.c.SetDeadline(time.Now().Add(time.Second))
	v, err := rc.do(args...)
	if err != nil {
		_ = rc.Close()
		delete(cs, addr)
		return nil, fmt.Errorf("%s: %s: %v", addr, args[0], err)
	}
	return v, nil
}

// str runs a command whose reply is a string.
func (cs conns) str(addr string, args ...string) (string, error) {
	v, err := cs.do(addr, args...)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: %s: unexpected reply %v", addr, args[0], v)
	}
	return s, nil
}

// info runs INFO section.
func (cs conns) info(addr, section string) (map[string]string, error) {
	s, err := cs.str(addr, "INFO", section)
	if err != nil {
		return nil, err
	}
	return parseInfo(s), nil
}

// clusterInfo runs CLUSTER INFO.
func (cs conns) clusterInfo(addr string) (map[string]string, error) {
	s, err := cs.str(addr, "CLUSTER", "INFO")
	if err != nil {
		return nil, err
	}
	return parseInfo(s), nil
}

// nodes runs CLUSTER NODES.
func (cs conns) nodes(addr string) ([]clusterNode, error) {
	s, err := cs.str(addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	v, err := parseClusterNodes(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", addr, err)
	}
	return v, nil
}

func (cs conns) close() {
	for addr, rc := range cs {
		_ = rc.Close()
		delete(cs, addr)
	}
}
