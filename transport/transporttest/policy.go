package transporttest

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// testReservedHeaders: a subscription's custom headers may not set what the
// relay sets. A transport refuses such a set permanently or leaves the
// reserved names out; either way the destination never sees a forged
// signature, event id or traceparent.
func testReservedHeaders(t *testing.T, h Harness) {
	if !h.CustomHeaders {
		t.Skip("the transport's destinations do not receive custom headers")
	}
	tr := h.Transport(t)
	d := destination(t, h, Accept)
	req := NewRequest(d.URL, "reserved")
	req.Headers = map[string]string{
		proto.HeaderSignature:   "sha256=forged",
		proto.HeaderEventID:     "evt_forged",
		proto.HeaderTraceparent: "00-00000000000000000000000000000001-0000000000000001-01",
	}
	_, err := deliver(t, tr, context.Background(), req)
	if err != nil {
		if !errors.Is(err, transport.ErrPermanent) {
			t.Errorf("Deliver with reserved custom headers = %v; want success without them, or a permanent error", err)
		}
		return
	}
	m := await(t, d, req.EventID)
	if m.Signature != req.Signature || m.Traceparent != req.Traceparent {
		t.Errorf("a custom header replaced the relay's: signature %q, traceparent %q arrived; want %q, %q",
			m.Signature, m.Traceparent, req.Signature, req.Traceparent)
	}
	if n := count(d.Received(), "evt_forged"); n != 0 {
		t.Errorf("a message arrived under the forged event id")
	}
}

// testUnreachable: errors end up in delivery records and logs, so a
// connection error must not quote the URL's credentials.
func testUnreachable(t *testing.T, h Harness) {
	const user, password = "conformance-user", "s3cret-pw-in-url"
	if h.Unreachable == nil {
		t.Skip("the Harness gives no URL with credentials (Harness.Unreachable)")
	}
	url, ok := h.Unreachable(t, user, password)
	if !ok {
		t.Skip("the transport's URLs take no credentials")
	}
	tr := h.Transport(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := deliver(t, tr, ctx, NewRequest(url, "unreachable"))
	if err == nil {
		t.Fatalf("Deliver to a closed port = %+v, nil; want an error", res)
	}
	for _, secret := range []string{password, user + ":" + password} {
		if strings.Contains(err.Error(), secret) || strings.Contains(res.Message, secret) {
			t.Errorf("the connection error quotes the URL's credentials: %v (message %q)", err, res.Message)
		}
	}
}

// testDialer: the host's dialer is how its destination policy (the SSRF
// guard) sees every address a transport connects to. A transport that
// dials around it lets a tenant reach internal addresses.
func testDialer(t *testing.T, h Harness) {
	if h.WithDialer == nil {
		t.Skip("the transport dials nothing of its own for these URLs (Harness.WithDialer)")
	}
	d := destination(t, h, Accept)

	var dialed atomic.Int64
	var plain net.Dialer
	tr := h.WithDialer(t, func(ctx context.Context, network, address string) (net.Conn, error) {
		dialed.Add(1)
		return plain.DialContext(ctx, network, address)
	})
	req := NewRequest(d.URL, "dialer")
	if res, err := deliver(t, tr, context.Background(), req); err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver through the provided dialer = %+v, %v; want Delivered", res, err)
	}
	if dialed.Load() == 0 {
		t.Errorf("the transport connected to the destination without the provided dialer")
	}

	refused := errors.New("conformance: address refused by policy")
	blocked := h.WithDialer(t, func(context.Context, string, string) (net.Conn, error) {
		return nil, transport.Blocked(refused)
	})
	res, err := deliver(t, blocked, context.Background(), NewRequest(d.URL, "dialer-refused"))
	if !errors.Is(err, transport.ErrBlocked) {
		t.Errorf("Deliver when the dialer refuses = %+v, %v; want an error that matches transport.ErrBlocked", res, err)
	}
	if n := count(d.Received(), "evt_dialer-refused"); n != 0 {
		t.Errorf("a message arrived although the dialer refused every connection")
	}
}
