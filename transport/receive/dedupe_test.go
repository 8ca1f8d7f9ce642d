package receive_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/transport/receive"
	"github.com/jetrelay/jetrelay/transport/receive/redisstore"
)

func TestDedupeMiddleware_AnswersADuplicate200WithoutCallingTheHandlerAgain(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			h := &recordingHandler{}
			srv := newVerifier(t).Middleware(receive.NewDeduper(store).Middleware(h))
			for i := range 3 {
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, signedRequest(newSecret, "evt-dup-"+name, eventBody))
				if w.Code != http.StatusOK {
					t.Fatalf("delivery %d answered %d, want 200", i+1, w.Code)
				}
			}
			if h.calls != 1 {
				t.Fatalf("handler ran %d times for one event delivered three times, want 1", h.calls)
			}
		})
	}
}

func TestDedupeMiddleware_ProcessesTheRetryAfterTheHandlerFailed(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			h := &recordingHandler{status: http.StatusInternalServerError}
			srv := receive.NewDeduper(store).Middleware(h)
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, signedRequest(newSecret, "evt-fail-"+name, eventBody))
			if w.Code != http.StatusInternalServerError {
				t.Fatalf("first delivery answered %d, want the handler's 500", w.Code)
			}
			h.status = 0
			w = httptest.NewRecorder()
			srv.ServeHTTP(w, signedRequest(newSecret, "evt-fail-"+name, eventBody))
			if w.Code != http.StatusOK || h.calls != 2 {
				t.Fatalf("retry: status %d, handler calls %d; want 200 and 2 (the failed claim must be released)", w.Code, h.calls)
			}
		})
	}
}

func TestDedupeMiddleware_ReleasesTheClaimWhenTheHandlerPanics(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			d := receive.NewDeduper(store)
			func() {
				defer func() { _ = recover() }()
				d.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })).
					ServeHTTP(httptest.NewRecorder(), signedRequest(newSecret, "evt-panic-"+name, eventBody))
			}()
			h := &recordingHandler{}
			w := httptest.NewRecorder()
			d.Middleware(h).ServeHTTP(w, signedRequest(newSecret, "evt-panic-"+name, eventBody))
			if w.Code != http.StatusOK || h.calls != 1 {
				t.Fatalf("retry after a panic: status %d, handler calls %d; want 200 and 1", w.Code, h.calls)
			}
		})
	}
}

func TestDedupeMiddleware_AsksForALaterRetryWhileTheSameEventIsBeingHandled(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			srv := receive.NewDeduper(store).Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				close(entered)
				<-release
			}))
			first := httptest.NewRecorder()
			var wg sync.WaitGroup
			wg.Go(func() { srv.ServeHTTP(first, signedRequest(newSecret, "evt-busy-"+name, eventBody)) })
			<-entered
			second := httptest.NewRecorder()
			srv.ServeHTTP(second, signedRequest(newSecret, "evt-busy-"+name, eventBody))
			close(release)
			wg.Wait()
			if second.Code != http.StatusServiceUnavailable || second.Header().Get("Retry-After") == "" {
				t.Fatalf("concurrent duplicate answered %d (Retry-After %q), want 503 with Retry-After", second.Code, second.Header().Get("Retry-After"))
			}
			if first.Code != http.StatusOK {
				t.Fatalf("first delivery answered %d, want 200", first.Code)
			}
		})
	}
}

func TestDeduper_TakesOverAClaimWhoseLeaseExpired(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			// A receiver that crashed mid-handler: its claim is never
			// completed nor released.
			if st, err := store.Claim(ctx, "evt-crash-"+name, "crashed-claim", 200*time.Millisecond); err != nil || st != receive.Claimed {
				t.Fatalf("first claim: %v, %v", st, err)
			}
			d := receive.NewDeduper(store)
			var ran atomic.Int32
			deadline := time.Now().Add(30 * time.Second)
			for {
				out, err := d.Do(ctx, "evt-crash-"+name, func(context.Context) error { ran.Add(1); return nil })
				if err != nil {
					t.Fatal(err)
				}
				if out == receive.Processed {
					break
				}
				if out != receive.Busy || time.Now().After(deadline) {
					t.Fatalf("outcome %v while the crashed claim should expire", out)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if out, _ := d.Do(ctx, "evt-crash-"+name, func(context.Context) error { ran.Add(1); return nil }); out != receive.Duplicate || ran.Load() != 1 {
				t.Fatalf("after the takeover: outcome %v, runs %d; want duplicate and 1", out, ran.Load())
			}
		})
	}
}

func TestDeduper_RunsAnEventOnceUnderConcurrentDeliveries(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			d := receive.NewDeduper(store)
			var ran atomic.Int32
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() {
					_, _ = d.Do(context.Background(), "evt-race-"+name, func(context.Context) error { ran.Add(1); return nil })
				})
			}
			wg.Wait()
			if ran.Load() != 1 {
				t.Fatalf("20 concurrent deliveries ran the handler %d times, want 1", ran.Load())
			}
		})
	}
}

func TestDeduper_RefusesAMissingEventID(t *testing.T) {
	_, err := receive.NewDeduper(receive.NewMemoryStore(0)).Do(context.Background(), "", func(context.Context) error { return nil })
	if !errors.Is(err, receive.ErrNoEventID) {
		t.Fatalf("got %v, want ErrNoEventID", err)
	}
}

func TestRedisStore_RemembersADoneEventFor72HoursByDefault(t *testing.T) {
	d := receive.NewDeduper(redisstore.New(sharedRedis))
	if _, err := d.Do(context.Background(), "evt-ttl", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ttl := sharedRedis.TTL(context.Background(), redisstore.DefaultPrefix+"evt-ttl").Val()
	if ttl < 71*time.Hour || ttl > 72*time.Hour {
		t.Fatalf("done key TTL %v, want about 72h", ttl)
	}
}

func TestDedupeMiddleware_AsksForARetryWithoutCallingTheHandlerWhenTheStoreIsDown(t *testing.T) {
	rds := testenv.Redis(t)
	client := redis.NewClient(&redis.Options{Addr: rds.Server.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer client.Close()
	if err := rds.Server.Kill(); err != nil { // down for the request below; back up for the cleanup
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rds.Server.Restart(context.Background()) })
	h := &recordingHandler{}
	w := httptest.NewRecorder()
	receive.NewDeduper(redisstore.New(client)).Middleware(h).ServeHTTP(w, signedRequest(newSecret, "evt-down", eventBody))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || h.calls != 0 {
		t.Fatalf("store down: status %d (Retry-After %q), handler calls %d; want 503 with Retry-After and 0", w.Code, w.Header().Get("Retry-After"), h.calls)
	}
}
