package presence

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// The list of users (GET /api/v1/users): the query, its page and the one
// filter both stores apply to each record they examine.

// Limits of a list query.
const (
	// ListDefault is a page's size when the query names none.
	ListDefault = 100
	// ListMax is the largest page a query may ask for.
	ListMax = 1000
	// ListWork bounds the records one request examines: a query whose
	// filters match few users comes back with a short (or empty) page and
	// a cursor once it has looked at this many.
	ListWork = 10000
	// maxListFilter bounds the length of the node and prefix filters.
	maxListFilter = 256
	// maxListCursor bounds a cursor's length.
	maxListCursor = 1024
)

// Errors of a list query.
var (
	// ErrBadQuery: a filter, the limit or the cursor is not acceptable.
	ErrBadQuery = errors.New("bad list query")
	// ErrNoGroup: the group filter names a group that does not exist.
	ErrNoGroup = errors.New("no such group")
)

// ListQuery asks for a page of users. The filters combine with AND; a user
// matches Statuses when its status is any of them (none: every status),
// Node when one of its live sessions is on that node, Prefix when its name
// begins with it, Group when it is a member of the group.
type ListQuery struct {
	Statuses []Status
	Group    string
	Node     string
	Prefix   string
	Limit    int    // 1..ListMax; 0: ListDefault
	Cursor   string // the Next of the page before; "" for the first page
}

// Validate checks the query's values (not the cursor, which only the store
// that made it reads) and fills in the default limit.
func (q *ListQuery) Validate() error {
	switch {
	case q.Limit == 0:
		q.Limit = ListDefault
	case q.Limit < 0 || q.Limit > ListMax:
		return fmt.Errorf("%w: limit %d (1 to %d)", ErrBadQuery, q.Limit, ListMax)
	}
	for _, s := range q.Statuses {
		if !s.SessionStatus() && s != Offline && s != Dormant {
			return fmt.Errorf("%w: status %q (online, idle, away, busy, dnd, dormant or offline)", ErrBadQuery, s)
		}
	}
	if q.Group != "" {
		if err := ValidGroup(q.Group); err != nil {
			return fmt.Errorf("%w: group: %w", ErrBadQuery, err)
		}
	}
	for name, v := range map[string]string{"node": q.Node, "prefix": q.Prefix} {
		if len(v) > maxListFilter || !utf8.ValidString(v) {
			return fmt.Errorf("%w: %s must be valid UTF-8 of at most %d bytes", ErrBadQuery, name, maxListFilter)
		}
	}
	if len(q.Cursor) > maxListCursor {
		return fmt.Errorf("%w: cursor of %d bytes", ErrBadQuery, len(q.Cursor))
	}
	return nil
}

// MatchOthers reports whether p matches every filter but the statuses and
// the group (which the store applies by what it walks).
func (q ListQuery) MatchOthers(p Aggregate) bool {
	if len(p.User) < len(q.Prefix) || p.User[:len(q.Prefix)] != q.Prefix {
		return false
	}
	if q.Node == "" {
		return true
	}
	for _, s := range p.Sessions {
		if s.Node == q.Node {
			return true
		}
	}
	return false
}

// MatchStatus reports whether p's status is one the query asks for.
func (q ListQuery) MatchStatus(p Aggregate) bool {
	if len(q.Statuses) == 0 {
		return true
	}
	for _, s := range q.Statuses {
		if p.Status == s {
			return true
		}
	}
	return false
}

// ListCounts counts users by status.
type ListCounts struct {
	Total   int `json:"total"`
	Online  int `json:"online"`
	Idle    int `json:"idle"`
	Away    int `json:"away"`
	Busy    int `json:"busy"`
	DND     int `json:"dnd"`
	Offline int `json:"offline"`
	Dormant int `json:"dormant"` // devices that sleep by design, expected back (dormant.go)
}

// Add counts p.
func (c *ListCounts) Add(p Aggregate) {
	c.Total++
	switch p.Status {
	case Online:
		c.Online++
	case Idle:
		c.Idle++
	case Away:
		c.Away++
	case Busy:
		c.Busy++
	case DND:
		c.DND++
	case Dormant:
		c.Dormant++
	default:
		c.Offline++
	}
}

// ListPage is one page of users. Counts are over the page's window: the
// users the request examined that match every filter but the statuses
// (see docs/operations.md); Examined is how many records it looked at.
type ListPage struct {
	Users    []Aggregate
	Next     string // "" when the walk is done
	Counts   ListCounts
	Examined int
}

// ListWindow collects a page: Look at each record examined, in order.
type ListWindow struct {
	Q    ListQuery
	Page ListPage
	seen map[string]struct{}
}

// Look examines p: it counts it when it matches every filter but the
// statuses, and takes it when it matches them all; a user this request
// met before is neither counted nor taken again (one SCAN may return a key
// twice). It reports whether it took p.
func (w *ListWindow) Look(p Aggregate) bool {
	w.Page.Examined++
	if p.Version == 0 || !w.Q.MatchOthers(p) {
		return false
	}
	if w.seen == nil {
		w.seen = make(map[string]struct{}, w.Q.Limit)
	}
	if _, dup := w.seen[p.User]; dup {
		return false
	}
	w.seen[p.User] = struct{}{}
	w.Page.Counts.Add(p)
	if !w.Q.MatchStatus(p) {
		return false
	}
	w.Page.Users = append(w.Page.Users, p)
	return true
}

// Full reports whether the page holds Limit users.
func (w *ListWindow) Full() bool { return len(w.Page.Users) >= w.Q.Limit }

// Room is how many more users the page takes.
func (w *ListWindow) Room() int { return w.Q.Limit - len(w.Page.Users) }

// Spent reports whether the request examined ListWork records.
func (w *ListWindow) Spent() bool { return w.Page.Examined >= ListWork }
