package auth

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// An unknown user is compared with a dummy hash of the file's usual cost,
// so that it takes as long as a known user with a wrong password.
func TestDummyHashHasTheUsualCost(t *testing.T) {
	t.Parallel()
	hash := func(cost int) string {
		h, err := bcrypt.GenerateFromPassword([]byte("pw"), cost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	h4, h5 := hash(4), hash(5)
	tests := []struct {
		name string
		file string
		want int
	}{
		{"empty file: the default", "# nobody yet\n", bcrypt.DefaultCost},
		{"one cost", "a:" + h4 + "\nb:" + h4 + "\n", 4},
		{"the most common", "a:" + h4 + "\nb:" + h5 + "\nc:" + h5 + "\n", 5},
		{"a tie: the higher", "a:" + h5 + "\nb:" + h4 + "\n", 5},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "passwd")
		if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
			t.Fatal(err)
		}
		table, err := loadPasswordFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		if cost, err := bcrypt.Cost(table.dummy); err != nil || cost != tt.want {
			t.Errorf("%s: dummy cost %d (%v), want %d", tt.name, cost, err, tt.want)
		}
		if table.check("nobody", []byte("presenced: no such user")) {
			t.Errorf("%s: an unknown user got in with the dummy's password", tt.name)
		}
		// Loading a file of the same usual cost again takes the dummy hash
		// made before.
		again, err := loadPasswordFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		if &again.dummy[0] != &table.dummy[0] {
			t.Errorf("%s: the dummy hash was made again", tt.name)
		}
	}
}
