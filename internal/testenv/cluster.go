package testenv

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ClusterEnv is a JetStream cluster of in-process nats-server nodes, routed
// to each other on loopback, each with a TCP client listener so clients can
// fail over between nodes as they would in production.
type ClusterEnv struct {
	mu    sync.Mutex
	nodes []*clusterNode
}

type clusterNode struct {
	opts *server.Options
	srv  *server.Server // nil while the node is stopped
}

// Cluster starts an n-node JetStream cluster, its stores under t.TempDir(),
// and returns once a JetStream meta leader answers. Every node is shut down
// when the test ends.
func Cluster(t testing.TB, n int) *ClusterEnv {
	t.Helper()
	if n < 1 {
		t.Fatalf("testenv.Cluster: need at least one node, got %d", n)
	}
	base := t.TempDir()
	// Every node's route port is in every node's routes, so the ports are
	// chosen first. Each stays held (listened on) until just before its
	// node starts: a port picked and let go at once could be taken by
	// another process while the nodes before it start, and its node would
	// then never get ready.
	routePorts := make([]int, n)
	routes := make([]string, n)
	held := make([]net.Listener, n)
	for i := range n {
		held[i] = holdLoopbackPort(t)
		routePorts[i] = held[i].Addr().(*net.TCPAddr).Port
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", routePorts[i])
	}
	defer func() {
		for _, l := range held {
			_ = l.Close() // those of nodes that never started
		}
	}()
	c := &ClusterEnv{}
	t.Cleanup(c.shutdownAll)
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		o := &server.Options{
			ServerName: name, Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: filepath.Join(base, name),
			NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "jetrelay-test", Host: "127.0.0.1", Port: routePorts[i]},
			// A route to the node itself is harmless and keeps every node's
			// options alike.
			Routes: server.RoutesFromStr(strings.Join(routes, ",")),
		}
		node := &clusterNode{opts: o}
		_ = held[i].Close()
		if err := node.start(); err != nil {
			t.Fatalf("testenv: start cluster node %s: %v", name, err)
		}
		// A restart must come back on the same client port, where clients
		// given ClientURLs look for it.
		o.Port = node.srv.Addr().(*net.TCPAddr).Port
		c.nodes = append(c.nodes, node)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := AwaitJetStream(ctx, c.ClientURLs()); err != nil {
		t.Fatalf("testenv: cluster has no JetStream meta leader: %v", err)
	}
	return c
}

func (n *clusterNode) start() error {
	srv, err := server.NewServer(n.opts)
	if err != nil {
		return err
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		missing := ""
		if srv.Addr() == nil {
			missing += " (no client listener)"
		}
		if srv.ClusterAddr() == nil {
			missing += fmt.Sprintf(" (no route listener on port %d: taken?)", n.opts.Cluster.Port)
		}
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("not ready for connections after 10s%s", missing)
	}
	n.srv = srv
	return nil
}

// AwaitJetStream polls the NATS servers at urls (comma separated) until
// JetStream answers account requests, which a cluster does only once a meta
// leader is elected, or ctx ends. The soak's clusters of real nats-server
// processes wait with it too.
func AwaitJetStream(ctx context.Context, urls string) error {
	nc, err := nats.Connect(urls, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ClientURLs lists every node's client URL, comma separated, as NATS_URL
// takes them. Stopped nodes are listed too: they come back on the same port.
func (c *ClusterEnv) ClientURLs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port)
	}
	return strings.Join(urls, ",")
}

// Names are the nodes' server names (n1, n2, …), as JetStream reports them
// in stream and consumer cluster info.
func (c *ClusterEnv) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		names[i] = n.opts.ServerName
	}
	return names
}

// Server returns the running node called name, or nil when it is stopped or
// unknown.
func (c *ClusterEnv) Server(name string) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.node(name); n != nil {
		return n.srv
	}
	return nil
}

// Stop shuts the node called name down, as a crashed or drained node
// leaves the cluster, and waits until it has stopped.
func (c *ClusterEnv) Stop(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(name)
	if n == nil {
		return fmt.Errorf("testenv: no cluster node %q", name)
	}
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
	return nil
}

// Restart starts a stopped node again on the same ports and store, so it
// rejoins the cluster and catches up.
func (c *ClusterEnv) Restart(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(name)
	if n == nil {
		return fmt.Errorf("testenv: no cluster node %q", name)
	}
	if n.srv != nil {
		return fmt.Errorf("testenv: cluster node %q is running", name)
	}
	return n.start()
}

// node finds a node by name. Callers hold c.mu.
func (c *ClusterEnv) node(name string) *clusterNode {
	for _, n := range c.nodes {
		if n.opts.ServerName == name {
			return n
		}
	}
	return nil
}

func (c *ClusterEnv) shutdownAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.srv != nil {
			n.srv.Shutdown()
			n.srv.WaitForShutdown()
			n.srv = nil
		}
	}
}

// holdLoopbackPort listens on a free loopback port and returns the
// listener: the port stays the caller's until it closes it.
func holdLoopbackPort(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	return ln
}
