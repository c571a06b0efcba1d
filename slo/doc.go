// Package slo is the pure accounting of the presence SLO that the canary
// (package canary) measures: detection latencies per end kind against their
// bound, false-offline time against the time the synthetic users were in
// fact connected, and cross-node propagation latencies. It keeps the
// samples of a sliding window (bounded per series) for the quantiles and
// the ratios of GET /api/v1/slo, and cumulative counts for Prometheus,
// whose burn-rate alerts compute their own windows from counters.
//
// It does no I/O and never reads the clock: every call takes the time it
// happened at, so that the table tests run on a fake clock.
package slo
