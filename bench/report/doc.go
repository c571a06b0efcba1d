// Package report renders a benchmark result file: a Markdown document with a
// table of every figure per scenario and system, the ratios, the targets of
// the benchmark with met/missed, and an SVG plot of the propagation latency
// distribution per system. Everything here is a pure function of the
// result.File: no I/O, no clock.
package report
