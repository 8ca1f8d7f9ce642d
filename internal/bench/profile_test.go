package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileSlug_NamesACaseProfileAfterItsTitle(t *testing.T) {
	for _, c := range []struct{ title, want string }{
		{"fixed rate 1000/s", "fixed-rate-1000-s"},
		{"ceiling: 64 workers POSTing, no queue", "ceiling-64-workers-posting-no-queue"},
		{"backlog beside black hole", "backlog-beside-black-hole"},
		{"  receiver taking 50ms, 1 subscription ", "receiver-taking-50ms-1-subscription"},
	} {
		if got := fileSlug(c.title); got != c.want {
			t.Errorf("fileSlug(%q) = %q, want %q", c.title, got, c.want)
		}
	}
}

func TestBench_ProfilesAndCPUProfileExcludeEachOther(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := execute(t.Context(), []string{"--scenario", "limits", "--cpuprofile", filepath.Join(dir, "cpu.pprof"), "--profiles", dir}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--profiles and --cpuprofile exclude each other") {
		t.Fatalf("bench with both flags: err = %v, want the two named as exclusive", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cpu.pprof")); !os.IsNotExist(err) {
		t.Errorf("the refused run still created its profile (stat: %v)", err)
	}
}
