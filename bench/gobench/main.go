package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	units := flag.String("units", "ns/op,B/op,allocs/op", "the units to tabulate, comma-separated")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: gobench [-units u1,u2] OLD.txt NEW.txt")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	var files [2]*results
	for i, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		files[i], err = parse(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			os.Exit(1)
		}
	}
	labels := [2]string{label(flag.Arg(0)), label(flag.Arg(1))}
	table(os.Stdout, labels, files, strings.Split(*units, ","))
}

// label is a file's column heading: its base name without .txt.
func label(path string) string { return strings.TrimSuffix(filepath.Base(path), ".txt") }

// results are the figures of one file: per benchmark, per unit, every
// run's value, and the benchmarks in the order they first appear.
type results struct {
	names  []string
	values map[string]map[string][]float64
}

var procs = regexp.MustCompile(`-\d+$`)

// parse reads the benchmark lines of a go test -bench output:
// "BenchmarkName-N  iterations  value unit  value unit ...".
func parse(r io.Reader) (*results, error) {
	res := &results{values: make(map[string]map[string][]float64)}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procs.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		m := res.values[name]
		if m == nil {
			m = make(map[string][]float64)
			res.values[name] = m
			res.names = append(res.names, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", sc.Text(), err)
			}
			m[f[i+1]] = append(m[f[i+1]], v)
		}
	}
	return res, sc.Err()
}

// median returns the median of vs (the mean of the middle two for an even
// count) and whether there were any.
func median(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

func (r *results) median(name, unit string) (float64, bool) {
	return median(r.values[name][unit])
}

// has reports whether benchmark name has a figure in any of units.
func (r *results) has(name string, units []string) bool {
	for _, u := range units {
		if len(r.values[name][u]) > 0 {
			return true
		}
	}
	return false
}

// table writes the Markdown table of files (old, new) for units.
func table(w io.Writer, labels [2]string, files [2]*results, units []string) {
	names := slices.Clone(files[0].names)
	for _, n := range files[1].names {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	head := []string{"benchmark"}
	for _, u := range units {
		head = append(head, u+" "+labels[0], u+" "+labels[1])
		if u == "ns/op" {
			head = append(head, "Δ ns/op")
		}
	}
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	sep := make([]string, len(head))
	sep[0] = "---"
	for i := 1; i < len(sep); i++ {
		sep[i] = "--:"
	}
	fmt.Fprintln(w, "|"+strings.Join(sep, "|")+"|")
	for _, n := range names {
		if !files[0].has(n, units) && !files[1].has(n, units) {
			continue // none of the units
		}
		row := []string{"`" + n + "`"}
		for _, u := range units {
			a, okA := files[0].median(n, u)
			b, okB := files[1].median(n, u)
			row = append(row, cell(a, okA), cell(b, okB))
			if u == "ns/op" {
				d := "–"
				if okA && okB && a != 0 {
					d = fmt.Sprintf("%+.0f %%", (b-a)/a*100)
				}
				row = append(row, d)
			}
		}
		fmt.Fprintln(w, "| "+strings.Join(row, " | ")+" |")
	}
}

// cell formats a median: whole numbers above 100, three significant
// figures below.
func cell(v float64, ok bool) string {
	switch {
	case !ok:
		return "–"
	case v >= 100 || v == float64(int64(v)):
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
