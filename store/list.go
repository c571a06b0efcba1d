package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"

	"github.com/presenced/presenced/presence"
)

// The list of users (GET /api/v1/users), common to both stores.
//
// A cursor is opaque to clients: one letter naming the walk, then the
// walk's position in base64url. "m": the memory store's walk in name order,
// after the name; "g": a group's members in name order, after the name;
// "r": a Redis walk, the lowest slot of the master it is on (0 on a single
// server), the SCAN cursor there and, when one SCAN batch was split
// between two pages, the COUNT that read it and the last name taken from
// it (the next page reads the same batch again and goes on after it).

func encodeCursor(kind byte, pos string) string {
	return string(kind) + base64.RawURLEncoding.EncodeToString([]byte(pos))
}

// decodeCursor returns the position of a cursor of kind ("" for none).
func decodeCursor(c string, kind byte) (string, error) {
	if c == "" {
		return "", nil
	}
	if c[0] != kind {
		return "", fmt.Errorf("%w: cursor of another walk", presence.ErrBadQuery)
	}
	b, err := base64.RawURLEncoding.DecodeString(c[1:])
	if err != nil || len(b) == 0 {
		return "", fmt.Errorf("%w: undecodable cursor", presence.ErrBadQuery)
	}
	return string(b), nil
}

// listGroupChunk is how many members one round of a group's walk reads.
const listGroupChunk = 256

// listMembers walks a group's members (sorted) in name order after the
// cursor's name, reading their records a chunk at a time with get (the
// zero Aggregate for a user without a record), until the page is full or
// its work is spent. It costs O(M) for the members' list (the store hands
// it whole) plus O(page) records.
func listMembers(ctx context.Context, q presence.ListQuery, members []string,
	get func(ctx context.Context, users []string) ([]presence.Aggregate, error)) (presence.ListPage, error) {
	after, err := decodeCursor(q.Cursor, 'g')
	if err != nil {
		return presence.ListPage{}, err
	}
	w := presence.ListWindow{Q: q}
	from := max(after, q.Prefix)
	i := sort.SearchStrings(members, from)
	if i < len(members) && members[i] == after {
		i++
	}
	members = members[i:]
	last := after
	for len(members) > 0 && strings.HasPrefix(members[0], q.Prefix) {
		n := min(len(members), listGroupChunk)
		chunk := members[:n]
		recs, err := get(ctx, chunk)
		if err != nil {
			return presence.ListPage{}, err
		}
		for j, p := range recs {
			if w.Full() || w.Spent() {
				w.Page.Next = encodeCursor('g', last)
				return w.Page, nil
			}
			if !strings.HasPrefix(chunk[j], q.Prefix) {
				return w.Page, nil
			}
			last = chunk[j]
			w.Look(p)
		}
		members = members[n:]
	}
	return w.Page, nil
}
