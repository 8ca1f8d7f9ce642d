package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// podman runs podman the way these machines allow (../shared/notes): the
// runc runtime and no default ulimits, from a containers.conf of its own, so
// neither crun's setrlimit nor the host's configuration gets in the way.
type podman struct {
	conf string // CONTAINERS_CONF
}

var (
	podmanOnce sync.Once
	podmanErr  error
)

// newPodman returns a podman runner, installing podman and runc with
// apt-get when they are missing (as the test task installs redis-server).
func newPodman(t *testing.T) *podman {
	t.Helper()
	podmanOnce.Do(func() { podmanErr = installPodman() })
	if podmanErr != nil {
		t.Fatalf("podman and runc are needed (go tool task deps:podman installs them): %v", podmanErr)
	}
	conf := filepath.Join(t.TempDir(), "containers.conf")
	if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = \"runc\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &podman{conf: conf}
}

func installPodman() error {
	_, errP := exec.LookPath("podman")
	_, errR := exec.LookPath("runc")
	if errP == nil && errR == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return exec.ErrNotFound
	}
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "podman", "runc"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return &exec.Error{Name: "apt-get " + strings.Join(args, " ") + ": " + string(out), Err: err}
		}
	}
	return nil
}

// run runs podman with args to completion and returns its output; a failure
// fails the test.
func (p *podman) run(t *testing.T, timeout time.Duration, args ...string) string {
	t.Helper()
	out, err := p.try(timeout, args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// try runs podman with args and returns its combined output and error.
func (p *podman) try(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append([]string{"--runtime", "runc"}, args...)...)
	cmd.Env = os.Environ()
	if p.conf != "" {
		cmd.Env = append(cmd.Env, "CONTAINERS_CONF="+p.conf)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// testImages are the images built for this test binary, each once (they
// cost a static build of the binary): script name → tag or build error.
// TestMain removes them after every test ran.
var testImages = struct {
	sync.Mutex
	built map[string]func() (string, error)
}{built: map[string]func() (string, error){}}

// buildImage builds an image with one of deploy/image's build scripts under
// a unique tag, once per test binary.
func (p *podman) buildImage(t *testing.T, script, name string) string {
	t.Helper()
	testImages.Lock()
	build, ok := testImages.built[script]
	if !ok {
		root, conf := repoRoot(t), p.conf
		build = sync.OnceValues(func() (string, error) {
			tag := "localhost/" + name + "-test:" + randomHex(6)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", filepath.Join(root, "deploy", "image", script), tag)
			cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf, "GO="+filepath.Join(runtime.GOROOT(), "bin", "go"), "VERSION=test")
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("%s: %w\n%s", script, err, out)
			}
			return tag, nil
		})
		testImages.built[script] = build
	}
	testImages.Unlock()
	tag, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// removeTestImages removes every image buildImage made.
func removeTestImages() {
	testImages.Lock()
	defer testImages.Unlock()
	p := &podman{} // the tests' containers.conf files are gone; rmi needs none
	for _, build := range testImages.built {
		if tag, err := build(); err == nil {
			_, _ = p.try(time.Minute, "rmi", "-f", tag)
		}
	}
}

// container starts a detached container (host network) and removes it when
// the test ends, showing its logs if the test failed.
func (p *podman) container(t *testing.T, name string, args ...string) string {
	t.Helper()
	name = name + "-" + randomHex(4)
	p.run(t, 2*time.Minute, append([]string{"run", "-d", "--name", name, "--network", "host"}, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := p.try(time.Minute, "logs", "--tail", "60", name)
			t.Logf("container %s logs:\n%s", name, logs)
		}
		_, _ = p.try(time.Minute, "rm", "-f", "-t", "0", name)
	})
	return name
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// repoRoot is the module root (two levels above cmd/jetrelay).
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}
