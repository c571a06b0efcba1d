package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/presenced/presenced/presence"
)

// wireChange is a change as common.lua publishes it: numbers that may pass
// 2^53 / 14 digits are strings; an empty session list is {} (cjson).
type wireChange struct {
	U     string          `json:"u"`
	V     string          `json:"v"`
	St    string          `json:"st"`
	Tx    string          `json:"tx"`
	Since string          `json:"since"`
	Ls    string          `json:"ls"`
	Ss    json.RawMessage `json:"ss"`
	R     string          `json:"r"`  // end reason, when an end made the change
	Wd    json.Number     `json:"wd"` // will delay (ms) of the ended session
	X     json.RawMessage `json:"x"`  // the sessions the change ended (wireEnded), when it ended some
	Pv    *wirePrivacy    `json:"pv"` // the privacy setting, when it hides something (redis_privacy.go)
	Rs    string          `json:"rs"` // why an offline user went (presence.Aggregate.Reason), when known
	Nx    string          `json:"nx"` // next expected check-in (ms), dormant only (common.lua dormant)

	// fast: fastChange decoded the message, and with it the session lists
	// (views for Ss, xs for X).
	fast  bool
	views []wireView
	xs    []wireEnded
}

type wireView struct {
	ID string `json:"id"`
	E  string `json:"e"`
	N  string `json:"n"`
	D  string `json:"d"`
	St string `json:"st"`
	C  string `json:"c"`
	wireConn
}

// wireEnded is a session a change ended, as its message lists it (x).
type wireEnded struct {
	wireView
	R  string `json:"r"`
	Ea string `json:"ea"`
}

// wireConn is a session's connection facts (presence.Conn), each only when
// not empty or zero (open.lua).
type wireConn struct {
	Un string `json:"un,omitempty"`
	IP string `json:"ip,omitempty"`
	Pt int    `json:"pt,omitempty"`
	L  string `json:"l,omitempty"`
	Pv uint8  `json:"pv,omitempty"`
	Ka uint16 `json:"ka,omitempty"`
	Cs bool   `json:"cs,omitempty"`
	Se uint32 `json:"se,omitempty"`
}

func (w wireConn) conn() (presence.Conn, error) {
	c := presence.Conn{Username: w.Un, IP: w.IP, Port: w.Pt, Listener: w.L, ProtoVer: w.Pv, KeepAlive: w.Ka, CleanStart: w.Cs, Expiry: w.Se}
	if !c.Valid() {
		return presence.Conn{}, fmt.Errorf("connection facts out of bounds: %+v", w)
	}
	return c, nil
}

// wireSession is a live or ended session as stored in the user's hash.
type wireSession struct {
	ID string  `json:"id"`
	E  string  `json:"e"`
	N  string  `json:"n"`
	I  string  `json:"i"`
	D  string  `json:"d"`
	St string  `json:"st"`
	Tx string  `json:"tx"`
	C  float64 `json:"c"`
	Rn float64 `json:"rn"`
	X  float64 `json:"x"`
	R  string  `json:"r"`
	Ea float64 `json:"ea"`
	Ex float64 `json:"ex"` // the declared check-in period (ms), when declared
	Em float64 `json:"em"` // its margin (ms)
	wireConn
}

// maxMillis is 9999-12-31T23:59:59.999Z: a time beyond it, or before 1970,
// has no RFC 3339 form that observers could read.
const maxMillis = 253402300799999

// msTime reads a time the scripts write as milliseconds; anything that is
// not a whole number of milliseconds from 1970 to 9999 reads as no time.
func msTime(v float64) time.Time {
	if v <= 0 || v > maxMillis || v != float64(int64(v)) {
		return time.Time{}
	}
	return time.UnixMilli(int64(v)).UTC()
}

// msString reads a time written as a decimal string of milliseconds: "" and
// "0" are no time; anything but plain digits (no sign, no leading zero) in
// the range of msTime is an error.
func msString(s string) (time.Time, error) {
	if s == "" || s == "0" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || s[0] < '1' || s[0] > '9' || n > maxMillis {
		return time.Time{}, fmt.Errorf("time %q: not milliseconds from 1970 to 9999", s)
	}
	return time.UnixMilli(n).UTC(), nil
}

