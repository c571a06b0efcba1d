package names

import (
	"sync"
	"sync/atomic"
)

// Max is how many names have a code, the empty name included.
const Max = 256

// table is the names by code: an array replaced, never changed, on each
// addition, so that a reader holding one sees it whole.
type table struct{ names []string }

var (
	mu      sync.Mutex // serialises additions
	current atomic.Pointer[table]
)

func init() { current.Store(&table{names: []string{""}}) }

// Code returns the code of name, giving it one if the table has room, and
// whether it has one.
func Code(name string) (uint8, bool) {
	if c, ok := find(current.Load(), name); ok {
		return c, true
	}
	mu.Lock()
	defer mu.Unlock()
	t := current.Load()
	if c, ok := find(t, name); ok {
		return c, true
	}
	if len(t.names) >= Max {
		return 0, false
	}
	grown := make([]string, len(t.names), len(t.names)+1)
	copy(grown, t.names)
	current.Store(&table{names: append(grown, name)})
	return uint8(len(t.names)), true
}

// Name returns the name of code c, which Code gave.
func Name(c uint8) string {
	t := current.Load()
	if int(c) >= len(t.names) {
		return "" // never given: the caller's bug, but no panic on a read path
	}
	return t.names[c]
}

// find looks name up in t.
func find(t *table, name string) (uint8, bool) {
	for i, n := range t.names {
		if n == name {
			return uint8(i), true
		}
	}
	return 0, false
}
