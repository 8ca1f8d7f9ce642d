package redisproc

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
// starts redis-server and is then SIGKILLed: the server must not outlive it.
func TestStart_ServerDiesWithItsParent(t *testing.T) {
	if os.Getenv("REDISPROC_ORPHAN_CHILD") == "1" {
		s, err := Start(context.Background(), Options{})
		if err != nil {
			os.Exit(3)
		}
		pid := s.proc.cmd.Process.Pid
		os.Stdout.WriteString(strconv.Itoa(pid) + "\n")
		select {}
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal(ErrNotInstalled)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStart_ServerDiesWithItsParent$")
	cmd.Env = append(os.Environ(), "REDISPROC_ORPHAN_CHILD=1")
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
		t.Fatalf("child did not report a redis pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child printed %q", line)
	}
	cmd.Process.Kill()
	cmd.Wait()

	deadline := time.Now().Add(5 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server pid %d still running after its parent was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
