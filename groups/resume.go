package groups

import (
	"encoding/json"
	"slices"
	"sync/atomic"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// ResumeProperty is the MQTT 5 user property of a SUBSCRIBE to
// presence/groups/{group} that names the group version the client holds:
// it is then sent what it missed since (one delta), or the snapshot, never
// the retained snapshot as well.
const ResumeProperty = "version"

// ResumeStats are the resumes' counts, read with atomic loads.
type ResumeStats struct {
	Resumed atomic.Int64 // resumes sent one delta from the log
	Current atomic.Int64 // resumes that held the current version: sent nothing
	// Fallbacks to the snapshot, by cause (roster.Causes), and resumes
	// refused: several group filters in one SUBSCRIBE (ambiguous).
	Fallback  [4]atomic.Int64
	Ambiguous atomic.Int64
	// Replies in raw DEFLATE (EncodingProperty), the bytes they saved
	// against the plain JSON, and resumes with an encoding not known
	// (sent plain JSON).
	Deflated        atomic.Int64
	DeflateSaved    atomic.Int64
	UnknownEncoding atomic.Int64
}

// fallback counts a fallback to the snapshot.
func (r *ResumeStats) fallback(c roster.Cause) {
	if i := slices.Index(roster.Causes, c); i >= 0 {
		r.Fallback[i].Add(1)
	}
}

// Fallbacks returns the fallbacks to the snapshot for cause.
func (r *ResumeStats) Fallbacks(c roster.Cause) int64 {
	if i := slices.Index(roster.Causes, c); i >= 0 {
		return r.Fallback[i].Load()
	}
	return 0
}

// LogStats is the size of this node's log of batches (resume).
func (s *Stage) LogStats() roster.LogStats { return s.dlog.Stats() }

// ask is what a SUBSCRIBE asks of a resume.
type ask int

const (
	askNone      ask = iota // no version property (or MQTT 3.1.1, which has none)
	askAmbiguous            // the property, with several group filters
	askGarbage              // the property is not a version
	askResume               // a resume of one group from a version
)

// encoding is how a resume's reply is encoded.
type encoding int

const (
	encPlain   encoding = iota // JSON, as every group message
	encDeflate                 // raw DEFLATE of the JSON (EncodingDeflate)
	encUnknown                 // an encoding property not known: plain JSON
)

// resumeEncoding reads a SUBSCRIBE's encoding property (the last one).
func resumeEncoding(pk packets.Packet) encoding {
	e := encPlain
	for _, p := range pk.Properties.User {
		if p.Key == EncodingProperty {
			e = encUnknown
			if p.Val == EncodingDeflate {
				e = encDeflate
			}
		}
	}
	return e
}

// resumeAsk reads a SUBSCRIBE's resume: the version property and the
// SUBSCRIBE's one exact presence/groups/{group} filter (its index).
func (s *Stage) resumeAsk(cl *mqtt.Client, pk packets.Packet) (i int, group string, held uint64, a ask) {
	if cl.Properties.ProtocolVersion < 5 {
		return 0, "", 0, askNone
	}
	raw, asked := "", false
	for _, p := range pk.Properties.User {
		if p.Key == ResumeProperty {
			raw, asked = p.Val, true
		}
	}
	if !asked {
		return 0, "", 0, askNone
	}
	n := 0
	for j, f := range pk.Filters {
		if g, ok := s.groupFilter(f.Filter); ok {
			i, group = j, g
			n++
		}
	}
	switch {
	case n == 0:
		return 0, "", 0, askNone
	case n > 1:
		return 0, "", 0, askAmbiguous
	}
	held, ok := roster.ParseVersion(raw)
	if !ok {
		return 0, "", 0, askGarbage
	}
	return i, group, held, askResume
}

// AskResume is the Hook's, on a SUBSCRIBE (before mochi checks and indexes
// its filters): a resume with a valid version has its group filter's
// retain handling set to 2, so that mochi does not send the retained
// snapshot; the stage sends what the subscriber needs instead (Resumed).
// A garbage version is counted, and the filter left as it is: the
// subscriber gets the retained snapshot, as without the property; so does
// a SUBSCRIBE with several group filters (the version would be ambiguous).
func (s *Stage) AskResume(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	i, _, _, a := s.resumeAsk(cl, pk)
	if a != askNone && resumeEncoding(pk) == encUnknown {
		s.Resumes.UnknownEncoding.Add(1)
	}
	switch a {
	case askNone:
		return pk
	case askAmbiguous:
		s.Resumes.Ambiguous.Add(1)
		return pk
	case askGarbage:
		s.Resumes.fallback(roster.CauseGarbage)
		return pk
	}
	pk.Filters = slices.Clone(pk.Filters)
	pk.Filters[i].RetainHandling = 2 // [MQTT-3.3.1-11]: no retained message on this subscribe
	return pk
}

// Resumed is the Hook's, after mochi indexed the SUBSCRIBE's filters and
// before the delivery lets go of the fence for reading (so no batch is
// published in between): a granted resume is recorded, and served in one
// step of the fence, before any later batch of the group (serveResumes).
func (s *Stage) Resumed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	i, group, held, a := s.resumeAsk(cl, pk)
	if a != askResume || i < len(codes) && codes[i] >= 0x80 {
		return
	}
	if presence.ValidGroup(group) != nil || !s.index.Has(group) {
		return
	}
	if viewer, service := s.o.Viewer(cl); !service {
		if rule := s.SeesGroup(); rule != nil && !rule(viewer, group) {
			return
		}
	}
	s.topicMu.Lock()
	if s.resumes[group] == nil {
		s.resumes[group] = make(map[*mqtt.Client]resumeAt)
	}
	s.resumes[group][cl] = resumeAt{held: held, deflate: resumeEncoding(pk) == encDeflate}
	s.topicMu.Unlock()
	wake(s.resumeWake)
}

