package engine_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/proto"
)

// natsProxy forwards TCP between NATS clients and a server. The server's
// side can be held (the bytes wait, as on a stalled link), and the
// client's pull requests for one consumer are counted.
type natsProxy struct {
	url   string
	mu    sync.Mutex
	cond  *sync.Cond
	held  bool
	match atomic.Pointer[[]byte]
	pulls atomic.Int32
}

func newNATSProxy(t *testing.T, server string) *natsProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &natsProxy{url: "nats://" + ln.Addr().String()}
	p.cond = sync.NewCond(&p.mu)
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); p.hold(false); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", server)
			if err != nil {
				c.Close()
				continue
			}
			conns.Go(func() { p.up(c, s) })
			conns.Go(func() { p.down(s, c) })
		}
	}()
	return p
}

// up copies client → server, counting pull requests that name match.
func (p *natsProxy) up(c, s net.Conn) {
	defer s.Close()
	var carry []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if m := p.match.Load(); m != nil {
				data := append(carry, buf[:n]...)
				p.pulls.Add(int32(bytes.Count(data, *m)))
				carry = append([]byte(nil), data[max(0, len(data)-len(*m)+1):]...)
			}
			if _, err := s.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down copies server → client, waiting while the proxy is held.
func (p *natsProxy) down(s, c net.Conn) {
	defer c.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		p.mu.Lock()
		for p.held {
			p.cond.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *natsProxy) hold(h bool) {
	p.mu.Lock()
	p.held = h
	p.mu.Unlock()
	p.cond.Broadcast()
}

// tokenEndpoint answers 200 to a request once it gets a token, or at once
// after open. It is its own server: internal/receiver holds one mutex
// across its endpoints.
type tokenEndpoint struct {
	url     string
	entered chan string
	tokens  chan struct{}
	open    func()
}

func newTokenEndpoint(t *testing.T) *tokenEndpoint {
	opened := make(chan struct{})
	var once sync.Once
	h := &tokenEndpoint{entered: make(chan string, 64), tokens: make(chan struct{}), open: func() { once.Do(func() { close(opened) }) }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.entered <- r.URL.Path
		select {
		case <-h.tokens:
		case <-opened:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(h.open) // runs first: srv.Close waits for the handlers
	h.url = srv.URL
	return h
}

// A line's loop (engine/ordered.go pullLine) that waits in work.put for a
// worker reads nothing from its iterator; a pull still open then sends its
// idle heartbeat and its 408 expiry into the iterator's buffer. Two pulls
// are open after a missed heartbeat (a stalled link: the engine pulls
// again, and the first pull's late expiry makes it pull once more), so
// once an item comes on one, the other's status messages must fit: with a
// buffer of one (PullMaxMessages(1)) the client drops them ("nats: slow
// consumer, messages dropped"). The engine's NATS goes through a TCP proxy
// the test holds to stall the link; the test looks at the server on its
// own connection.
func TestOrdered_ALineWithTwoPullsOpenLosesNothingWhileItWaitsForAWorker(t *testing.T) {
	ctx := context.Background()
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	proxy := newNATSProxy(t, srv.ClientURL()[len("nats://"):])
	// The test's own look at the server does not go through the proxy.
	onc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(onc.Close)
	ojs, err := jetstream.New(onc)
	if err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, envOptions{ordering: proto.OrderingStrict, timeout: time.Minute, natsURLs: proxy.url, engine: func(c *engine.Config) {
		c.Workers, c.MinWorkers = 1, 1
	}})
	var mu sync.Mutex
	var slow int
	e.nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			mu.Lock()
			slow++
			mu.Unlock()
		}
	})
	slowSeen := func() int { mu.Lock(); defer mu.Unlock(); return slow }
	line := func(sub string) *jetstream.ConsumerInfo {
		c, err := ojs.Consumer(ctx, e.qc.Stream, e.qc.OrderedConsumerName(sub))
		if err != nil {
			return nil
		}
		info, err := c.Info(ctx)
		if err != nil {
			return nil
		}
		return info
	}
	hold := newTokenEndpoint(t)
	sub, _, _ := e.subscribe(t, "/line", receiver.Healthy(), func(s *admin.Subscription) { s.URL = hold.url + "/line" })
	busy1, _, _ := e.subscribe(t, "/busy1", receiver.Healthy(), func(s *admin.Subscription) { s.URL = hold.url + "/busy1" })
	busy2, _, _ := e.subscribe(t, "/busy2", receiver.Healthy(), func(s *admin.Subscription) { s.URL = hold.url + "/busy2" })
	m := []byte("CONSUMER.MSG.NEXT." + e.qc.Stream + "." + e.qc.OrderedConsumerName(sub))
	proxy.match.Store(&m)

	// The line's head holds the one worker; the line has a pull open for
	// its next item.
	var ids []string
	for range 4 {
		ids = append(ids, e.deliver(t, sub, e.event(), nil))
	}
	if p := <-hold.entered; p != "/line" {
		t.Fatalf("first request to %s", p)
	}
	// Another line's head fills the lane; a third waits to put.
	b1 := e.deliver(t, busy1, e.event(), nil)
	waitFor(t, 10*time.Second, "busy1's head to be out", func() bool { i := line(busy1); return i != nil && i.NumAckPending == 1 })
	b2 := e.deliver(t, busy2, e.event(), nil)
	waitFor(t, 10*time.Second, "busy2's head to be out", func() bool { i := line(busy2); return i != nil && i.NumAckPending == 1 })
	waitFor(t, 10*time.Second, "the line's pull", func() bool { i := line(sub); return i != nil && i.NumWaiting == 1 })

	// The link stalls past a missed heartbeat: the engine pulls again
	// while its first pull is still counted, and once the link is back
	// that pull's expiry makes it pull once more: two pulls open.
	base := proxy.pulls.Load()
	proxy.hold(true)
	waitFor(t, 10*time.Second, "a pull after a missed heartbeat", func() bool {
		i := line(sub)
		return proxy.pulls.Load() > base && i != nil && i.NumWaiting == 1
	})
	proxy.hold(false)
	waitFor(t, 10*time.Second, "two pulls open", func() bool { i := line(sub); return i != nil && i.NumWaiting == 2 })

	// The head is sent; the worker takes busy1's head and holds, busy2's
	// head fills the lane, and the line's next item waits to put while
	// its other pull is open.
	// The link is held meanwhile, so that the line's next item reaches
	// the engine only once the worker holds busy1's head.
	proxy.hold(true)
	hold.tokens <- struct{}{}
	if p := <-hold.entered; p != "/busy1" {
		t.Fatalf("second request to %s", p)
	}
	proxy.hold(false)
	waitFor(t, 10*time.Second, "the line's next item out and its pulls gone", func() bool {
		i := line(sub)
		return i != nil && i.NumAckPending == 1 && i.NumWaiting == 0 && i.Delivered.Consumer >= 2
	})
	opened := time.Now()
	hold.open()
	for _, id := range append([]string{b1, b2}, ids...) {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("delivery %s is %s, want SUCCESS", id, rec.Status)
		}
	}
	took := time.Since(opened)
	t.Logf("sent %s after the worker was free; %d slow-consumer errors", took, slowSeen())
	if n := slowSeen(); n > 0 {
		t.Errorf("%d slow-consumer errors on the engine's connection", n)
	}
	if took > queue.OrderedPullExpiry {
		t.Errorf("the line took %s once the worker was free, want well under a pull expiry (%s)", took, queue.OrderedPullExpiry)
	}
}
