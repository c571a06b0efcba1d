package names

import (
	"strconv"
	"sync"
	"testing"
)

// Codes are stable, the empty name is 0, and a full table gives no code
// while the names it holds keep theirs; concurrent callers agree.
func TestCodes(t *testing.T) {
	if c, ok := Code(""); !ok || c != 0 || Name(0) != "" {
		t.Fatalf("the empty name: code %d %v", c, ok)
	}
	tcp, ok := Code("tcp")
	if !ok || tcp == 0 || Name(tcp) != "tcp" {
		t.Fatalf("tcp: code %d %v, name %q", tcp, ok, Name(tcp))
	}
	var wg sync.WaitGroup
	got := make([][]uint8, 4)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2 * Max {
				c, ok := Code("name-" + strconv.Itoa(i))
				if !ok {
					c = 0
				}
				got[g] = append(got[g], c)
			}
		}()
	}
	wg.Wait()
	given := 0
	for i := range 2 * Max {
		for g := range got {
			if got[g][i] != got[0][i] {
				t.Fatalf("name-%d: goroutine %d got code %d, goroutine 0 %d", i, g, got[g][i], got[0][i])
			}
		}
		if c := got[0][i]; c != 0 {
			given++
			if Name(c) != "name-"+strconv.Itoa(i) {
				t.Fatalf("code %d names %q, want name-%d", c, Name(c), i)
			}
		}
	}
	if given != Max-2 { // "" and "tcp" took two
		t.Errorf("%d names were given codes, want %d", given, Max-2)
	}
	if c, ok := Code("one-more"); ok {
		t.Errorf("a full table gave code %d", c)
	}
	if c, ok := Code("tcp"); !ok || c != tcp {
		t.Errorf("tcp lost its code in a full table: %d %v", c, ok)
	}
	if Name(255) == "" {
		t.Error("the last code names nothing")
	}
}
