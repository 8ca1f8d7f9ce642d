package engine

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// handlingLog is a handling's logger. The fields that name the delivery
// (its id, then its subscription and event, the attempt, the trace, the
// status code) are gathered as the handling learns them and given to each
// line it writes. Deriving a logger per field instead (slog.Logger.With)
// clones the handler and formats the fields every time, four times per
// delivered delivery (five after a failed send), for the one line most
// deliveries write; this writes the same lines, fields in the same order,
// at a fraction of the cost. The fields are kept typed, not as []any, so a
// handling whose lines are below the handler's level allocates nothing for
// them (a string in an interface is an allocation of its own).
type handlingLog struct {
	base                                      *slog.Logger
	deliveryID, subscriptionID, eventID       string
	traceID                                   string
	attempt, statusCode                       int
	hasRoute, hasAttempt, hasTrace, hasStatus bool
}

func newHandlingLog(base *slog.Logger, deliveryID string) handlingLog {
	return handlingLog{base: base, deliveryID: deliveryID}
}

// The fields, each added to every later line of the handling.
func (l *handlingLog) withRoute(subscriptionID, eventID string) {
	l.subscriptionID, l.eventID, l.hasRoute = subscriptionID, eventID, true
}
func (l *handlingLog) withAttempt(n int)        { l.attempt, l.hasAttempt = n, true }
func (l *handlingLog) withTrace(traceID string) { l.traceID, l.hasTrace = traceID, true }
func (l *handlingLog) withStatusCode(code int)  { l.statusCode, l.hasStatus = code, true }

// attrs are the handling's fields in the order it learns them.
func (l *handlingLog) attrs() []slog.Attr {
	out := make([]slog.Attr, 0, 6)
	out = append(out, slog.String("delivery_id", l.deliveryID))
	if l.hasRoute {
		out = append(out, slog.String("subscription_id", l.subscriptionID), slog.String("event_id", l.eventID))
	}
	if l.hasAttempt {
		out = append(out, slog.Int("attempt", l.attempt))
	}
	if l.hasTrace {
		out = append(out, slog.String("trace_id", l.traceID))
	}
	if l.hasStatus {
		out = append(out, slog.Int("status_code", l.statusCode))
	}
	return out
}

// logger is a slog.Logger with the handling's fields, for code that takes
// one; it costs a derived logger, so it is for lines that are rare.
func (l *handlingLog) logger() *slog.Logger {
	attrs := l.attrs()
	args := make([]any, len(attrs))
	for i, a := range attrs {
		args[i] = a
	}
	return l.base.With(args...)
}

// enabled reports whether a line at level would be written: a caller that
// builds a line's fields checks it first.
func (l *handlingLog) enabled(ctx context.Context, level slog.Level) bool {
	if ctx == nil {
		ctx = context.Background()
	}
	return l.base.Handler().Enabled(ctx, level)
}

func (l *handlingLog) Debug(msg string, args ...any) {
	l.log(context.Background(), slog.LevelDebug, msg, nil, args)
}

func (l *handlingLog) Info(msg string, args ...any) {
	l.log(context.Background(), slog.LevelInfo, msg, nil, args)
}

func (l *handlingLog) Warn(msg string, args ...any) {
	l.log(context.Background(), slog.LevelWarn, msg, nil, args)
}

func (l *handlingLog) Error(msg string, args ...any) {
	l.log(context.Background(), slog.LevelError, msg, nil, args)
}

// Log writes a line at level with the handling's fields, then more (fields
// of this line only), then args.
func (l *handlingLog) Log(ctx context.Context, level slog.Level, msg string, more []any, args ...any) {
	l.log(ctx, level, msg, more, args)
}

// log is every method's one body, so that the source a handler records
// (HandlerOptions.AddSource) is the method's caller, as slog.Logger's own.
func (l *handlingLog) log(ctx context.Context, level slog.Level, msg string, more, args []any) {
	if ctx == nil {
		ctx = context.Background() // as slog.Logger does
	}
	h := l.base.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // runtime.Callers, log, the method
	r := slog.NewRecord(time.Now(), level, msg, pcs[0])
	r.AddAttrs(l.attrs()...)
	r.Add(more...)
	r.Add(args...)
	_ = h.Handle(ctx, r)
}
