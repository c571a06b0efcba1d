package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// logTimeFormat is RFC 3339 with milliseconds; times are written in UTC.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// NewLogger builds the process logger. format: json|console. level:
// debug|info|warn|error.
//
// It returns a zerolog.Logger and an *slog.Logger whose records go through
// the same writer, format and level (mochi logs through the slog one; tag it
// with .With("component", "mochi")). Every record carries a "time" field in
// UTC, RFC 3339 with milliseconds. Writes to w are serialised.
//
// NewLogger sets no zerolog globals.
func NewLogger(w io.Writer, level, format string) (zerolog.Logger, *slog.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return zerolog.Nop(), nil, err
	}
	var out io.Writer
	switch format {
	case "json":
		out = zerolog.SyncWriter(w)
	case "console":
		out = zerolog.ConsoleWriter{
			Out:          zerolog.SyncWriter(w),
			NoColor:      !isTerminal(w),
			TimeFormat:   logTimeFormat,
			TimeLocation: time.UTC,
		}
	default:
		return zerolog.Nop(), nil, fmt.Errorf("log format %q: want json or console", format)
	}

	// base has no timestamp: the slog handler writes each record's own time.
	base := zerolog.New(out).Level(lvl)
	zl := base.Hook(timestampHook{})
	return zl, slog.New(&slogHandler{zl: base}), nil
}

func parseLevel(s string) (zerolog.Level, error) {
	switch s {
	case "debug":
		return zerolog.DebugLevel, nil
	case "info":
		return zerolog.InfoLevel, nil
	case "warn":
		return zerolog.WarnLevel, nil
	case "error":
		return zerolog.ErrorLevel, nil
	}
	return zerolog.NoLevel, fmt.Errorf("log level %q: want debug, info, warn or error", s)
}

// isTerminal reports whether w is a character device, so console output
// gets colour only on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// timestampHook adds the time to every zerolog event without touching
// zerolog.TimeFieldFormat or zerolog.TimestampFunc, which are globals.
type timestampHook struct{}

func (timestampHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, formatTime(time.Now()))
}

func formatTime(t time.Time) string { return t.UTC().Format(logTimeFormat) }

// slogHandler is an slog.Handler that writes through a zerolog.Logger. It
// is immutable: WithAttrs and WithGroup return new handlers.
type slogHandler struct {
	zl zerolog.Logger
	// goas holds, in call order, the attrs added by WithAttrs and the groups
	// opened by WithGroup; each group nests everything after it.
	goas []groupOrAttrs
}

// groupOrAttrs is one WithGroup (group != "") or one WithAttrs call.
type groupOrAttrs struct {
	group string
	attrs []slog.Attr
}

var _ slog.Handler = (*slogHandler)(nil)

// zerologLevel maps slog levels, which are integers with gaps, onto zerolog's.
func zerologLevel(l slog.Level) zerolog.Level {
	switch {
	case l < slog.LevelDebug:
		return zerolog.TraceLevel
	case l < slog.LevelInfo:
		return zerolog.DebugLevel
	case l < slog.LevelWarn:
		return zerolog.InfoLevel
	case l < slog.LevelError:
		return zerolog.WarnLevel
	}
	return zerolog.ErrorLevel
}

func (h *slogHandler) Enabled(_ context.Context, l slog.Level) bool {
	lvl := zerologLevel(l)
	return lvl >= h.zl.GetLevel() && lvl >= zerolog.GlobalLevel()
}

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	e := h.zl.WithLevel(zerologLevel(r.Level))
	if e == nil {
		return nil
	}
	if !r.Time.IsZero() {
		e.Str(zerolog.TimestampFieldName, formatTime(r.Time))
	}
	var recAttrs []slog.Attr
	if r.NumAttrs() > 0 {
		recAttrs = make([]slog.Attr, 0, r.NumAttrs())
		r.Attrs(func(a slog.Attr) bool {
			recAttrs = append(recAttrs, a)
			return true
		})
	}
	addScoped(e, h.goas, recAttrs)
	e.Msg(r.Message)
	return nil
}

// addScoped writes the handler's attrs and groups, then the record's attrs
// inside the innermost group. A group with nothing in it is left out.
func addScoped(e *zerolog.Event, goas []groupOrAttrs, recAttrs []slog.Attr) {
	for i, g := range goas {
		if g.group == "" {
			addAttrs(e, g.attrs)
			continue
		}
		if !anyAttrs(goas[i+1:], recAttrs) {
			return
		}
		d := e.CreateDict()
		addScoped(d, goas[i+1:], recAttrs)
		e.Dict(g.group, d)
		return
	}
	addAttrs(e, recAttrs)
}

// anyAttrs reports whether anything would be written inside a group.
func anyAttrs(goas []groupOrAttrs, recAttrs []slog.Attr) bool {
	if hasAttrs(recAttrs) {
		return true
	}
	for _, g := range goas {
		if hasAttrs(g.attrs) {
			return true
		}
	}
	return false
}

func hasAttrs(attrs []slog.Attr) bool {
	for _, a := range attrs {
		if !isEmpty(a) {
			return true
		}
	}
	return false
}

// isEmpty reports an attr that slog says to drop: the zero Attr, or a group
// with nothing in it.
func isEmpty(a slog.Attr) bool {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		return !hasAttrs(v.Group())
	}
	return a.Key == "" && v.Any() == nil
}

func addAttrs(e *zerolog.Event, attrs []slog.Attr) {
	for _, a := range attrs {
		addAttr(e, a)
	}
}

func addAttr(e *zerolog.Event, a slog.Attr) {
	v := a.Value.Resolve()
	if isEmpty(slog.Attr{Key: a.Key, Value: v}) {
		return
	}
	switch v.Kind() {
	case slog.KindGroup:
		if a.Key == "" { // inline the group's attrs
			addAttrs(e, v.Group())
			return
		}
		d := e.CreateDict()
		addAttrs(d, v.Group())
		e.Dict(a.Key, d)
	case slog.KindString:
		e.Str(a.Key, v.String())
	case slog.KindInt64:
		e.Int64(a.Key, v.Int64())
	case slog.KindUint64:
		e.Uint64(a.Key, v.Uint64())
	case slog.KindFloat64:
		e.Float64(a.Key, v.Float64())
	case slog.KindBool:
		e.Bool(a.Key, v.Bool())
	case slog.KindDuration:
		// Every duration field names its unit: milliseconds, as a number.
		e.Float64(msKey(a.Key), float64(v.Duration())/float64(time.Millisecond))
	case slog.KindTime:
		e.Str(a.Key, formatTime(v.Time()))
	default:
		switch x := v.Any().(type) {
		case error:
			e.AnErr(a.Key, x)
		case fmt.Stringer:
			e.Stringer(a.Key, x)
		default:
			e.Interface(a.Key, x)
		}
	}
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(groupOrAttrs{attrs: attrs})
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(groupOrAttrs{group: name})
}

func (h *slogHandler) with(g groupOrAttrs) *slogHandler {
	goas := make([]groupOrAttrs, len(h.goas), len(h.goas)+1)
	copy(goas, h.goas)
	return &slogHandler{zl: h.zl, goas: append(goas, g)}
}

// msKey is the name of a duration field in milliseconds: key with "_ms"
// unless it ends so already.
func msKey(key string) string {
	if strings.HasSuffix(key, "_ms") {
		return key
	}
	return key + "_ms"
}
