package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// probe asks the server on addr for its pid with a hand-written RESP
// exchange (AUTH, INFO server). It avoids a client library so readiness
// checks leave no pools or retry logs behind. A server still loading its AOF
// is reported as an error: it is not ready yet.
func probe(ctx context.Context, addr, password string) (int, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	// Unblock reads at once when the caller gives up (for example because
	// our process exited and a foreign listener holds the port silently).
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	deadline := time.Now().Add(2 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	conn.SetDeadline(deadline)
	r := bufio.NewReader(conn)
	if password != "" {
		if _, err := exchange(conn, r, "AUTH", password); err != nil {
			return 0, err
		}
	}
	// INFO answers even while the AOF is still loading, so ask about that
	// too: a server that is loading is not ready for clients.
	persistence, err := exchange(conn, r, "INFO", "persistence")
	if err != nil {
		return 0, err
	}
	if strings.Contains(persistence, "loading:1") {
		return 0, errors.New("still loading its data set")
	}
	info, err := exchange(conn, r, "INFO", "server")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server reported no process_id")
}

// exchange sends one command and reads a simple-string, error or bulk reply.
func exchange(w io.Writer, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s: %s", args[0], line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 || n > 1<<20 {
			return "", fmt.Errorf("%s: unexpected bulk length %q", args[0], line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("%s: unexpected reply %q", args[0], line)
}
