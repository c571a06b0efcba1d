// Command gobench prints the Markdown table of docs/performance.md: the
// median of every Go benchmark's figures in two `go test -bench` outputs
// (the last release's and the current one), side by side.
//
//	go run ./bench/gobench bench/results/gobench/0.9.0.txt bench/results/gobench/current.txt
//
// Each row is a benchmark (its name without the GOMAXPROCS suffix), in the
// order of the first file; each unit (-units, default ns/op, B/op and
// allocs/op) has a column per file, headed by the file's name without
// .txt, and ns/op a column of the change in per cent. A median is that of
// every run of the benchmark in the file (go test -count); a benchmark
// missing from a file shows "–", and one with none of the units in either
// file no row. benchstat (make bench-go) says whether a
// difference is more than noise; this table only shows the figures.
package main
