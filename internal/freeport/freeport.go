// Package freeport picks loopback TCP ports for the servers tests and the
// soak start (redis-server, nats-server, PostgreSQL, the SQS emulator,
// jetrelay itself).
//
// The kernel may hand a port out again as soon as its probe listener is
// closed, so two separate "ask the kernel for :0" calls can return the
// same port: a three-node cluster once got one client port for two of its
// nodes, and the third could not start. Every port Take returns is
// remembered for the life of the process and never returned again.
// Another process may still take a port before its server binds it; the
// callers that start servers retry on that.
package freeport

import (
	"fmt"
	"net"
	"sync"
)

// Take returns n distinct loopback ports nothing listens on now and that
// no earlier call in this process returned.
func Take(n int) ([]int, error) {
	return handedOut.pick(n, func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
}

// One is Take(1).
func One() (int, error) {
	ports, err := Take(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// handedOut are the ports Take returned in this process.
var handedOut = &book{used: map[int]bool{}}

// book remembers the ports it handed out.
type book struct {
	mu   sync.Mutex
	used map[int]bool
}

// pick is Take over listen, which opens a probe listener on a port of the
// kernel's choosing. Every probe stays open until the call returns, so one
// call never sees a port twice; a port handed out before is skipped, its
// probe kept open so that the next one gets another.
func (b *book) pick(n int, listen func() (net.Listener, error)) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("freeport: no free port in %d tries", tries)
		}
		l, err := listen()
		if err != nil {
			return nil, fmt.Errorf("freeport: %w", err)
		}
		lns = append(lns, l)
		port := l.Addr().(*net.TCPAddr).Port
		if b.used[port] {
			continue
		}
		ports = append(ports, port)
	}
	for _, p := range ports {
		b.used[p] = true
	}
	return ports, nil
}