// resumeAt is a resume waiting: the version held, and whether its reply
// is to be sent in raw DEFLATE.
type resumeAt struct {
	held    uint64
	deflate bool
}

// Gone forgets what a connection that closed asked (the Hook's
// OnDisconnect).
func (s *Stage) Gone(cl *mqtt.Client) {
	s.topicMu.Lock()
	for g, m := range s.resumes {
		delete(m, cl)
		if len(m) == 0 {
			delete(s.resumes, g)
		}
	}
	s.topicMu.Unlock()
}

// serveAllResumes serves every resume waiting (the resume worker).
func (s *Stage) serveAllResumes() error {
	s.topicMu.Lock()
	groups := make([]string, 0, len(s.resumes))
	for g := range s.resumes {
		groups = append(groups, g)
	}
	s.topicMu.Unlock()
	for _, g := range groups {
		s.step(func(t Topics) { s.serveResumes(t, g) })
	}
	return nil
}

// deflated is a reply in raw DEFLATE, ok when smaller than the JSON.
type deflated struct {
	b  []byte
	ok bool
}

func deflateReply(b []byte) *deflated {
	z, ok := deflate(b)
	return &deflated{b: z, ok: ok}
}

// serveResumes sends each resume waiting on group what it needs, as of the
// version the node holds, to that subscriber only (Topics.Send): nothing,
// one delta from the log, or the snapshot. Inside step, before any batch
// of the group is published: the subscriber then gets the batches after
// it, with no gap and no duplicate. Resumes of a group not held yet (its
// snapshot is being read) wait for it.
func (s *Stage) serveResumes(t Topics, group string) []*mqtt.Client {
	waiting := s.resumes[group]
	if len(waiting) == 0 {
		return nil
	}
	snap, ok := s.mirror.Get(group)
	if !ok || snap.Version == 0 {
		return nil
	}
	delete(s.resumes, group)
	topic := s.topics + group
	var snapJSON []byte
	var snapDeflated *deflated // the snapshot compressed once for all who fall back to it
	served := make([]*mqtt.Client, 0, len(waiting))
	for cl, r := range waiting {
		if cl.Closed() {
			continue
		}
		served = append(served, cl)
		d, out, cause := s.dlog.Resume(group, r.held, snap.Version)
		snapshot := false
		var payload []byte
		switch out {
		case roster.SendNothing:
			s.Resumes.Current.Add(1)
			continue
		case roster.SendDelta:
			s.Resumes.Resumed.Add(1)
			b, err := json.Marshal(d)
			if err != nil {
				s.o.Log.Error("group resume", "err", err, "group", group)
				continue
			}
			payload = b
		default:
			s.Resumes.fallback(cause)
			if snapJSON == nil {
				b, err := json.Marshal(snap)
				if err != nil {
					s.o.Log.Error("group snapshot", "err", err, "group", group)
					continue
				}
				snapJSON = b
			}
			payload = snapJSON
			snapshot = true
		}
		var props packets.Properties
		if r.deflate && s.o.Addressed {
			var z *deflated
			if snapshot {
				if snapDeflated == nil {
					snapDeflated = deflateReply(payload)
				}
				z = snapDeflated
			} else {
				z = deflateReply(payload)
			}
			if z.ok {
				s.Resumes.Deflated.Add(1)
				s.Resumes.DeflateSaved.Add(int64(len(payload) - len(z.b)))
				payload, props = z.b, deflatedProps()
			}
		}
		if err := t.Send(topic, []*mqtt.Client{cl}, payload, props); err != nil {
			s.o.Log.Warn("group resume not sent", "err", err, "group", group)
		}
	}
	return served
}