// validStatus accepts the statuses an aggregate or a session may carry.
func validStatus(s presence.Status) bool {
	return s == presence.Offline || s == presence.Dormant || s.SessionStatus()
}

// decodeChange turns a feed message into the aggregate observers get and
// what made it.
func decodeChange(b []byte) (presence.Aggregate, presence.Cause, error) {
	var w wireChange
	if !fastChange(b, &w) {
		w = wireChange{}
		if err := json.Unmarshal(b, &w); err != nil {
			return presence.Aggregate{}, presence.Cause{}, fmt.Errorf("feed message: %w", err)
		}
	}
	p, err := w.presence()
	if err != nil {
		return p, presence.Cause{}, err
	}
	c, err := w.cause()
	return p, c, err
}

// cause reads what made a change: an end reason and a will delay of at
// most a day (anything longer is an error: MQTT's own maximum is 2^32 s,
// and the pacer caps it far below anyway).
func (w wireChange) cause() (presence.Cause, error) {
	if w.R == "" {
		return presence.Cause{}, nil
	}
	c := presence.Cause{Ended: presence.EndReason(w.R)}
	if !c.Ended.Valid() {
		return presence.Cause{}, fmt.Errorf("feed end reason %q", w.R)
	}
	if w.Wd != "" {
		n, err := strconv.ParseInt(string(w.Wd), 10, 64)
		if err != nil || n < 0 || n > 24*3600*1000 {
			return presence.Cause{}, fmt.Errorf("feed will delay %q", w.Wd)
		}
		c.WillDelay = time.Duration(n) * time.Millisecond
	}
	return c, nil
}

func (w wireChange) presence() (presence.Aggregate, error) {
	v, err := strconv.ParseUint(w.V, 10, 64)
	if err != nil {
		return presence.Aggregate{}, fmt.Errorf("feed version %q: %w", w.V, err)
	}
	if v == 0 {
		return presence.Aggregate{}, errors.New("feed version 0")
	}
	if err := presence.ValidUser(w.U); err != nil {
		return presence.Aggregate{}, fmt.Errorf("feed user: %w", err)
	}
	if !validStatus(presence.Status(w.St)) {
		return presence.Aggregate{}, fmt.Errorf("feed status %q", w.St)
	}
	if err := presence.ValidText(w.Tx); err != nil {
		return presence.Aggregate{}, fmt.Errorf("feed text: %w", err)
	}
	p := presence.Aggregate{User: w.U, Status: presence.Status(w.St), Text: w.Tx, Version: v, Sessions: []presence.SessionView{}}
	if p.Since, err = msString(w.Since); err != nil {
		return presence.Aggregate{}, err
	}
	if p.LastSeen, err = msString(w.Ls); err != nil {
		return presence.Aggregate{}, err
	}
	if p.Reason, err = w.reason(); err != nil {
		return presence.Aggregate{}, err
	}
	if p.NextExpected, err = w.nextExpected(); err != nil {
		return presence.Aggregate{}, err
	}
	views := w.views
	if !w.fast && len(w.Ss) > 0 && string(w.Ss) != "{}" {
		if err := json.Unmarshal(w.Ss, &views); err != nil {
			return presence.Aggregate{}, fmt.Errorf("feed sessions: %w", err)
		}
	}
	if len(views) > maxWireSessions {
		return presence.Aggregate{}, fmt.Errorf("feed: %d sessions, at most %d", len(views), maxWireSessions)
	}
	seen := make(map[string]bool, len(views))
	for _, sv := range views {
		if err := validWireSession(sv.ID, sv.N, sv.D); err != nil {
			return presence.Aggregate{}, fmt.Errorf("feed session: %w", err)
		}
		if seen[sv.ID] {
			return presence.Aggregate{}, fmt.Errorf("feed session %q twice", sv.ID)
		}
		seen[sv.ID] = true
		e, err := strconv.ParseUint(sv.E, 10, 64)
		if err != nil {
			return presence.Aggregate{}, fmt.Errorf("feed epoch %q: %w", sv.E, err)
		}
		c, err := msString(sv.C)
		if err != nil {
			return presence.Aggregate{}, err
		}
		if !presence.Status(sv.St).SessionStatus() {
			return presence.Aggregate{}, fmt.Errorf("feed session status %q", sv.St)
		}
		conn, err := sv.conn()
		if err != nil {
			return presence.Aggregate{}, fmt.Errorf("feed session %q: %w", sv.ID, err)
		}
		p.Sessions = append(p.Sessions, presence.SessionView{ID: sv.ID, Epoch: e, Node: sv.N, Device: sv.D, Status: presence.Status(sv.St), ConnectedAt: c, Conn: conn})
	}
	if p.Ended, err = w.ended(); err != nil {
		return presence.Aggregate{}, err
	}
	if p.Privacy, err = w.Pv.privacy(); err != nil {
		return presence.Aggregate{}, err
	}
	return p, nil
}

