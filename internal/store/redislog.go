package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RouteRedisLogs sends go-redis's own log lines (pool and reconnect
// warnings, which it otherwise prints unstructured to stderr) through log
// at warn level with component=redis. go-redis has one process-wide
// logger, so the binary calls this once at start.
func RouteRedisLogs(log *slog.Logger) {
	redis.SetLogger(redisLogger{log.With("component", "redis")})
}

// redisLogger adapts slog to go-redis's internal.Logging interface.
type redisLogger struct{ log *slog.Logger }

// Printf logs one go-redis message.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
