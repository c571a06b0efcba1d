package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"unicode"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
)

// Actions are an operator's actions on users (presenced.Plugin implements
// them), behind the admin token: Source.Actions is nil when the API has
// none, and every action then answers 403. by names who asked, for the
// log of the node that acts.
type Actions interface {
	// Kick ends user's live session clientID, or every live session of
	// user when clientID is "", wherever it lives (with Redis the node that
	// holds it does it, epoch-checked: never a newer session with the same
	// client id): DISCONNECT code to an MQTT 5 client, the end reason
	// kicked. It returns how many sessions were asked to end; ErrNotFound
	// when user (or its session clientID) has no live session.
	Kick(ctx context.Context, user, clientID string, code byte, by string) (int, error)
	// SetAccount sets or clears user's account setting (as presence/set
	// with scope account does) and returns the user's presence JSON after
	// it; ErrNotFound for a user never seen.
	SetAccount(ctx context.Context, user string, upd presence.AccountUpdate, by string) ([]byte, error)
	// Forget deletes an offline user's record and every node's retained
	// presence of it; ErrLive while a session is live, ErrNotFound for a
	// user never seen.
	Forget(ctx context.Context, user, by string) error
}

// The errors of Actions that the API answers with their own code.
var (
	ErrNotFound = errors.New("not found")                  // 404
	ErrLive     = errors.New("the user has live sessions") // 409
)

// The actions, as presenced_admin_actions_total{action} names them.
const (
	ActionKick         = "kick"          // one session
	ActionKickUser     = "kick_user"     // every session of a user
	ActionAccountSet   = "account_set"   // PUT account
	ActionAccountClear = "account_clear" // DELETE account
	ActionForget       = "forget"        // DELETE user
	ActionDrain        = "drain"         // POST drain
)

// ActionNames lists the actions in the order of their counts.
var ActionNames = [...]string{ActionKick, ActionKickUser, ActionAccountSet, ActionAccountClear, ActionForget, ActionDrain}

// ActionCounts counts the actions done (answered 2xx) and those refused
// (answered 4xx: a bad name, code or body, nothing to act on), by action;
// the binary reads them as presenced_admin_actions_total{action} and
// presenced_admin_actions_refused_total{action}.
type ActionCounts struct {
	n       [len(ActionNames)]atomic.Int64
	refused [len(ActionNames)]atomic.Int64
}

// Add counts one action answered code.
func (c *ActionCounts) Add(action string, code int) {
	if c == nil {
		return
	}
	for i, a := range ActionNames {
		switch {
		case a != action:
		case code >= 200 && code < 300:
			c.n[i].Add(1)
		case code >= 400 && code < 500:
			c.refused[i].Add(1)
		}
	}
}

// ReadRefused is Read of the refused actions.
func (c *ActionCounts) ReadRefused(emit func(v float64, labels ...string)) {
	if c == nil {
		return
	}
	for i, a := range ActionNames {
		emit(float64(c.refused[i].Load()), a)
	}
}

// Read emits each action's count with its name as the label value (the
// stats.Stat Read of a labelled figure).
func (c *ActionCounts) Read(emit func(v float64, labels ...string)) {
	if c == nil {
		return
	}
	for i, a := range ActionNames {
		emit(float64(c.n[i].Load()), a)
	}
}

// OperatorHeader names who asks, for the log; without it an action is
// logged as the token's ("admin-token").
const OperatorHeader = "X-Presenced-Operator"

// maxOperator bounds the operator's name as logged, in runes.
const maxOperator = 64

// operator returns who asked: the OperatorHeader, its control and format
// characters dropped and cut to maxOperator runes, else "admin-token".
func operator(r *http.Request) string {
	v := r.Header.Get(OperatorHeader)
	var b strings.Builder
	n := 0
	for _, c := range v {
		if n == maxOperator {
			break
		}
		if c == unicode.ReplacementChar || unicode.IsControl(c) || unicode.In(c, unicode.Cf) {
			continue
		}
		b.WriteRune(c)
		n++
	}
	if s := strings.TrimSpace(b.String()); s != "" {
		return s
	}
	return "admin-token"
}

// acted logs an action request once, at info, with who asked and how it
// was answered, and counts it (done, or refused).
func (src Source) acted(r *http.Request, action string, code int, attrs ...any) {
	src.Counts.Add(action, code)
	if src.Log == nil {
		return
	}
	attrs = append([]any{"action", action, "by", operator(r), "remote", r.RemoteAddr, "code", code}, attrs...)
	src.Log.InfoContext(r.Context(), "admin action", attrs...)
}

