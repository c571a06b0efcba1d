package presenced

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/rs/zerolog"
)

// slogLogger returns a zerolog logger whose events go to l, the program's
// slog logger (mochi's Options.Logger), at the levels l enables. presenced
// logs through zerolog; an embedding program sees one log.
func slogLogger(l *slog.Logger) zerolog.Logger {
	if l == nil {
		return zerolog.Nop()
	}
	level := zerolog.Disabled
	ctx := context.Background()
	for _, c := range []struct {
		s slog.Level
		z zerolog.Level
	}{{slog.LevelError, zerolog.ErrorLevel}, {slog.LevelWarn, zerolog.WarnLevel}, {slog.LevelInfo, zerolog.InfoLevel}, {slog.LevelDebug, zerolog.DebugLevel}} {
		if l.Enabled(ctx, c.s) {
			level = c.z
		}
	}
	return zerolog.New(slogWriter{l}).Level(level)
}

// slogWriter turns each zerolog JSON event into one slog record.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	var fields map[string]any
	if err := json.Unmarshal(p, &fields); err != nil {
		w.l.Error("undecodable log event", "event", string(p))
		return len(p), nil
	}
	level := slog.LevelInfo
	switch fields[zerolog.LevelFieldName] {
	case "debug", "trace":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error", "fatal", "panic":
		level = slog.LevelError
	}
	msg, _ := fields[zerolog.MessageFieldName].(string)
	delete(fields, zerolog.LevelFieldName)
	delete(fields, zerolog.MessageFieldName)
	r := slog.NewRecord(time.Now(), level, msg, 0)
	for k, v := range fields {
		r.AddAttrs(slog.Any(k, v))
	}
	_ = w.l.Handler().Handle(context.Background(), r)
	return len(p), nil
}
