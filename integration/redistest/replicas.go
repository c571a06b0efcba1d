package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// replicaClusterArgs configure the nodes of StartClusterWithReplicas for a
// prompt and dependable failover on a loaded machine:
//   - a node is failed 2 s after it stops answering (cluster-node-timeout);
//   - a replica may always be promoted, however long ago it last heard from
//     its master (cluster-replica-validity-factor 0);
//   - replicas stay with the master they were given, so the topology is the
//     one the test asked for (cluster-allow-replica-migration no);
//   - a replica syncs at once, without a fork writing an RDB file to disk or
//     the 5 s wait for other replicas (repl-diskless-sync-delay 0).
var replicaClusterArgs = []string{
	"--cluster-enabled", "yes",
	"--cluster-config-file", "nodes.conf",
	"--cluster-node-timeout", "2000",
	"--cluster-announce-ip", "127.0.0.1",
	"--cluster-replica-validity-factor", "0",
	"--cluster-allow-replica-migration", "no",
	"--repl-diskless-sync", "yes",
	"--repl-diskless-sync-delay", "0",
}

// StartClusterWithReplicas starts a Redis Cluster of masters (at least 3)
// masters with replicasPerMaster replicas each, every node on a random port
// whose bus port (port+10000) is also free, with no persistence. The slots
// are spread evenly over the masters, in start order, and each replica
// follows its master. The nodes run with cluster-node-timeout 2000 and
// cluster-replica-validity-factor 0, so a replica takes over about 3 s after
// its master dies (see replicaClusterArgs).
//
// It builds the cluster itself, without redis-cli: config epochs, slots,
// CLUSTER MEET, CLUSTER REPLICATE. It returns once every node reports
// cluster_state:ok with all 16384 slots served, knows every node, and sees
// every replica attached to its master, and once every replica reports
// master_link_status:up. That takes about 2 s, which is Redis's own delay
// before a new master accepts writes. Every process is killed at the end of
// the test.
func StartClusterWithReplicas(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: a Redis Cluster needs at least 3 masters, not %d", masters)
	}
	if replicasPerMaster < 0 {
		t.Fatalf("redistest: %d replicas per master", replicasPerMaster)
	}
	total := masters * (1 + replicasPerMaster)
	c := startReplicaClusterNodes(t, total)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("redistest: cluster %v: %s%s", c.Addrs(), fmt.Sprintf(format, args...), c.tails())
	}
	masterOf := replicaLayout(masters, replicasPerMaster)

	if err := c.configureNodes(masters); err != nil {
		fail("%v", err)
	}
	if err := c.meetAll(); err != nil {
		fail("%v", err)
	}
	deadline := time.Now().Add(clusterTimeout)
	if err := c.waitMet(deadline); err != nil {
		fail("the nodes did not meet within %v: %v", clusterTimeout, err)
	}
	if err := c.replicate(masterOf); err != nil {
		fail("%v", err)
	}
	if err := c.waitAttached(masterOf, masters, deadline); err != nil {
		fail("the replicas did not attach within %v: %v", clusterTimeout, err)
	}
	if err := c.waitState(total, masters, deadline); err != nil {
		fail("not ok within %v: %v", clusterTimeout, err)
	}
	return c
}

// startReplicaClusterNodes starts total cluster nodes with
// replicaClusterArgs, each with its bus port, not yet joined.
func startReplicaClusterNodes(t testing.TB, total int) *Cluster {
	t.Helper()
	c := &Cluster{}
	for i := 0; i < total; i++ {
		s := newServer(t, replicaClusterArgs)
		s.cluster = true
		s.run(t, true)
		c.nodes = append(c.nodes, s)
	}
	return c
}

// replicaLayout maps each node of StartClusterWithReplicas to its master:
// masterOf[i] is the index of node i's master, or -1 for a master. The
// masters come first, then the replicas of the first master, of the
// second, and so on.
func replicaLayout(masters, replicasPerMaster int) []int {
	masterOf := make([]int, masters*(1+replicasPerMaster))
	for i := range masterOf {
		masterOf[i] = -1
		if i >= masters {
			masterOf[i] = (i - masters) / replicasPerMaster
		}
	}
	return masterOf
}

