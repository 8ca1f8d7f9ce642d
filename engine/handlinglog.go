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
// at a fraction of the cost.
type handlingLog struct {
	base  *slog.Logger
	attrs []any
}

// handlingFields is room for the fields a handling gathers: delivery_id,
// subscription_id, event_id, attempt, trace_id and status_code.
const handlingFields = 12

func newHandlingLog(base *slog.Logger, deliveryID string) handlingLog {
	attrs := make([]any, 2, handlingFields)
	attrs[0], attrs[1] = "delivery_id", deliveryID
	return handlingLog{base: base, attrs: attrs}
}

// with adds fields to every later line of the handling.
func (l *handlingLog) with(args ...any) { l.attrs = append(l.attrs, args...) }

// logger is a slog.Logger with the handling's fields, for code that takes
// one; it costs a derived logger, so it is for lines that are rare.
func (l *handlingLog) logger() *slog.Logger { return l.base.With(l.attrs...) }

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
	r.Add(l.attrs...)
	r.Add(more...)
	r.Add(args...)
	_ = h.Handle(ctx, r)
}
