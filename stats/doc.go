// Package stats is the one table of presenced's figures (Table): each row
// a gauge or a counter with its name, help, labels and how to read it. The
// same table makes both the admin API's /api/v1/stats (Snapshot, whose JSON
// keys are the metrics' names without the presenced_ prefix) and the
// Prometheus metrics at /metrics (Table is a prometheus.Collector), so the
// two can never disagree on a name or a value. A row may keep, for one
// release, the JSON names its figure had before (Stat.Legacy).
package stats