// configureNodes records every node's id, gives each a distinct config
// epoch, and spreads the slots evenly over the first masters nodes.
func (c *Cluster) configureNodes(masters int) error {
	slots := spreadSlots(masters)
	for i, n := range c.nodes {
		id, err := query(n.Addr(), []string{"CLUSTER", "MYID"})
		if err != nil {
			return fmt.Errorf("%s: %v", n.Addr(), err)
		}
		n.setID(id)
		// Distinct epochs, as redis-cli sets them: no collision to resolve.
		if _, err := query(n.Addr(), []string{"CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i + 1)}); err != nil {
			return fmt.Errorf("%s: %v", n.Addr(), err)
		}
		if i < masters {
			r := slots[i]
			if _, err := query(n.Addr(), []string{"CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(r.lo), strconv.Itoa(r.hi)}); err != nil {
				return fmt.Errorf("%s: %v", n.Addr(), err)
			}
		}
	}
	return nil
}

// meetAll has every pair of nodes meet directly: faster than waiting for
// gossip to spread.
func (c *Cluster) meetAll() error {
	for i, a := range c.nodes {
		for _, b := range c.nodes[i+1:] {
			if _, err := query(a.Addr(), []string{"CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(b.port)}); err != nil {
				return fmt.Errorf("%s: %v", a.Addr(), err)
			}
		}
	}
	return nil
}

// waitMet polls until every node knows every other (not in handshake, with
// an address): a replica can follow a master only once it knows it.
func (c *Cluster) waitMet(deadline time.Time) error {
	return c.poll(deadline, func(cs conns) error {
		for _, n := range c.nodes {
			view, err := cs.nodes(n.Addr())
			if err != nil {
				return err
			}
			for _, other := range c.nodes {
				o, ok := byID(view, other.id())
				if !ok || o.has("handshake") || o.has("noaddr") {
					return fmt.Errorf("%s does not know %s yet", n.Addr(), other.Addr())
				}
			}
		}
		return nil
	})
}

// replicate has every replica follow its master (CLUSTER REPLICATE).
func (c *Cluster) replicate(masterOf []int) error {
	for i, n := range c.nodes {
		if m := masterOf[i]; m >= 0 {
			if _, err := query(n.Addr(), []string{"CLUSTER", "REPLICATE", c.nodes[m].id()}); err != nil {
				return fmt.Errorf("%s: %v", n.Addr(), err)
			}
		}
	}
	return nil
}

// waitAttached polls until every node sees every replica attached to its
// master, and every replica (the nodes after the first masters) reports
// master_link_status:up.
func (c *Cluster) waitAttached(masterOf []int, masters int, deadline time.Time) error {
	return c.poll(deadline, func(cs conns) error {
		for _, n := range c.nodes {
			view, err := cs.nodes(n.Addr())
			if err != nil {
				return err
			}
			for i, r := range c.nodes {
				if masterOf[i] < 0 {
					continue
				}
				o, _ := byID(view, r.id())
				if !o.has("slave") || o.master != c.nodes[masterOf[i]].id() {
					return fmt.Errorf("%s does not see %s as a replica of %s yet", n.Addr(), r.Addr(), c.nodes[masterOf[i]].Addr())
				}
			}
		}
		for _, r := range c.nodes[masters:] {
			info, err := cs.info(r.Addr(), "replication")
			if err != nil {
				return err
			}
			if info["master_link_status"] != "up" {
				return fmt.Errorf("%s: master_link_status is %q", r.Addr(), info["master_link_status"])
			}
		}
		return nil
	})
}

// Masters are the nodes that run and say they are masters (INFO
// replication), in the order of Nodes. A node that does not answer is left
// out. Each call sends one INFO to every node.
func (c *Cluster) Masters() []*Server { return withRole(c.nodes, "master") }

// Replicas are the nodes that run and say they are replicas (INFO
// replication), in the order of Nodes, whether or not their master is alive.
// A node that does not answer is left out.
func (c *Cluster) Replicas() []*Server { return withRole(c.nodes, "slave") }

// MasterOf is the master that serves key now: the slot comes from CLUSTER
// KEYSLOT, and the master is the running node that claims the slot in its
// own CLUSTER NODES line (the one with the highest config epoch should two
// claim it, as Redis decides). It fails the test when no running master
// serves the slot, for instance between a kill and the promotion.
func (c *Cluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	slot := -1
	var errs []string
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		v, err := ask(n.Addr(), "CLUSTER", "KEYSLOT", key)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", n.Addr(), err))
			continue
		}
		if i, ok := v.(int64); ok {
			slot = int(i)
			break
		}
		errs = append(errs, fmt.Sprintf("%s: CLUSTER KEYSLOT answered %v", n.Addr(), v))
	}
	if slot < 0 {
		t.Fatalf("redistest: no node tells the slot of %q: %s", key, strings.Join(errs, "; "))
	}
	var best *Server
	var bestEpoch int64
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
			t.Fatalf("redistest: %s: %v", n.Addr(), err)
		}
		me, ok := myself(view)
		if !ok || !me.has("master") || !hasSlot(me.slots, slot) {
			continue
		}
		if best == nil || me.epoch > bestEpoch {
			best, bestEpoch = n, me.epoch
		}
	}
	if best == nil {
		t.Fatalf("redistest: no running master serves slot %d of %q", slot, key)
	}
	return best
}

// ReplicaOf is a running replica of master (one that says so in INFO
// replication), the first in the order of Nodes with its link up, else the
// first with its link down, which is what the replicas of a dead master
// report. It fails the test when master has no running replica.
func (c *Cluster) ReplicaOf(t testing.TB, master *Server) *Server {
	t.Helper()
	r := replicaOf(c.nodes, master)
	if r == nil {
		t.Fatalf("redistest: %s has no running replica", master.Addr())
	}
	return r
}

