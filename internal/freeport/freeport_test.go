package freeport

import (
	"net"
	"slices"
	"strconv"
	"testing"
)

// probe is a listener on a port the test chooses, standing for one the
// kernel chose.
type probe struct {
	port   int
	closed *int
}

func (p probe) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (p probe) Close() error              { *p.closed++; return nil }
func (p probe) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p.port} }

// The kernel may hand a port out again once its probe is closed: two
// calls, as for the embedded replica's NATS port and then its management
// port, must still get different ports, or the replica cannot start. The
// kernel's choices are forced here: the second call is offered the first
// call's port before another.
func TestTake_ALaterCallNeverGetsAPortAnEarlierOneReturned(t *testing.T) {
	b := &book{used: map[int]bool{}}
	offered := []int{61001, 61001, 61002}
	closed := 0
	listen := func() (net.Listener, error) {
		p := offered[0]
		offered = offered[1:]
		return probe{port: p, closed: &closed}, nil
	}
	first, err := b.pick(1, listen)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.pick(1, listen)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first, []int{61001}) || !slices.Equal(second, []int{61002}) {
		t.Errorf("ports %v then %v, want 61001 then 61002 (the repeat skipped)", first, second)
	}
	if closed != 3 {
		t.Errorf("%d probes closed, want all 3 (the skipped one too)", closed)
	}
	// The real thing: many ports at once are distinct and free.
	ports, err := Take(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d returned twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		l.Close()
	}
}
