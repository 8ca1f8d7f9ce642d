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
	"time"
)

// ErrNotInstalled means the PostgreSQL server binaries could not be found.
var ErrNotInstalled = errors.New("PostgreSQL server not found: `pg_config --bindir` must name a folder with initdb and pg_ctl (Debian: apt-get install postgresql)")

// Server is a running private PostgreSQL server.
type Server struct {
	bindir string
	dir    string // temporary root: data/ and the socket live under it
	port   int
	asUser string // "" when the binaries run as the current user
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
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(s.dir, uid, gid); err != nil {
		return fmt.Errorf("pgproc: chown %s: %w", s.dir, err)
	}
	s.asUser = name
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
		port, err := freePort()
		if err != nil {
			return err
		}
		s.port = port
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", port, s.dir)
		cmd := s.command(ctx, "pg_ctl", "start", "-w", "-t", "30", "-D", s.dataDir(), "-l", filepath.Join(s.dir, "server.log"), "-o", opts)
		out, err := cmd.CombinedOutput()
		if err == nil {
			return s.awaitTCP(ctx)
		}
		last = fmt.Errorf("pgproc: pg_ctl start: %w: %s %s", err, tail(out), s.logTail())
		if !strings.Contains(s.logTail(), "Address already in use") {
			return last
		}
	}
	return last
}

func (s *Server) awaitTCP(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("pgproc: server on %s never accepted connections: %w", s.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// Stop shuts the server down (fast mode: open sessions are ended) and
// removes its data folder.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := s.command(ctx, "pg_ctl", "stop", "-m", "fast", "-w", "-D", s.dataDir()).CombinedOutput()
	rmErr := os.RemoveAll(s.dir)
	if err != nil {
		return fmt.Errorf("pgproc: pg_ctl stop: %w: %s", err, tail(out))
	}
	return rmErr
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgproc: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
