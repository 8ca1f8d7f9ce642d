package natsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// DefaultServerName is the server name used when Options.ServerName is empty.
const DefaultServerName = "jetrelay-embedded"

// defaultReadyTimeout bounds the wait for the server when ctx has no deadline.
const defaultReadyTimeout = 10 * time.Second

// Options configures an embedded server. The zero value is not usable:
// StoreDir is required so JetStream data never lands in a shared temp dir.
type Options struct {
	// StoreDir is where JetStream file storage lives (under StoreDir/jetstream).
	StoreDir string
	// Listen is the client listen address. Empty means no TCP listener at
	// all: only in-process connections, so the server cannot collide with a
	// NATS on 4222. "127.0.0.1:0" picks a free port.
	Listen string
	// ServerName defaults to DefaultServerName.
	ServerName string
	// SyncAlways fsyncs every write. Without it a killed process loses
	// nothing, but a power loss can lose up to ~2 minutes of writes; with it
	// publishing is several times slower.
	SyncAlways bool
	// Logger receives the server's notices (at debug), warnings and errors.
	// Nil keeps the server silent.
	Logger *slog.Logger
}

// Server is a running embedded NATS server with JetStream enabled.
type Server struct {
	ns        *server.Server
	listening bool
}

// Start starts a JetStream server and waits until it accepts connections,
// up to ctx's deadline (10s when ctx has none).
func Start(ctx context.Context, opts Options) (*Server, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("natsserver: start: %w", err)
	}
	sopts, err := serverOptions(opts)
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("natsserver: create: %w", err)
	}
	if opts.Logger != nil {
		ns.SetLoggerV2(slogAdapter{opts.Logger}, false, false, false)
	}
	go ns.Start()

	wait := defaultReadyTimeout
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	if !ns.ReadyForConnections(wait) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("natsserver: not ready for connections after %s (store %q, listen %q)", wait, opts.StoreDir, opts.Listen)
	}
	return &Server{ns: ns, listening: !sopts.DontListen}, nil
}

func serverOptions(opts Options) (*server.Options, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("natsserver: StoreDir is required")
	}
	name := opts.ServerName
	if name == "" {
		name = DefaultServerName
	}
	so := &server.Options{
		ServerName: name,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		SyncAlways: opts.SyncAlways,
		NoSigs:     true,
		NoLog:      opts.Logger == nil,
	}
	if opts.Listen == "" {
		so.DontListen = true
		so.Port = server.RANDOM_PORT
		return so, nil
	}
	host, portStr, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("natsserver: listen address %q: %w", opts.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("natsserver: listen address %q: invalid port", opts.Listen)
	}
	if port == 0 {
		// nats-server reads port 0 as "the default 4222"; -1 is its "any free port".
		port = server.RANDOM_PORT
	}
	if host == "" {
		host = "0.0.0.0"
	}
	so.Host, so.Port = host, port
	return so, nil
}

// Connect opens a client connection: in process when the server has no
// listener, over TCP to ClientURL otherwise.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	if !s.listening {
		opts = append(opts, nats.InProcessServer(s.ns))
		nc, err := nats.Connect("", opts...)
		if err != nil {
			return nil, fmt.Errorf("natsserver: in-process connect: %w", err)
		}
		return nc, nil
	}
	nc, err := nats.Connect(s.ns.ClientURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("natsserver: connect %s: %w", s.ns.ClientURL(), err)
	}
	return nc, nil
}

// ClientURL is the nats:// URL clients dial, or "" when the server does not
// listen on TCP.
func (s *Server) ClientURL() string {
	if !s.listening {
		return ""
	}
	return s.ns.ClientURL()
}

// Shutdown stops the server and waits until it has stopped, so its store
// directory can be reused or removed.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// NATS exposes the underlying server for tests that restart it or inspect
// its state.
func (s *Server) NATS() *server.Server { return s.ns }
