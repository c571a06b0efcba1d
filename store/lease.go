package store

import (
	"context"
	"time"
)

// Leases are named leases, each held by one node of the cluster at a time
// (the webhooks' one sender): the group leader's lease (GroupLog.Lead)
// under another key, with the same script.
type Leases interface {
	// Lease takes or keeps the lease name for ttl; true while this node
	// (incarnation) holds it.
	Lease(ctx context.Context, name string, ttl time.Duration) (bool, error)
	// ReleaseLease gives the lease up if this node holds it (a clean stop:
	// another node takes it at its next try, not a TTL later).
	ReleaseLease(ctx context.Context, name string) error
}

// Lease implements Leases: a memory store has one node, always the holder.
func (m *Memory) Lease(context.Context, string, time.Duration) (bool, error) { return true, nil }

// ReleaseLease implements Leases.
func (m *Memory) ReleaseLease(context.Context, string) error { return nil }

// Lease implements Leases: lead.lua on P:lease:<name>.
func (r *Redis) Lease(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	r.mu.Lock()
	me := member(r.node, r.inc)
	r.mu.Unlock()
	n, err := scriptLead.Run(ctx, r.c, []string{r.k.lease(name)}, me, ms(ttl)).Int()
	if err != nil {
		return false, r.fail("lease", err)
	}
	r.up()
	return n == 1, nil
}

// ReleaseLease implements Leases: release_record.lua (delete the key only
// if it names this node's incarnation) on P:lease:<name>.
func (r *Redis) ReleaseLease(ctx context.Context, name string) error {
	r.mu.Lock()
	me := member(r.node, r.inc)
	r.mu.Unlock()
	if err := scriptReleaseRecord.Run(ctx, r.c, []string{r.k.lease(name)}, me).Err(); err != nil {
		return r.fail("lease release", err)
	}
	return nil
}
