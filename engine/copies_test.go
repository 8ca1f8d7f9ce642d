package engine_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/proto"
)

func TestCopies_TheCopyThatLosesTheOutcomeWriteDoesNotStrandTheWinnersRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		parkAfter time.Duration
	}{
		// The 1 s retry stays a delayed nak of the shared message: an ack
		// of the losing copy would delete it.
		{"retry released with a delayed nak", 3 * time.Second},
		// The 1 s retry is a wake-up: the losing copy stores it again.
		{"retry released as a wake-up", 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testLosingCopy(t, tc.parkAfter)
		})
	}
}

func testLosingCopy(t *testing.T, parkAfter time.Duration) {
	// The engine does not keep its items alive (a replica frozen mid-send),
	// so while the first copy's send is held by the receiver, AckWait passes
	// and the server hands the same message out again. The receiver answers
	// the redelivery 503 at once; only once that attempt is recorded (and its
	// 1 s retry released as a delayed nak) is the first copy's send answered
	// 503 too, so its outcome write loses. The retry must still happen.
	release := make(chan struct{})
	var requests atomic.Int32
	flaky := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch requests.Add(1) {
		case 1:
			select {
			case <-release:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	e := newEnv(t, envOptions{handler: flaky, ackWait: time.Second, timeout: 10 * time.Second,
		beforeRun: engine.StallKeepAlive,
		engine:    func(c *engine.Config) { c.AttemptTimeout, c.ParkAfter = 10*time.Second, parkAfter }})
	sub, _, _ := e.subscribe(t, "/custom/flaky", nil, func(s *admin.Subscription) {
		s.RetryPolicy = &proto.RetryPolicy{MaxRetries: ptr(2), InitialDelayMs: ptr(int64(1000)), BackoffMultiplier: ptr(1.0), MaxDelayMs: ptr(int64(1000))}
	})
	id := e.deliver(t, sub, e.event(), nil)

	waitFor(t, 15*time.Second, "the redelivery's attempt to be recorded", func() bool {
		rec, err := e.store.Delivery(t.Context(), id)
		return err == nil && rec.Status == proto.DeliveryRetrying && rec.Attempts == 1
	})
	if n := requests.Load(); n != 2 {
		t.Fatalf("the receiver got %d requests before the first copy's send was answered, want 2 (the first copy's and the redelivery's)", n)
	}
	close(release)

	rec := e.final(t, id)
	if rec.Status != proto.DeliverySuccess || rec.Attempts != 2 {
		t.Fatalf("record = %s; want SUCCESS after its retry, attempt 2 (one outcome per attempt number)", rec.Raw)
	}
	e.idle(t)
	if n := requests.Load(); n != 3 {
		t.Errorf("the receiver got %d requests, want 3 (two copies of attempt 1, then the retry)", n)
	}
	if s := e.subscription(t, sub); s.ConsecutiveFailures != 0 {
		t.Errorf("consecutive_failures = %d, want 0 after the success", s.ConsecutiveFailures)
	}
}
