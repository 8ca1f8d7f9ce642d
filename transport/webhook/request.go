package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// newRequest builds the POST for req, or says why it can never be sent.
// Error messages name the offending header but never quote a value or the
// URL: either may carry a credential. The caller releases the returned
// lease when the attempt is over.
func (t *Transport) newRequest(ctx context.Context, req *transport.Request) (*http.Request, *bodyLease, error) {
	u, err := parseTarget(req.URL)
	if err != nil {
		return nil, nil, err
	}
	header, err := t.header(req)
	if err != nil {
		return nil, nil, err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), http.NoBody)
	if err != nil {
		return nil, nil, errors.New("webhook: cannot build a request for the subscription URL")
	}
	httpReq.Header = header
	lease := &bodyLease{body: req.Body}
	if len(req.Body) > 0 {
		httpReq.Body = lease.reader()
		httpReq.ContentLength = int64(len(req.Body))
		httpReq.GetBody = func() (io.ReadCloser, error) { return lease.reader(), nil }
	}
	return httpReq, lease, nil
}

// parseTarget accepts absolute http and https URLs with a host and a valid
// port. Userinfo is allowed (Go sends it as Basic auth) but never echoed.
func parseTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// Both *url.Error and its causes quote parts of the URL, which may
		// hold a password: say only that it does not parse.
		return nil, errors.New("webhook: invalid subscription URL: it does not parse as a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("webhook: subscription URL scheme must be http or https, got %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, errors.New("webhook: subscription URL has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("webhook: subscription URL port %s is out of range", p)
		}
	}
	return u, nil
}

// header builds the request headers in the reference's order (contract
// §6.8); Go writes them sorted by name, which no receiver may depend on.
// The standard keys are assigned directly so that traceparent goes out in
// lowercase, as the W3C spec spells it. Custom names are canonicalized, so
// that Go's own lookups (Authorization against URL userinfo) see them, and
// sorted, so that a config with two bad headers always reports the same one.
func (t *Transport) header(req *transport.Request) (http.Header, error) {
	h := make(http.Header, 8+len(req.Headers))
	checkValue := func(name, value string) error {
		if !proto.ValidHeaderValue(value) {
			return fmt.Errorf("webhook: value of header %s contains control characters (CR, LF, NUL, ...)", name)
		}
		return nil
	}
	standard := []struct {
		name, value string
		send        bool
	}{
		{proto.HeaderContentType, "application/json", true},
		{proto.HeaderUserAgent, t.cfg.UserAgent, true},
		{proto.HeaderEventID, req.EventID, true},
		{proto.HeaderEventType, req.EventType, true},
		{proto.HeaderTraceID, req.TraceID, true},
		{proto.HeaderTraceparent, req.Traceparent, true},
		{proto.HeaderRequestID, req.RequestID, strings.TrimSpace(req.RequestID) != ""},
		{proto.HeaderSignature, req.Signature, req.Signature != ""},
	}
	for _, s := range standard {
		if !s.send {
			continue
		}
		if err := checkValue(s.name, s.value); err != nil {
			return nil, err
		}
		h[s.name] = []string{s.value}
	}
	if err := transport.CheckHeaderSetSize(req.Headers); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(req.Headers)) {
		switch {
		case !proto.ValidHeaderName(name):
			return nil, fmt.Errorf("webhook: custom header name %q is not a valid HTTP header name", name)
		case proto.ReservedHeader(name):
			return nil, fmt.Errorf("webhook: custom header %s is reserved: the relay or HTTP itself sets it", name)
		}
		if err := checkValue(name, req.Headers[name]); err != nil {
			return nil, err
		}
		h.Add(name, req.Headers[name])
	}
	return h, nil
}
