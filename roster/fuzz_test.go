package roster

import (
	"testing"

	"github.com/presenced/presenced/presence"
)

// Whatever a groups file holds, ParseFile either refuses it or returns only
// valid names.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte("groups:\n  team: [alice, bob]\n"))
	f.Add([]byte("groups:\n  a: []\n  b:\n    - c\n"))
	f.Add([]byte("groups: {x: [y, y]}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseFile(b)
		if err != nil {
			return
		}
		for name, users := range g {
			if presence.ValidGroup(name) != nil {
				t.Fatalf("group %q accepted", name)
			}
			for _, u := range users {
				if presence.ValidUser(u) != nil {
					t.Fatalf("member %q accepted", u)
				}
			}
		}
	})
}
