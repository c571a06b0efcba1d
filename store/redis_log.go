package store

import (
	"context"
	"fmt"
	"log/slog"
)

// RedisLogger is go-redis's logger (redis.SetLogger, a process-wide
// setting, which a program makes once) writing to log at debug level: the
// Redis store logs an outage itself, once, at warn, with its length when it
// ends; go-redis's own lines (several a second while a server is down) are
// detail. Through log they take the program's format: JSON in JSON mode.
func RedisLogger(log *slog.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	return redisLogger{log}
}

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.DebugContext(ctx, fmt.Sprintf(format, v...))
	}
}
