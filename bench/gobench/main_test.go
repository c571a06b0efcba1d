package main

import (
	"strings"
	"testing"
)

const old = `goos: linux
pkg: github.com/presenced/presenced/tracker
BenchmarkTrackerCycle-2   	   38000	     31290 ns/op	  9.668 allocs/change	 11640 B/op	      29 allocs/op
BenchmarkTrackerCycle-2   	   38000	     30000 ns/op	  9.668 allocs/change	 11640 B/op	      29 allocs/op
BenchmarkTrackerCycle-2   	   38000	     35000 ns/op	  9.668 allocs/change	 11640 B/op	      29 allocs/op
BenchmarkPublish/nop-2    	  600000	      1782 ns/op	     240 B/op	       2 allocs/op
PASS
`

const cur = `BenchmarkPublish/nop-2    	  600000	      1000 ns/op	     240 B/op	       2 allocs/op
BenchmarkPublish/nop-2    	  600000	      1200 ns/op	     240 B/op	       1 allocs/op
BenchmarkTrackerSet-2     	  600000	      12.25 ns/op	     0 B/op	       0 allocs/op
`

func TestTable(t *testing.T) {
	a, err := parse(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	b, err := parse(strings.NewReader(cur))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	table(&out, [2]string{"0.9.0", "current"}, [2]*results{a, b}, []string{"ns/op", "allocs/op"})
	want := "| benchmark | ns/op 0.9.0 | ns/op current | Δ ns/op | allocs/op 0.9.0 | allocs/op current |\n" +
		"|---|--:|--:|--:|--:|--:|\n" +
		"| `TrackerCycle` | 31290 | – | – | 29 | – |\n" +
		"| `Publish/nop` | 1782 | 1100 | -38 % | 2 | 1.5 |\n" +
		"| `TrackerSet` | – | 12.2 | – | – | 0 |\n"
	if got := out.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// A benchmark without any of the units has no row.
func TestTableUnits(t *testing.T) {
	a, err := parse(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	table(&out, [2]string{"a", "b"}, [2]*results{a, a}, []string{"allocs/change"})
	want := "| benchmark | allocs/change a | allocs/change b |\n" +
		"|---|--:|--:|\n" +
		"| `TrackerCycle` | 9.67 | 9.67 |\n"
	if got := out.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
