package soak

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/freeport"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

// natsCluster is a JetStream cluster of real nats-server processes on
// loopback, each with its own store, restarted on the same ports and store
// after a fault.
type natsCluster struct {
	nodes []*natsNode
}

type natsNode struct {
	name string
	port int
	proc *proc
}

func startNATSCluster(ctx context.Context, bin, dir string, n int) (*natsCluster, error) {
	ports, err := freeport.Take(2 * n)
	if err != nil {
		return nil, err
	}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i]))
	}
	c := &natsCluster{}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		conf := filepath.Join(dir, name+".conf")
		body := fmt.Sprintf(`server_name: %s
listen: "127.0.0.1:%d"
jetstream { store_dir: %q }
cluster {
  name: soak
  listen: "127.0.0.1:%d"
  routes: [%s]
}
`, name, ports[i], filepath.Join(dir, name), ports[n+i], strings.Join(routes, ", "))
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			return nil, err
		}
		node := &natsNode{name: name, port: ports[i], proc: newProc("nats-server "+name, bin, []string{"-c", conf}, cleanEnv(nil))}
		if err := node.proc.start(); err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, node)
	}
	if err := c.awaitJetStream(ctx); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// URLs is every node's client URL, as NATS_URL takes them.
func (c *natsCluster) URLs() string {
	var urls []string
	for _, n := range c.nodes {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", n.port))
	}
	return strings.Join(urls, ",")
}

func (c *natsCluster) node(name string) *natsNode {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// awaitJetStream waits up to a minute until the cluster answers JetStream
// requests, which it does once a meta leader is elected.
func (c *natsCluster) awaitJetStream(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := testenv.AwaitJetStream(ctx, c.URLs()); err != nil {
		return fmt.Errorf("soak: nats cluster has no JetStream meta leader: %w", err)
	}
	return nil
}

// restart stops node with sig and starts it again once it has exited.
func (n *natsNode) restart(ctx context.Context, sig syscall.Signal, down time.Duration) error {
	if err := n.proc.stop(sig, 15*time.Second); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	if err := n.proc.start(); err != nil {
		return err
	}
	return awaitPort(ctx, n.port, 30*time.Second)
}

func (c *natsCluster) stop() {
	for _, n := range c.nodes {
		n.proc.stop(syscall.SIGTERM, 10*time.Second)
	}
}

// streamLeader is the server name that leads stream on the cluster.
func streamLeader(ctx context.Context, urls, stream string) (string, error) {
	nc, err := nats.Connect(urls, nats.Timeout(2*time.Second))
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	info := s.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", errors.New("stream has no leader")
	}
	return info.Cluster.Leader, nil
}

// awaitPort waits until something accepts connections on the loopback port.
func awaitPort(ctx context.Context, port int, within time.Duration) error {
	deadline := time.Now().Add(within)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: nothing listens on %s after %s: %w", addr, within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
