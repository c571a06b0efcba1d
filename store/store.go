package store

import (
	"cmp"
	"context"
	"crypto/tls"
	"time"

	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// Store is a presence store with its lifecycle: what a node holds, and the
// only view of the store it has. Every write is atomic and epoch-checked (a
// write naming a session at an epoch that is not its live one returns an
// error wrapping presence.ErrStaleEpoch or presence.ErrNotLive and changes
// nothing), and every committed change is reported as an Event, in commit
// order per user. Memory and Redis implement it; the memory store answers
// what does not apply to one node (Tombstone, Own) as no-ops.
type Store interface {
	// Start connects the store and starts its background work (Redis:
	// claims the node id, which fails with ErrNodeIDInUse while another
	// live node holds it, and subscribes to the node announcements and
	// group changes; the changes of users come once listened to: Listen,
	// ListenAll). Stop stops that work and waits for it, releasing what
	// the store built (its client).
	Start(ctx context.Context) error
	Stop()
	// Ready reports whether the store answers (false: degraded).
	Ready() bool
	// Stats returns the store's counters.
	Stats() Stats
	// Incarnation names this run of the node in the store.
	Incarnation() string
	// Tasks are the periodic maintenance the store needs (the sweep of
	// dead nodes, the reaper of expired sessions): its owner runs each
	// every Task.Every, each run with Task.Budget as its deadline.
	Tasks() []Task
	// Retention is how long an offline user is kept.
	Retention() time.Duration

	// Load reports the current aggregate of every user the store listens
	// to as a change (Changed events), the same way as the live changes:
	// every user after ListenAll (and always in memory), else the users
	// given to Listen. The audit after a failover reloads with it.
	Load(ctx context.Context) error
	Listener
	Open(ctx context.Context, a presence.OpenArgs) (presence.Session, error)
	End(ctx context.Context, a presence.EndArgs) error
	Update(ctx context.Context, ref presence.SessionRef, upd presence.Update) error
	SetAccount(ctx context.Context, user string, upd presence.AccountUpdate) error
	// Renew extends the named sessions' store-side expiry and returns those
	// the store no longer has live at that epoch.
	Renew(ctx context.Context, refs []presence.SessionRef, ttl time.Duration) ([]presence.SessionRef, error)
	// User returns a user's whole record.
	User(ctx context.Context, user string) (presence.User, bool, error)
	// AnnounceNode records a node's word in its history in the store
	// (presence.NodeHistory.Record): this node's own, or a survivor's
	// report that a node it swept is down. Nothing is broadcast: the nodes
	// that show the node topics read NodeStates. Nodes down for longer than
	// presence.NodeRetention are forgotten.
	AnnounceNode(ctx context.Context, st presence.NodeStatus) error
	// NodeStates returns every node's history, by node (Redis: one read).
	NodeStates(ctx context.Context) ([]presence.NodeHistory, error)
	// Forget drops the users offline since before (the memory store; Redis
	// expires their keys itself) and returns how many.
	Forget(before time.Time) int

	// The recovery after a failover (a Recovered event; see
	// tracker.Audit), and after a reset (Reset): Own returns the live
	// sessions the store holds of this incarnation, with their own state,
	// and Tombstone records offline, above the version known, every user of
	// known the store lost altogether.
	Own(ctx context.Context) ([]presence.StoredSession, error)
	Tombstone(ctx context.Context, known map[string]uint64) (int, error)

	// List returns a page of users read from the store (every master of a
	// Redis Cluster), whichever node holds their sessions: the admin API's
	// GET /api/v1/users (memory_list.go, redis_list.go). It answers an
	// error wrapping presence.ErrBadQuery for a bad query or cursor, and
	// presence.ErrNoGroup for a group that does not exist.
	List(ctx context.Context, q presence.ListQuery) (presence.ListPage, error)

	Groups
	GroupLog
	Claims
	Leases
}

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Redis)(nil)
)

// Task is one periodic maintenance task of a store.
type Task struct {
	Name   string
	Every  time.Duration
	Budget time.Duration // each run's deadline
	Run    func(ctx context.Context) error
}

// Stats are a store's counters (zero where they do not apply).
type Stats struct {
	Outages    int64 `json:"redis_outages"`     // transitions to unreachable
	Resets     int64 `json:"redis_resets"`      // times this node's record was found lost
	NodesLost  int64 `json:"redis_nodes_lost"`  // dead incarnations swept by this node
	Swept      int64 `json:"redis_swept"`       // sessions this node ended as node_lost
	Tombstones int64 `json:"redis_tombstones"`  // users Redis lost, recorded offline
	FeedErrors int64 `json:"redis_feed_errors"` // undecodable feed messages
	Reloads    int64 `json:"redis_reloads"`     // loads of what is listened to after a re-subscription
	Reaped     int64 `json:"-"`                 // sessions ended as timeout by the reaper
	// FeedMessages counts the change and group batch messages this node
	// received; Channels is how many sharded channels it is subscribed to
	// now; Resubscriptions counts the subscription connections lost and
	// subscribed again.
	FeedMessages    int64 `json:"redis_feed_messages"`
	Channels        int64 `json:"redis_channels"`
	Resubscriptions int64 `json:"redis_resubscriptions"`
	// Missed counts the dormant sessions this node's reaper ended as
	// missed: their check-in did not come (presence/dormant.go).
	Missed int64 `json:"-"`
}

