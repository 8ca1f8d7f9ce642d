package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// StandardWebhooksVersion is the npm package standardwebhooks (the
// specification's own JavaScript library) the interoperability tests run.
const StandardWebhooksVersion = "1.1.1"

// StandardWebhooksJS returns the node_modules folder holding the npm
// package standardwebhooks (go tool task deps:standardwebhooks installs it
// under .cache/standardwebhooks; JETRELAY_STANDARDWEBHOOKS_DIR overrides
// the prefix), or fails the test saying how to install it.
func StandardWebhooksJS(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("JETRELAY_STANDARDWEBHOOKS_DIR")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		dir = filepath.Join(root, ".cache", "standardwebhooks")
	}
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "standardwebhooks", "dist", "index.js")); err != nil {
		t.Fatalf("testenv: these tests need the npm package standardwebhooks %s: %v\n"+
			"install it with: go tool task deps:standardwebhooks (npm install --prefix .cache/standardwebhooks standardwebhooks@%s)",
			StandardWebhooksVersion, err, StandardWebhooksVersion)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("testenv: node is not on PATH (the Standard Webhooks interoperability tests run the npm library)")
	}
	return modules
}
