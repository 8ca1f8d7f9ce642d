package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/proto"
)

// sendWaits keeps the sends an Observer is told about.
type sendWaits struct {
	mu    sync.Mutex
	sends []engine.Send
}

func (s *sendWaits) Sending(engine.Labels)         {}
func (s *sendWaits) Decided(engine.Decision)       {}
func (s *sendWaits) PayloadInvalid(string, string) {}
func (s *sendWaits) Sent(_ engine.Labels, send engine.Send) {
	s.mu.Lock()
	s.sends = append(s.sends, send)
	s.mu.Unlock()
}

func (s *sendWaits) all() []engine.Send {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]engine.Send(nil), s.sends...)
}

// A send reports the time before it by stage (jetrelay_send_wait_seconds):
// a work item stored while no replica ran waited in the stream at least
// until one started, and its handling's reads and decisions took a time
// of their own, between the replica's start and the outcome.
func TestSendWait_ASendReportsHowLongItsItemWaitedAndHowLongItsHandlingTook(t *testing.T) {
	t.Parallel()
	waits := &sendWaits{}
	e := newEnv(t, envOptions{engine: func(c *engine.Config) { c.Observer = waits }})
	ctx := context.Background()
	e.stopEngine()
	sub, _, _ := e.subscribe(t, "/ok", receiver.Healthy(), nil)
	id := e.deliver(t, sub, e.event(), nil)
	var stored time.Time
	waitFor(t, 10*time.Second, "the work item in the stream", func() bool {
		stream, err := e.js.Stream(ctx, e.qc.Stream)
		if err != nil {
			return false
		}
		m, err := stream.GetLastMsgForSubject(ctx, e.qc.Subject)
		if err != nil {
			return false
		}
		stored = m.Time
		return true
	})

	next := e.newEngine(t)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	resumed := time.Now()
	go func() {
		if err := next.Run(rctx); err != nil {
			t.Errorf("engine.Run: %v", err)
		}
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
		t.Fatalf("record = %s; want SUCCESS", rec.Raw)
	}
	finished := time.Now()
	sends := waits.all()
	if len(sends) != 1 {
		t.Fatalf("sends reported = %+v, want the one", sends)
	}
	s := sends[0]
	if least, most := resumed.Sub(stored), finished.Sub(stored); s.Queued < least || s.Queued > most {
		t.Errorf("Queued = %v, want at least the %v the item sat in the stream before a replica ran and at most the %v until its outcome", s.Queued, least, most)
	}
	if most := finished.Sub(resumed); s.Prepared <= 0 || s.Prepared > most {
		t.Errorf("Prepared = %v, want the handling's own time: above 0, within the %v from the replica's start to the outcome", s.Prepared, most)
	}
}
