package transport_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jetrelay/jetrelay/transport"
)

func TestBlocked_IsBothBlockedAndPermanentThroughWrapping(t *testing.T) {
	cause := errors.New("resolves to blocked IP: 10.0.0.1")
	err := fmt.Errorf("dial: %w", transport.Blocked(cause))
	if !errors.Is(err, transport.ErrBlocked) || !errors.Is(err, transport.ErrPermanent) || !errors.Is(err, cause) {
		t.Fatalf("%v: want ErrBlocked, ErrPermanent and the cause", err)
	}
	if err.Error() != "dial: resolves to blocked IP: 10.0.0.1" {
		t.Errorf("message = %q", err)
	}
	if errors.Is(transport.Permanent(cause), transport.ErrBlocked) {
		t.Error("a merely permanent error must not look blocked")
	}
	if transport.Blocked(nil) != nil {
		t.Error("Blocked(nil) must be nil")
	}
}
