package store

import (
	"fmt"

	"github.com/presenced/presenced/presence"
)

// wirePrivacy is a user's privacy setting as a change carries it (pv) and
// the record keeps it (pi, pm, pd, pe; store/lua/account.lua): each field
// only when set; absent altogether when it hides nothing.
type wirePrivacy struct {
	I string `json:"i,omitempty"` // "1": invisible
	M string `json:"m,omitempty"` // last_seen mode; "": exact
	D string `json:"d,omitempty"` // while invisible: the offline since others are shown (ms)
	E string `json:"e,omitempty"` // while invisible: the last seen others are shown (ms; "": null)
}

// hashPrivacy reads the privacy fields of a user's hash (nil: none).
func hashPrivacy(h map[string]string) *wirePrivacy {
	w := &wirePrivacy{I: h["pi"], M: h["pm"], D: h["pd"], E: h["pe"]}
	if *w == (wirePrivacy{}) {
		return nil
	}
	return w
}

// privacy checks and decodes w (nil: the zero Privacy). A mode that is not
// one, or a time that is not milliseconds, is an error, as any field of a
// record or change that Redis should not hold.
func (w *wirePrivacy) privacy() (presence.Privacy, error) {
	if w == nil {
		return presence.Privacy{}, nil
	}
	var p presence.Privacy
	switch w.I {
	case "1":
		p.Invisible = true
	case "", "0":
	default:
		return p, fmt.Errorf("privacy: invisible %q", w.I)
	}
	if w.M != "" {
		m, err := presence.ParseLastSeenMode(w.M)
		if err != nil {
			return p, fmt.Errorf("privacy: %w", err)
		}
		if m != presence.LastSeenExact {
			p.LastSeen = m
		}
	}
	if !p.Invisible {
		return p, nil // pd and pe mean nothing while visible
	}
	var err error
	if p.Since, err = msString(w.D); err != nil {
		return presence.Privacy{}, fmt.Errorf("privacy since: %w", err)
	}
	if p.Seen, err = msString(w.E); err != nil {
		return presence.Privacy{}, fmt.Errorf("privacy last seen: %w", err)
	}
	return p, nil
}

// lastSeenArg is account.lua's last_seen mode argument: "" for exact.
func lastSeenArg(m *presence.LastSeenMode) string {
	if m == nil || *m == presence.LastSeenExact {
		return ""
	}
	return string(*m)
}
