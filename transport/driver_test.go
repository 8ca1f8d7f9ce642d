package transport_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/transport"
)

type closingTransport struct {
	nopTransport
	closed *int
}

func (c closingTransport) Close() { *c.closed++ }

func TestOpenRegistry_OpensAComparableDriverOnceForAllItsSchemesAndCloseClosesIt(t *testing.T) {
	var opens, closed int
	d := &countingDriver{open: func() transport.Transport { opens++; return closingTransport{closed: &closed} }}
	transport.Register("test-open-a", d)
	transport.Register("test-open-b", d)
	reg, err := transport.OpenRegistry(context.Background(), transport.Env{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"test-open-a://x", "test-open-b://y"} {
		if _, err := reg.Lookup(u); err != nil {
			t.Errorf("Lookup(%s): %v", u, err)
		}
	}
	if opens != 1 {
		t.Errorf("driver opened %d times for two schemes, want once", opens)
	}
	if err := reg.Close(); err != nil || closed != 1 {
		t.Errorf("Close = %v, transport closed %d times; want once", err, closed)
	}
}

// countingDriver stays in the process-wide table for the rest of the test
// binary, so every test that opens a registry opens it too.
type countingDriver struct{ open func() transport.Transport }

func (d *countingDriver) Open(context.Context, transport.Env) (transport.Transport, error) {
	if d.open == nil {
		return nopTransport{}, nil
	}
	return d.open(), nil
}

func TestRegister_PanicsOnADuplicateScheme(t *testing.T) {
	transport.Register("test-dup", &countingDriver{})
	defer func() {
		if recover() == nil {
			t.Error("second Register of test-dup did not panic")
		}
	}()
	transport.Register("TEST-DUP", &countingDriver{})
}

// A plugin built outside this module can import only public packages: the
// plugin API must not reach into internal/.
func TestPluginAPI_NeedsNothingFromInternal(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/jetrelay/jetrelay/transport", "github.com/jetrelay/jetrelay/transport/transporttest").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "jetrelay/jetrelay/internal") {
			t.Errorf("the plugin API depends on %s", p)
		}
	}
}
