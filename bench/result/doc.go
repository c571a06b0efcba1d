// Package result holds the benchmark's output format: what cmd/presence-bench
// measures and writes as JSON, and what bench/report turns into the Markdown
// table and the latency plot.
package result
