package admin

import (
	"bytes"
	"context"
	"testing"

	"github.com/presenced/presenced/presence"
)

// privacyActions records the account updates it is given.
type privacyActions struct {
	fakeActions
	upds []presence.AccountUpdate
}

func (f *privacyActions) SetAccount(ctx context.Context, user string, upd presence.AccountUpdate, by string) ([]byte, error) {
	f.upds = append(f.upds, upd)
	return f.fakeActions.SetAccount(ctx, user, upd, by)
}

// PUT account takes the privacy keys (issue 22), alone or with a status
// and text, and refuses what is no setting.
func TestAccountPrivacy(t *testing.T) {
	f := &privacyActions{}
	var log bytes.Buffer
	src := actionSource(f, &log)
	h := Handler(src)
	for _, c := range []struct {
		body      string
		code      int
		invisible *bool
		lastSeen  *presence.LastSeenMode
	}{
		{`{"invisible":true}`, 200, ptrTo(true), nil},
		{`{"last_seen":"quarter"}`, 200, nil, ptrTo(presence.LastSeenQuarter)},
		{`{"invisible":false,"last_seen":"hidden","status":"busy"}`, 200, ptrTo(false), ptrTo(presence.LastSeenHidden)},
		{`{"last_seen":"fuzzy"}`, 400, nil, nil},
		{`{"last_seen":""}`, 400, nil, nil},
		{`{"invisible":"yes"}`, 400, nil, nil},
		{`{"invisible":true,"status":"offline"}`, 400, nil, nil},
		{`{"invisible":true,"text":"a\u202eb"}`, 400, nil, nil},
	} {
		n := len(f.upds)
		w := send(h, "PUT", "/api/v1/users/alice/account", c.body, "Authorization", "Bearer s3cret")
		if w.Code != c.code {
			t.Fatalf("%s: %d %s, want %d", c.body, w.Code, w.Body.String(), c.code)
		}
		if c.code != 200 {
			if len(f.upds) != n {
				t.Fatalf("%s: reached the action", c.body)
			}
			continue
		}
		upd := f.upds[len(f.upds)-1]
		if !eqp(upd.Invisible, c.invisible) || !eqp(upd.LastSeen, c.lastSeen) {
			t.Fatalf("%s: update %+v", c.body, upd)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func eqp[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
