package pgproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jetrelay/jetrelay/internal/freeport"
)

// ErrNotInstalled means the PostgreSQL server binaries could not be found.
var ErrNotInstalled = errors.New("PostgreSQL server not found: `pg_config --bindir` must name a folder with initdb and pg_ctl (Debian: apt-get install postgresql)")

// Server is a running private PostgreSQL server.
type Server struct {
	bindir string
	dir    string // temporary root: data/ and the socket live under it
	port   int
	asUser string // "" when the binaries run as the current user
	uid    uint32 // asUser's ids, for running postgres directly as it
	gid    uint32
	cmd    *exec.Cmd     // the postmaster, a direct child
	exited chan struct{} // closed once cmd has been waited for
}

// Start initialises a data folder and starts a server on a free port bound to
// 127.0.0.1, with a trust-authenticated superuser "postgres" and a database
// "postgres". It returns once the server accepts TCP connections. ctx bounds
// the startup only.
func Start(ctx context.Context) (*Server, error) {
	bindir, err := binDir(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "jetrelay-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgproc: temp dir: %w", err)
	}
	s := &Server{bindir: bindir, dir: dir}
	if os.Geteuid() == 0 {
		if err := s.handTo("postgres"); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.initdb(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// binDir asks pg_config where the server binaries are.
func binDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "pg_config", "--bindir").Output()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	dir := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(dir, "initdb")); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	return dir, nil
}

// handTo gives the temporary folder to name, the user the binaries run as:
// initdb refuses to run as root.
func (s *Server) handTo(name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("pgproc: running as root needs the %q user to run initdb: %w", name, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	if err := os.Chown(s.dir, int(uid), int(gid)); err != nil {
		return fmt.Errorf("pgproc: chown %s: %w", s.dir, err)
	}
	s.asUser, s.uid, s.gid = name, uint32(uid), uint32(gid)
	return nil
}

// command runs a server binary, as s.asUser when set.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	bin := filepath.Join(s.bindir, name)
	if s.asUser == "" {
		return exec.CommandContext(ctx, bin, args...)
	}
	return exec.CommandContext(ctx, "runuser", append([]string{"-u", s.asUser, "--", bin}, args...)...)
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

func (s *Server) initdb(ctx context.Context) error {
	cmd := s.command(ctx, "initdb", "-D", s.dataDir(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgproc: initdb: %w: %s", err, tail(out))
	}
	return nil
}

// start launches the server; a port taken between probing and binding is
// retried with another.
func (s *Server) start(ctx context.Context) error {
	var last error
	for range 5 {
		port, err := freeport.One()
		if err != nil {
			return err
		}
		s.port = port
		if last = s.launch(); last != nil {
			return last
		}
		if last = s.awaitTCP(ctx); last == nil {
			return nil
		}
		s.kill()
		if !strings.Contains(s.logTail(), "Address already in use") {
			return last
		}
	}
	return last
}

// launch runs the postmaster itself (not pg_ctl, which detaches it) as a
// direct child with a death signal, as s.asUser's ids when set: a test
// binary killed hard then takes its server with it.
func (s *Server) launch() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("pgproc: server log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(s.bindir, "postgres"), "-D", s.dataDir(), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = logf, logf
	setDeathSignal(cmd, s.asUser != "", s.uid, s.gid)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgproc: start postgres: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() {
		cmd.Wait()
		close(s.exited)
	}()
	return nil
}

// awaitTCP waits until the server accepts sessions over TCP (pg_isready: a
// server still starting up accepts the connection but refuses the session,
// which pg_ctl -w used to wait out), or fails at once if it exited.
func (s *Server) awaitTCP(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := exec.CommandContext(ctx, filepath.Join(s.bindir, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres").Run()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("pgproc: postgres exited on startup: %s", s.logTail())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("pgproc: server on %s never accepted connections: %w %s", s.Addr(), err, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends the postmaster at once and waits for it.
func (s *Server) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

// Addr is the server's host:port on loopback.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is a connection URL for database db (empty means "postgres") as the
// superuser, without TLS.
func (s *Server) URL(db string) string {
	if db == "" {
		db = "postgres"
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", s.Addr(), db)
}

// CreateDatabase creates an empty database name (createdb over the server's
// socket), so tests sharing one server each get their own database.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	out, err := s.command(ctx, "createdb", "-h", s.dir, "-p", strconv.Itoa(s.port), "-U", "postgres", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgproc: createdb %s: %w: %s", name, err, tail(out))
	}
	return nil
}

// Stop shuts the server down (fast mode, SIGINT: open sessions are ended;
// SIGKILL if it takes over 30 s) and removes its data folder.
func (s *Server) Stop() error {
	var err error
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("pgproc: postgres did not stop within 30s: %s", s.logTail())
		s.kill()
	}
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return tail(b)
}

// tail keeps the end of a command's output for an error message.
func tail(b []byte) string {
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return strings.TrimSpace(string(b))
}
