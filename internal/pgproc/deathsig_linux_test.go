package pgproc

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// processAlive reports whether pid exists and is not a zombie waiting to be
// reaped by init.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// TestStart_ServerDiesWithItsParent runs a child copy of this test binary that
// starts PostgreSQL and is then SIGKILLed: the server must not outlive it.
func TestStart_ServerDiesWithItsParent(t *testing.T) {
	if os.Getenv("PGPROC_ORPHAN_CHILD") == "1" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := Start(ctx)
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(3)
		}
		os.Stdout.WriteString(strconv.Itoa(s.cmd.Process.Pid) + "\n")
		select {}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStart_ServerDiesWithItsParent$")
	cmd.Env = append(os.Environ(), "PGPROC_ORPHAN_CHILD=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("child did not report a postgres pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child printed %q", line)
	}
	cmd.Process.Kill()
	cmd.Wait()

	deadline := time.Now().Add(10 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("postgres pid %d still running after its parent was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