// WaitReplicated waits until every running replica of a running master has
// processed everything its master had written when WaitReplicated was
// called (its slave_repl_offset reaches the master's master_repl_offset), so
// that a write made before it survives a failover. It fails the test after
// within.
func (c *Cluster) WaitReplicated(t testing.TB, within time.Duration) {
	t.Helper()
	if err := waitReplicated(c.nodes, time.Now().Add(within)); err != nil {
		t.Fatalf("redistest: replicas of %v not caught up within %v: %v", c.Addrs(), within, err)
	}
}

// nodeRecord is what a cluster node said of itself before it was killed.
type nodeRecord struct {
	id       string
	master   bool
	slots    []slotRange
	replicas []string // ids of the nodes that followed it
}

// remember asks a running cluster node what it is and keeps the answer for
// WaitPromoted. A node that does not answer within a second (a frozen one)
// leaves the last record.
func (s *Server) remember() {
	cs := conns{}
	defer cs.close()
	view, err := cs.nodes(s.Addr())
	if err != nil {
		return
	}
	me, ok := myself(view)
	if !ok {
		return
	}
	rec := &nodeRecord{id: me.id, master: me.has("master"), slots: me.slots}
	for _, n := range view {
		if n.master == me.id {
			rec.replicas = append(rec.replicas, n.id)
		}
	}
	s.mu.Lock()
	s.nodeID = me.id
	s.before = rec
	s.mu.Unlock()
}

// id is a cluster node's id: cached, else asked (CLUSTER MYID); "" when it
// is unknown and the node does not answer.
func (s *Server) id() string {
	s.mu.Lock()
	id := s.nodeID
	s.mu.Unlock()
	if id != "" {
		return id
	}
	id, err := query(s.Addr(), []string{"CLUSTER", "MYID"})
	if err != nil {
		return ""
	}
	s.setID(id)
	return id
}

func (s *Server) setID(id string) {
	s.mu.Lock()
	s.nodeID = id
	s.mu.Unlock()
}

// byNodeID finds the cluster's server with a node id.
func (c *Cluster) byNodeID(id string) *Server {
	for _, n := range c.nodes {
		if n.id() == id {
			return n
		}
	}
	return nil
}

// withRole are the running nodes whose INFO replication says role.
func withRole(nodes []*Server, role string) []*Server {
	var out []*Server
	for _, n := range nodes {
		if !n.running() {
			continue
		}
		info, err := infoSection(n.Addr(), "replication")
		if err == nil && info["role"] == role {
			out = append(out, n)
		}
	}
	return out
}

// replicaOf is a running node of nodes that replicates master, preferring
// one whose link is up; nil when there is none.
func replicaOf(nodes []*Server, master *Server) *Server {
	var down *Server
	for _, n := range nodes {
		if n == master || !n.running() {
			continue
		}
		info, err := infoSection(n.Addr(), "replication")
		if err != nil || info["role"] != "slave" || info["master_port"] != strconv.Itoa(master.port) {
			continue
		}
		if info["master_link_status"] == "up" {
			return n
		}
		if down == nil {
			down = n
		}
	}
	return down
}

// waitReplicated reads the replication offset of every running master of
// nodes, then polls until each running replica of one of them has reached
// its master's offset with its link up.
func waitReplicated(nodes []*Server, deadline time.Time) error {
	offsets := map[string]int64{} // master port -> master_repl_offset
	for _, n := range nodes {
		if !n.running() {
			continue
		}
		info, err := infoSection(n.Addr(), "replication")
		if err != nil {
			return fmt.Errorf("%s: %v", n.Addr(), err)
		}
		if info["role"] == "master" {
			off, err := strconv.ParseInt(info["master_repl_offset"], 10, 64)
			if err != nil {
				return fmt.Errorf("%s: master_repl_offset %q", n.Addr(), info["master_repl_offset"])
			}
			offsets[strconv.Itoa(n.port)] = off
		}
	}
	return pollUntil(deadline, func(cs conns) error {
		for _, n := range nodes {
			if !n.running() {
				continue
			}
			info, err := cs.info(n.Addr(), "replication")
			if err != nil {
				return err
			}
			want, ok := offsets[info["master_port"]]
			if info["role"] != "slave" || !ok {
				continue
			}
			got, _ := strconv.ParseInt(info["slave_repl_offset"], 10, 64)
			if info["master_link_status"] != "up" || got < want {
				return fmt.Errorf("%s: link %s, offset %d of %d", n.Addr(), info["master_link_status"], got, want)
			}
		}
		return nil
	})
}

// infoSection runs INFO section on a connection of its own.
func infoSection(addr, section string) (map[string]string, error) {
	s, err := query(addr, []string{"INFO", section})
	if err != nil {
		return nil, err
	}
	return parseInfo(s), nil
}