// Config builds a store (Open). A nil Redis is the memory store.
type Config struct {
	Node          string           // this node's id
	Authoritative []string         // presence.authoritative_devices
	Retention     time.Duration    // how long an offline user is kept
	ReapInterval  time.Duration    // how often expired sessions are reaped
	Now           func() time.Time // the clock (memory: of everything; Redis: of the sweep's grace); nil: time.Now
	Log           *slog.Logger
	// Report receives every event (a Feed's Push); it must return at once.
	Report func(Event)
	Redis  *RedisConfig
	// DormantInterval is how often the dormant sessions whose check-in did
	// not come are looked for (presence.reap_interval; 0: ReapInterval): a
	// missed check-in is shown at most this long after it was due.
	DormantInterval time.Duration
}

// RedisConfig is the redis section of the configuration.
type RedisConfig struct {
	// Client is used instead of one built from the fields below; the store
	// does not close it.
	Client           redis.UniversalClient
	Addrs            []string
	Cluster          bool
	SentinelMaster   string
	SentinelUsername string
	SentinelPassword string
	Username         string
	Password         string
	DB               int
	DialTimeout      time.Duration
	ReadTimeout      time.Duration
	WriteTimeout     time.Duration
	PoolSize         int
	KeyPrefix        string
	NodeTTL          time.Duration
	SweepInterval    time.Duration
	TLS              *tls.Config // nil: no TLS (RedisTLS.Config builds it)
}

// Open returns the store c describes, not started.
func Open(c Config) Store {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Redis == nil {
		m := NewMemory(presence.NewRules(c.Authoritative), c.Now, c.Report)
		m.retention, m.reapEvery = c.Retention, c.ReapInterval
		return m
	}
	client, own := c.Redis.Client, false
	if client == nil {
		client, own = newClient(*c.Redis), true
	}
	r := NewRedis(RedisOptions{
		Client: client, Prefix: c.Redis.KeyPrefix, Node: c.Node, Authoritative: c.Authoritative,
		NodeTTL: c.Redis.NodeTTL, Retention: c.Retention, Log: c.Log, Report: c.Report, Now: c.Now,
	})
	r.ownClient = own
	r.sweepEvery, r.reapEvery = c.Redis.SweepInterval, c.ReapInterval
	r.dormantEvery = cmp.Or(c.DormantInterval, c.ReapInterval)
	return r
}

// clusterReload is how old a Redis Cluster's slot map may get before the
// client reads it again (go-redis's default is a minute): after a master
// dies, only a new map leads to the replica that took its place. The store
// also has it read again on every failed call.
const clusterReload = time.Second

// clusterDialRetries is how many dials a cluster client makes per attempt
// (go-redis's default is 5, 100 ms apart): with 5, a call to a dead master
// takes about 3.4 s to fail (4 attempts of 2 tries of 5 dials), holding a
// tracker worker, and with it the writes of users on live masters, that
// long. A failed write is retried by the tracker anyway.
const clusterDialRetries = 1

// newClient builds the go-redis client of c: a cluster client with
// Cluster, a Sentinel failover client with SentinelMaster, else a
// single-server client.
func newClient(c RedisConfig) redis.UniversalClient {
	switch {
	case c.Cluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                      c.Addrs,
			Username:                   c.Username,
			Password:                   c.Password,
			DialTimeout:                c.DialTimeout,
			ReadTimeout:                c.ReadTimeout,
			WriteTimeout:               c.WriteTimeout,
			PoolSize:                   c.PoolSize,
			MaxRetries:                 1,
			DialerRetries:              clusterDialRetries,
			ClusterStateReloadInterval: clusterReload,
			TLSConfig:                  c.TLS,
		})
	case c.SentinelMaster != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:       c.SentinelMaster,
			SentinelAddrs:    c.Addrs,
			SentinelUsername: c.SentinelUsername,
			SentinelPassword: c.SentinelPassword,
			Username:         c.Username,
			Password:         c.Password,
			DB:               c.DB,
			DialTimeout:      c.DialTimeout,
			ReadTimeout:      c.ReadTimeout,
			WriteTimeout:     c.WriteTimeout,
			PoolSize:         c.PoolSize,
			MaxRetries:       1,
			TLSConfig:        c.TLS,
		})
	}
	return redis.NewClient(&redis.Options{
		Addr:         c.Addrs[0],
		Username:     c.Username,
		Password:     c.Password,
		DB:           c.DB,
		DialTimeout:  c.DialTimeout,
		ReadTimeout:  c.ReadTimeout,
		WriteTimeout: c.WriteTimeout,
		PoolSize:     c.PoolSize,
		MaxRetries:   1,
		TLSConfig:    c.TLS,
	})
}