// reason reads why an offline user went: a valid end reason, on an
// offline change only.
func (w wireChange) reason() (presence.EndReason, error) {
	if w.Rs == "" {
		return "", nil
	}
	if st := presence.Status(w.St); presence.EndReason(w.Rs).Valid() && (st == presence.Offline || st == presence.Dormant) {
		return presence.EndReason(w.Rs), nil
	}
	return "", fmt.Errorf("feed offline reason %q on status %q", w.Rs, w.St)
}

// ended reads the sessions the change ended, in the order they ended.
func (w wireChange) ended() ([]presence.EndedView, error) {
	xs := w.xs
	if !w.fast {
		if len(w.X) == 0 || string(w.X) == "{}" {
			return nil, nil
		}
		if err := json.Unmarshal(w.X, &xs); err != nil {
			return nil, fmt.Errorf("feed ended sessions: %w", err)
		}
	} else if len(xs) == 0 {
		return nil, nil
	}
	if len(xs) > maxWireSessions {
		return nil, fmt.Errorf("feed: %d ended sessions, at most %d", len(xs), maxWireSessions)
	}
	out := make([]presence.EndedView, 0, len(xs))
	for _, x := range xs {
		if err := validWireSession(x.ID, x.N, x.D); err != nil {
			return nil, fmt.Errorf("feed ended session: %w", err)
		}
		e, err := strconv.ParseUint(x.E, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("feed ended epoch %q: %w", x.E, err)
		}
		if !presence.Status(x.St).SessionStatus() {
			return nil, fmt.Errorf("feed ended session status %q", x.St)
		}
		if !presence.EndReason(x.R).Valid() {
			return nil, fmt.Errorf("feed ended session reason %q", x.R)
		}
		c, err := msString(x.C)
		if err != nil {
			return nil, err
		}
		ea, err := msString(x.Ea)
		if err != nil {
			return nil, err
		}
		conn, err := x.conn()
		if err != nil {
			return nil, fmt.Errorf("feed ended session %q: %w", x.ID, err)
		}
		out = append(out, presence.EndedView{
			SessionView: presence.SessionView{ID: x.ID, Epoch: e, Node: x.N, Device: x.D, Status: presence.Status(x.St), ConnectedAt: c, Conn: conn},
			Reason:      presence.EndReason(x.R), EndedAt: ea,
		})
	}
	return out, nil
}

// maxWireSessions is the most sessions a change or a record may list: far
// above presence.max_sessions_per_user times any number of nodes a
// deployment runs, far below what would cost a node to decode.
const maxWireSessions = 4096

// validWireSession checks what Redis says of a session as presenced checks
// it when a client brings it: the session id (the client id), the node id
// and the device label (empty when the session has none).
func validWireSession(id, node, device string) error {
	if err := presence.ValidSessionID(id); err != nil {
		return err
	}
	if err := presence.ValidNode(node); err != nil {
		return err
	}
	if device != "" {
		if err := presence.ValidDevice(device); err != nil {
			return err
		}
	}
	return nil
}

