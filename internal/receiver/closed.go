package receiver

import "net"

// ClosedAddr returns a loopback address nothing listens on: a "dead"
// endpoint that refuses connections, for the demo and the benchmark.
func ClosedAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
