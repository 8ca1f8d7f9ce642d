package soak

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Binaries are the executables a soak runs.
type Binaries struct {
	Jetrelay   string
	NATSServer string
}

// Build compiles jetrelay and nats-server (the version go.mod pins) into
// dir. It must run inside the jetrelay module, as tests and `go tool task
// soak` do.
func Build(ctx context.Context, dir string) (Binaries, error) {
	b := Binaries{Jetrelay: filepath.Join(dir, "jetrelay"), NATSServer: filepath.Join(dir, "nats-server")}
	for out, pkg := range map[string]string{
		b.Jetrelay:   "github.com/jetrelay/jetrelay/cmd/jetrelay",
		b.NATSServer: "github.com/nats-io/nats-server/v2",
	} {
		cmd := exec.CommandContext(ctx, filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", out, pkg)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("soak: go build %s: %w\n%s", pkg, err, msg)
		}
	}
	return b, nil
}