func (w wireSession) session(user string) (presence.Session, error) {
	e, err := strconv.ParseUint(w.E, 10, 64)
	if err != nil {
		return presence.Session{}, fmt.Errorf("session epoch %q: %w", w.E, err)
	}
	if err := validWireSession(w.ID, w.N, w.D); err != nil {
		return presence.Session{}, fmt.Errorf("session of %s: %w", user, err)
	}
	if !validStatus(presence.Status(w.St)) {
		return presence.Session{}, fmt.Errorf("session status %q", w.St)
	}
	if err := presence.ValidText(w.Tx); err != nil {
		return presence.Session{}, fmt.Errorf("session text: %w", err)
	}
	if w.R != "" && !presence.EndReason(w.R).Valid() {
		return presence.Session{}, fmt.Errorf("session end reason %q", w.R)
	}
	conn, err := w.conn()
	if err != nil {
		return presence.Session{}, fmt.Errorf("session of %s: %w", user, err)
	}
	s := presence.Session{
		User: user, ID: w.ID, Epoch: e, Node: w.N, Device: w.D, Status: presence.Status(w.St), Text: w.Tx,
		State: presence.Active, ConnectedAt: msTime(w.C), RenewedAt: msTime(w.Rn), ExpiresAt: msTime(w.X), Conn: conn,
		Expect: msDuration(w.Ex), Margin: msDuration(w.Em),
	}
	if w.R != "" {
		s.EndReason = presence.EndReason(w.R)
		s.State = s.EndReason.State()
		s.EndedAt = msTime(w.Ea)
	}
	return s, nil
}

// decodeUser turns a user's hash (HGETALL) into the record and its current
// aggregate. ok is false for a hash without a committed aggregate.
func decodeUser(user string, h map[string]string) (presence.User, presence.Aggregate, bool, error) {
	u := presence.User{Name: user, Account: presence.Account{Status: presence.Status(h["as"]), Text: h["at"]}, LastWords: h["lw"]}
	if err := presence.ValidUser(user); err != nil {
		return u, presence.Aggregate{}, false, fmt.Errorf("record: %w", err)
	}
	if as := u.Account.Status; as != "" && !as.AccountStatus() {
		return u, presence.Aggregate{}, false, fmt.Errorf("account status %q of %s", as, user)
	}
	if err := presence.ValidText(u.Account.Text); err != nil {
		return u, presence.Aggregate{}, false, fmt.Errorf("account text of %s: %w", user, err)
	}
	if h["v"] == "" {
		return u, presence.Aggregate{}, false, nil
	}
	var views []wireView
	for f, v := range h {
		if len(f) < 2 || f[:2] != "s:" {
			continue
		}
		var ws wireSession
		if err := json.Unmarshal([]byte(v), &ws); err != nil {
			return u, presence.Aggregate{}, false, fmt.Errorf("session %s of %s: %w", f, user, err)
		}
		if ws.ID != f[2:] {
			return u, presence.Aggregate{}, false, fmt.Errorf("session %s of %s holds session %q", f, user, ws.ID)
		}
		s, err := ws.session(user)
		if err != nil {
			return u, presence.Aggregate{}, false, err
		}
		u.Sessions = append(u.Sessions, s)
		views = append(views, wireView{ID: ws.ID, E: ws.E, N: ws.N, D: ws.D, St: ws.St, C: strconv.FormatInt(int64(ws.C), 10), wireConn: ws.wireConn})
	}
	sort.Slice(u.Sessions, func(i, j int) bool { return u.Sessions[i].ID < u.Sessions[j].ID })
	sort.Slice(views, func(i, j int) bool {
		if views[i].C != views[j].C {
			a, _ := strconv.ParseInt(views[i].C, 10, 64)
			b, _ := strconv.ParseInt(views[j].C, 10, 64)
			return a < b
		}
		return views[i].ID < views[j].ID
	})
	ended, err := decodeEnded(h["eh"], h["ended"])
	if err != nil {
		return u, presence.Aggregate{}, false, fmt.Errorf("ended sessions of %s: %w", user, err)
	}
	for _, ws := range ended {
		s, err := ws.session(user)
		if err != nil {
			return u, presence.Aggregate{}, false, err
		}
		u.Ended = append(u.Ended, s)
	}
	ss, _ := json.Marshal(views)
	if len(views) == 0 {
		ss = []byte("[]")
	}
	w := wireChange{U: user, V: h["v"], St: h["st"], Tx: h["tx"], Since: h["since"], Ss: ss, Pv: hashPrivacy(h)}
	if st := presence.Status(h["st"]); st == presence.Offline || st == presence.Dormant {
		w.Ls = h["ls"]
		if len(u.Ended) > 0 { // common.lua's offline_reason
			w.Rs = string(u.Ended[0].EndReason)
		} else {
			w.Rs = h["er"] // the same, when the history was not read (a list)
		}
	}
	if err := decodeDormant(&u, &w, h["dm"]); err != nil {
		return u, presence.Aggregate{}, false, err
	}
	p, err := w.presence()
	if err != nil {
		return u, presence.Aggregate{}, false, err
	}
	u.LastSeen = p.LastSeen
	u.Account.Privacy = p.Privacy
	u.Current = p
	p.Ended = u.RecentlyEnded() // a read reports the last few ended, as the memory store does
	return u, p, true, nil
}

