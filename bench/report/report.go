// Package report renders a benchmark result file: a Markdown table of every
// figure per system and scenario, and an SVG plot of the latency
// distribution per system.
package report

import "github.com/presenced/presenced/bench/result"

// Markdown renders the results table. (Being written: see bench/report.)
func Markdown(f result.File) []byte { return nil }

// LatencySVG renders the latency distribution plot. (Being written.)
func LatencySVG(f result.File) []byte { return nil }
