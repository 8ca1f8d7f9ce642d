package app

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// What `jetrelay run` is built from must not include the helpers that exist
// for tests, the demo and the benchmark: a redis-server launcher, a writer
// that plays admin, test receivers, test environments.
func TestApp_LinksNoTestHelpers(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, helper := range []string{"internal/redisproc", "internal/admin", "internal/receiver", "internal/testenv", "internal/bench", "internal/demo"} {
		for _, dep := range deps {
			if dep == "github.com/jetrelay/jetrelay/"+helper {
				t.Errorf("internal/app imports %s", helper)
			}
		}
	}
}