// nodeWirePrefix starts a node announcement on the change feed channel:
// {"nd":<presence.NodeStatus>}. A change (common.lua) never has the key
// "nd", so the two cannot be confused.
const nodeWirePrefix = `{"nd":`

// encodeNode writes a node announcement for the feed channel, as nodes of
// an older version still do during a rolling upgrade (this version records
// them in the node states instead: AnnounceNode); the fuzz test's.
func encodeNode(st presence.NodeStatus) ([]byte, error) {
	b, err := st.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(append([]byte(nodeWirePrefix), b...), '}'), nil
}

// decodeFeed turns a message of the change feed channel into its event: a
// committed change, or a node announcement.
func decodeFeed(b []byte) (Event, error) {
	if !bytes.HasPrefix(b, []byte(nodeWirePrefix)) {
		p, cause, err := decodeChange(b)
		if err != nil {
			return Event{}, err
		}
		return Event{Kind: Changed, Aggregate: p, Cause: cause}, nil
	}
	var w struct {
		ND json.RawMessage `json:"nd"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Event{}, fmt.Errorf("node announcement: %w", err)
	}
	st, err := presence.ParseNodeStatus(w.ND)
	if err != nil {
		return Event{}, err
	}
	return Event{Kind: NodeAnnounced, NodeStatus: st}, nil
}

// decodeEnded reads a record's ended sessions, newest first: eh, one JSON
// session per line (common.lua push_ended), and ended, the JSON list older
// versions kept, merged as common.lua's fold_ended merges them (a rolling
// upgrade may leave both): by end time, each session once, at most
// presence.MaxEnded.
func decodeEnded(lines, list string) ([]wireSession, error) {
	var out []wireSession
	if list != "" && list != "{}" {
		if err := json.Unmarshal([]byte(list), &out); err != nil {
			return nil, err
		}
	}
	if len(out) > maxWireSessions {
		return nil, fmt.Errorf("%d ended sessions", len(out))
	}
	old := len(out)
	for line := range strings.SplitSeq(lines, "\n") {
		if line == "" {
			continue
		}
		if len(out) >= old+maxWireSessions {
			return nil, fmt.Errorf("more than %d ended sessions", maxWireSessions)
		}
		var ws wireSession
		if err := json.Unmarshal([]byte(line), &ws); err != nil {
			return nil, err
		}
		out = append(out, ws)
	}
	if old == 0 || old == len(out) {
		return out, nil
	}
	seen := make(map[[2]string]bool, len(out))
	merged := out[:0:0]
	for _, ws := range out {
		if k := [2]string{ws.ID, ws.E}; !seen[k] {
			seen[k] = true
			merged = append(merged, ws)
		}
	}
	sort.SliceStable(merged, func(i, j int) bool { return merged[i].Ea > merged[j].Ea })
	return merged[:min(len(merged), presence.MaxEnded)], nil
}
