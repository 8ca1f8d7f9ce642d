package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// newRequest builds the POST for req, or says why it can never be sent.
// Error messages name the offending header but never quote a value or the
// URL: either may carry a credential. The caller releases the returned
// lease (nil when the body was copied) when the attempt is over.
func (t *Transport) newRequest(ctx context.Context, req *transport.Request) (*http.Request, *bodyLease, error) {
	header, err := t.header(req)
	if err != nil {
		return nil, nil, err
	}
	// NewRequestWithContext parses the URL (the one parse a send makes);
	// checkTarget then vets what it parsed.
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, req.URL, http.NoBody)
	if err != nil {
		return nil, nil, errUnparsableURL
	}
	if err := checkTarget(httpReq.URL); err != nil {
		return nil, nil, err
	}
	httpReq.Header = header
	var lease *bodyLease // nil unless the body is lent
	switch n := len(req.Body); {
	case n == 0:
	case n <= copiedBodyMax:
		// A copy net/http may keep as long as it likes, in a type it knows
		// is in memory: it then writes the headers and the body in one
		// write (one packet for a small event) instead of flushing the
		// headers on their own first.
		body := bytes.Clone(req.Body)
		httpReq.Body = io.NopCloser(bytes.NewReader(body))
		httpReq.ContentLength = int64(n)
		httpReq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	default:
		lease = &bodyLease{body: req.Body}
		httpReq.Body = lease.reader()
		httpReq.ContentLength = int64(n)
		httpReq.GetBody = func() (io.ReadCloser, error) { return lease.reader(), nil }
	}
	return httpReq, lease, nil
}

// parseTarget accepts absolute http and https URLs with a host and a valid
// port. Userinfo is allowed (Go sends it as Basic auth) but never echoed.
func parseTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errUnparsableURL
	}
	return u, checkTarget(u)
}

// errUnparsableURL says only that a URL does not parse: both *url.Error and
// its causes quote parts of the URL, which may hold a password.
var errUnparsableURL = errors.New("webhook: invalid subscription URL: it does not parse as a URL")

// checkTarget is parseTarget's rules for a URL already parsed.
func checkTarget(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("webhook: subscription URL scheme must be http or https, got %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("webhook: subscription URL has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("webhook: subscription URL port %s is out of range", p)
		}
	}
	return nil
}

// header builds the request headers: transport.IdentityHeaders, the
// User-Agent, and the subscription's custom headers. The identity keys are
// assigned directly so that traceparent goes out in lowercase, as the W3C
// spec spells it. Custom names are canonicalized, so that Go's own lookups
// (Authorization against URL userinfo) see them.
func (t *Transport) header(req *transport.Request) (http.Header, error) {
	identity, err := transport.IdentityHeaders(req)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	custom, err := transport.CustomHeaders(req, nil)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	h := make(http.Header, len(identity)+1+len(custom))
	// One backing array for every single value (each header's slice is
	// capped at its own value, so an Add later cannot overwrite the next).
	values := make([]string, 0, len(identity)+1)
	one := func(name, value string) {
		values = append(values, value)
		h[name] = values[len(values)-1 : len(values) : len(values)]
	}
	for _, x := range identity {
		one(x.Name, x.Value)
	}
	one(proto.HeaderUserAgent, t.cfg.UserAgent)
	for _, x := range custom {
		h.Add(x.Name, x.Value)
	}
	return h, nil
}