// actionRoutes serves the actions (see Actions): behind the token (without
// Actions every one answers 403) and, in the binary, behind Site's
// cross-site checks like every write.
func actionRoutes(mux *http.ServeMux, src Source) {
	// act checks what every action needs (Actions, a valid user name),
	// then runs fn, which returns the answer's code and what to log.
	act := func(action string, fn func(w http.ResponseWriter, r *http.Request, user string) (int, []any)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if src.Actions == nil {
				httpError(w, http.StatusForbidden, "actions need admin.token (or admin.token_file)")
				src.acted(r, action, http.StatusForbidden)
				return
			}
			user := r.PathValue("user")
			if err := presence.ValidUser(user); err != nil {
				httpError(w, http.StatusBadRequest, err.Error())
				src.acted(r, action, http.StatusBadRequest, "err", err)
				return
			}
			code, attrs := fn(w, r, user)
			src.acted(r, action, code, append([]any{"user", user}, attrs...)...)
		}
	}
	kick := func(w http.ResponseWriter, r *http.Request, user, id string) (int, []any) {
		var req struct {
			ReasonCode *int `json:"reason_code"`
		}
		if !readOptionalJSON(w, r, &req) {
			return http.StatusBadRequest, nil
		}
		code := int(0x98)
		if req.ReasonCode != nil {
			code = *req.ReasonCode
		}
		if code < 0 || code > 255 {
			code = -1
		}
		if _, ok := hooks.KickCode(byte(code)); !ok || code < 0 {
			httpError(w, http.StatusBadRequest, "reason_code must be one of "+kickCodes())
			return http.StatusBadRequest, nil
		}
		n, err := src.Actions.Kick(r.Context(), user, id, byte(code), operator(r))
		if st := actionError(w, err); st != 0 {
			return st, []any{"client", id, "err", err}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]int{"kicked": n})
		return http.StatusAccepted, []any{"client", id, "reason_code", code, "kicked", n}
	}
	mux.HandleFunc("POST /api/v1/users/{user}/sessions/{client_id}/kick", act(ActionKick, func(w http.ResponseWriter, r *http.Request, user string) (int, []any) {
		id := r.PathValue("client_id")
		if err := presence.ValidSessionID(id); err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return http.StatusBadRequest, nil
		}
		return kick(w, r, user, id)
	}))
	mux.HandleFunc("POST /api/v1/users/{user}/kick", act(ActionKickUser, func(w http.ResponseWriter, r *http.Request, user string) (int, []any) {
		return kick(w, r, user, "")
	}))
	account := func(w http.ResponseWriter, r *http.Request, user string, upd presence.AccountUpdate) (int, []any) {
		payload, err := src.Actions.SetAccount(r.Context(), user, upd, operator(r))
		if st := actionError(w, err); st != 0 {
			return st, []any{"err", err}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(payload)
		return http.StatusOK, []any{"status", deref(upd.Status), "text", deref(upd.Text), "invisible", deref(upd.Invisible), "last_seen", deref(upd.LastSeen)}
	}
	mux.HandleFunc("PUT /api/v1/users/{user}/account", act(ActionAccountSet, func(w http.ResponseWriter, r *http.Request, user string) (int, []any) {
		var req struct {
			Status    *string `json:"status"`
			Text      *string `json:"text"`
			Invisible *bool   `json:"invisible"` // privacy (issue 22): privacyUpdate
			LastSeen  *string `json:"last_seen"`
		}
		if !readJSON(w, r, &req) {
			return http.StatusBadRequest, nil
		}
		upd, err := accountUpdate(req.Status, req.Text)
		if req.Invisible != nil || req.LastSeen != nil {
			if req.Status == nil && req.Text == nil {
				err = nil // privacy alone is an update
			}
			if err == nil {
				err = privacyUpdate(&upd, req.Invisible, req.LastSeen)
			}
		}
		if err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return http.StatusBadRequest, nil
		}
		return account(w, r, user, upd)
	}))
	mux.HandleFunc("DELETE /api/v1/users/{user}/account", act(ActionAccountClear, func(w http.ResponseWriter, r *http.Request, user string) (int, []any) {
		online, empty := presence.Online, ""
		return account(w, r, user, presence.AccountUpdate{Status: &online, Text: &empty})
	}))
	mux.HandleFunc("DELETE /api/v1/users/{user}", act(ActionForget, func(w http.ResponseWriter, r *http.Request, user string) (int, []any) {
		if st := actionError(w, src.Actions.Forget(r.Context(), user, operator(r))); st != 0 {
			return st, nil
		}
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent, nil
	}))
}

// accountUpdate checks a PUT account's body: a status of away, busy or dnd
// (online clears the status), a text (empty clears it); at least one.
func accountUpdate(status, text *string) (presence.AccountUpdate, error) {
	var upd presence.AccountUpdate
	if status == nil && text == nil {
		return upd, errors.New(`give "status" (away, busy, dnd; online clears it), "text", or both`)
	}
	if status != nil {
		s := presence.Status(*status)
		if s != presence.Online && !s.AccountStatus() {
			return upd, fmt.Errorf("status %q: an account status is away, busy or dnd (online clears it; offline is not one: presence shows what the sessions are)", *status)
		}
		upd.Status = &s
	}
	if text != nil {
		if err := presence.ValidText(*text); err != nil {
			return upd, err
		}
		upd.Text = text
	}
	return upd, nil
}

// actionError answers an action's error and returns its code (0 for
// none).
func actionError(w http.ResponseWriter, err error) int {
	var code int
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrLive):
		code = http.StatusConflict
	case errors.Is(err, presence.ErrBadStatus), errors.Is(err, presence.ErrBadPayload), errors.Is(err, presence.ErrBadName):
		code = http.StatusBadRequest
	default:
		code = http.StatusServiceUnavailable
	}
	httpError(w, code, err.Error())
	return code
}

// readOptionalJSON is readJSON for a body that may be empty.
func readOptionalJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		httpError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

// kickCodes lists the reason codes a kick may give.
func kickCodes() string {
	var s []string
	for _, c := range hooks.KickCodes {
		s = append(s, fmt.Sprintf("%d (0x%02X %s)", c.Code, c.Code, c.Reason))
	}
	return strings.Join(s, ", ")
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// privacyUpdate adds a PUT account's privacy keys to upd (issue 22):
// invisible true or false, last_seen exact, quarter or hidden. The status
// and text become optional when one of them is given. DELETE account
// leaves privacy as it is.
func privacyUpdate(upd *presence.AccountUpdate, invisible *bool, lastSeen *string) error {
	if lastSeen != nil {
		m, err := presence.ParseLastSeenMode(*lastSeen)
		if err != nil {
			return err
		}
		upd.LastSeen = &m
	}
	upd.Invisible = invisible
	return nil
}
