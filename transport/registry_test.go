package transport_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/transport"
)

type nopTransport struct{}

func (nopTransport) Deliver(context.Context, *transport.Request) (transport.Result, error) {
	return transport.Result{Outcome: transport.Delivered}, nil
}

func TestRegistry_LooksUpBySchemeCaseInsensitively(t *testing.T) {
	r := transport.NewRegistry()
	r.Register("HTTPS", nopTransport{})
	if _, err := r.Lookup("https://hooks.example.com/x"); err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	if _, err := r.Lookup("HtTpS://hooks.example.com/x"); err != nil {
		t.Fatalf("Lookup with mixed-case scheme: %v", err)
	}
	if got := strings.Join(r.Schemes(), ","); got != "https" {
		t.Errorf("Schemes = %q", got)
	}
}

func TestRegistry_UnknownSchemeIsAPermanentErrorListingTheKnownOnes(t *testing.T) {
	r := transport.NewRegistry()
	r.Register("http", nopTransport{})
	_, err := r.Lookup("ftp://files.example.com/drop")
	if !errors.Is(err, transport.ErrUnsupportedScheme) || !errors.Is(err, transport.ErrPermanent) {
		t.Fatalf("err = %v; want unsupported scheme, permanent", err)
	}
	if !strings.Contains(err.Error(), `"ftp"`) || !strings.Contains(err.Error(), "http") {
		t.Errorf("error should name the scheme and the registered ones: %v", err)
	}
}

func TestRegistry_MalformedURLErrorNeverQuotesCredentials(t *testing.T) {
	r := transport.NewRegistry()
	_, err := r.Lookup("https://user:s3cret@host:99999999999/x\x7f")
	if err == nil || !errors.Is(err, transport.ErrPermanent) {
		t.Fatalf("err = %v; want a permanent error", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error leaks the password: %v", err)
	}
}

func TestRegistry_RegisterPanicsOnNilOrDuplicate(t *testing.T) {
	for name, register := range map[string]func(*transport.Registry){
		"nil":       func(r *transport.Registry) { r.Register("http", nil) },
		"duplicate": func(r *transport.Registry) { r.Register("http", nopTransport{}); r.Register("HTTP", nopTransport{}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Register did not panic")
				}
			}()
			register(transport.NewRegistry())
		})
	}
}

func TestPermanent_IsClassifiableAndKeepsTheCause(t *testing.T) {
	cause := errors.New("bad header")
	err := transport.Permanent(cause)
	if !errors.Is(err, transport.ErrPermanent) || !errors.Is(err, cause) || err.Error() != "bad header" {
		t.Errorf("Permanent(%v) = %v", cause, err)
	}
	if transport.Permanent(nil) != nil {
		t.Error("Permanent(nil) must be nil")
	}
}

func TestRegistry_MalformedURLErrorNeverQuotesAPasswordFragment(t *testing.T) {
	r := transport.NewRegistry()
	// url.Parse reads "pa" of the password "pa/ss" as a port and quotes it.
	_, err := r.Lookup("https://user:pa/ss@host/x")
	if err == nil || !errors.Is(err, transport.ErrPermanent) {
		t.Fatalf("err = %v; want a permanent error", err)
	}
	if strings.Contains(err.Error(), `"pa"`) || strings.Contains(err.Error(), ":pa") {
		t.Errorf("error leaks a password fragment: %v", err)
	}
}
