package natsserver

import (
	"context"
	"fmt"
	"log/slog"
)

// slogAdapter routes nats-server's printf-style logger into slog. Notices go
// to debug: the server prints a banner of them on every start.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) log(level slog.Level, format string, v []any) {
	if !a.l.Enabled(context.Background(), level) {
		return
	}
	a.l.Log(context.Background(), level, fmt.Sprintf(format, v...), "component", "nats-server")
}

func (a slogAdapter) Noticef(format string, v ...any) { a.log(slog.LevelDebug, format, v) }
func (a slogAdapter) Warnf(format string, v ...any)   { a.log(slog.LevelWarn, format, v) }
func (a slogAdapter) Fatalf(format string, v ...any)  { a.log(slog.LevelError, format, v) }
func (a slogAdapter) Errorf(format string, v ...any)  { a.log(slog.LevelError, format, v) }
func (a slogAdapter) Debugf(format string, v ...any)  { a.log(slog.LevelDebug, format, v) }
func (a slogAdapter) Tracef(format string, v ...any)  { a.log(slog.LevelDebug, format, v) }
