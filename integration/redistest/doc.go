// Package redistest starts real redis-server processes for tests: a single
// server (Start), a Redis Cluster of masters (StartCluster) or of masters with
// replicas (StartClusterWithReplicas), or a primary with replicas watched by
// Redis Sentinel (StartSentinel), each on random free 127.0.0.1 ports, with no
// persistence and its own temporary directory. Every process is killed
// (SIGKILL) and waited for when the test that started it ends, whether or not
// the test killed it first; on Linux the kernel also kills it if the test
// binary dies first.
//
// Failover tests kill a master with (*Server).Kill and wait for its
// successor: (*Cluster).WaitPromoted after a crash, (*Cluster).WaitTakeover
// after a planned CLUSTER FAILOVER TAKEOVER, (*Sentinel).WaitFailover for a
// Sentinel-managed primary. Each wait polls every 25 ms and returns the time
// at which it first saw the new master in place, so that a test can measure
// from it.
//
// The package is safe for parallel tests. It needs redis-server (and
// redis-cli for StartCluster) on PATH: `make deps` installs them, and `make
// test` runs it. Sentinels are redis-server processes started with
// --sentinel, so no other program is needed. When one is missing the test
// fails; it is never skipped.
package redistest
