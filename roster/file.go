package roster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/presenced/presenced/presence"
)

// MaxFileBytes bounds a groups file: 64 MiB holds a few hundred thousand
// memberships.
const MaxFileBytes = 64 << 20

// File is a groups file:
//
//	groups:
//	  team: [alice, bob]
//	  ops:
//	    - carol
//
// Every group and member name must be valid (presence.ValidGroup,
// presence.ValidUser); a group may be empty; a member listed twice counts
// once; any other key is an error.
type File struct {
	Groups map[string][]string `yaml:"groups"`
}

// ParseFile reads a groups file's content.
func ParseFile(b []byte) (map[string][]string, error) {
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("groups file: %d bytes, at most %d", len(b), MaxFileBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("groups file: %w", err)
	}
	out := make(map[string][]string, len(f.Groups))
	for g, users := range f.Groups {
		if err := presence.ValidGroup(g); err != nil {
			return nil, fmt.Errorf("groups file: %w", err)
		}
		for _, u := range users {
			if err := presence.ValidUser(u); err != nil {
				return nil, fmt.Errorf("groups file: group %q: %w", g, err)
			}
		}
		out[g] = users
		if users == nil {
			out[g] = []string{}
		}
	}
	return out, nil
}

// LoadFile reads the groups file at path.
func LoadFile(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	return ParseFile(b)
}
