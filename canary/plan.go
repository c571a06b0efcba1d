package canary

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/presenced/presenced/slo"
)

// UserPrefix begins every synthetic user's name: presenced-canary-{node}-{i}.
// The binary reserves it: no credential but the canary's own may
// authenticate a user whose name begins with it.
const UserPrefix = "presenced-canary-"

// UserName is the name of node's i-th synthetic user. Any occurrence of
// separator (identity.separator, which splits a client id into user and
// device) in the node id becomes "_", so that the name is the same read
// from the username or from the client id, as do '/', '+' and '#'.
func UserName(node string, i int, separator string) string {
	return strip(UserPrefix+node+"-"+strconv.Itoa(i), separator)
}

// ObserverID is the client id of node's observer: a client id without the
// separator, which names no user.
func ObserverID(node, separator string) string {
	return strip(UserPrefix+node+"-observer", separator)
}

// strip replaces the separator, and what cannot stand in a topic level,
// with "_".
func strip(s, separator string) string {
	if separator != "" {
		s = strings.ReplaceAll(s, separator, "_")
	}
	return strings.NewReplacer("/", "_", "+", "_", "#", "_").Replace(s)
}

// IsUser reports whether user is a synthetic user's name.
func IsUser(user string) bool { return strings.HasPrefix(user, UserPrefix) }

// Plan is what a synthetic user's session will do, written in its client
// id (user + separator + plan) so that an observer on any node reads it
// from the session list of the presence payload: how it will end, when
// (the origin node's clock), the detection bound it is held to (the
// origin's keep-alive and offline grace), and its cycle number (counted
// from the origin's start), so that an observer knows how many sessions
// came and went without being shown to it.
type Plan struct {
	Kind  slo.Kind
	End   time.Time
	Bound time.Duration
	Cycle int64
}

// String is the plan as a client id's device part:
// {kind}.{end µs}.{bound ms}.{cycle}.
func (p Plan) String() string {
	return fmt.Sprintf("%s.%d.%d.%d", p.Kind, p.End.UnixMicro(), p.Bound.Milliseconds(), p.Cycle)
}

// ClientID is the client id of user's session that follows p.
func (p Plan) ClientID(user, separator string) string {
	if separator == "" {
		separator = "/"
	}
	return user + separator + p.String()
}

// ParsePlan reads the plan of a session id of user; false when it is none.
func ParsePlan(user, separator, id string) (Plan, bool) {
	if separator == "" {
		separator = "/"
	}
	rest, ok := strings.CutPrefix(id, user+separator)
	if !ok {
		return Plan{}, false
	}
	f := strings.Split(rest, ".")
	if len(f) != 4 || !slo.Kind(f[0]).Valid() {
		return Plan{}, false
	}
	end, err1 := strconv.ParseInt(f[1], 10, 64)
	bound, err2 := strconv.ParseInt(f[2], 10, 64)
	cycle, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || end <= 0 || bound <= 0 || cycle < 0 {
		return Plan{}, false
	}
	return Plan{Kind: slo.Kind(f[0]), End: time.UnixMicro(end), Bound: time.Duration(bound) * time.Millisecond, Cycle: cycle}, true
}
