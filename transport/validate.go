package transport

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// URLValidator is implemented by a driver that can tell whether a
// subscription URL of its scheme can ever be delivered to, without
// contacting the destination (a missing subject, a malformed queue path, a
// bad port). The host asks it when an operator creates a subscription
// (`jetrelay subscriptions create`) and before every delivery (OpenRegistry
// registers the driver's transport behind the check), so a bad URL is
// refused up front and fails a delivery permanently instead of being
// retried. Its error must not quote the URL:
// it may hold credentials.
type URLValidator interface {
	ValidateURL(rawURL string) error
}

// ValidateURL checks rawURL the way the host does before it stores a
// subscription: its scheme must have a registered driver, and that driver's
// ValidateURL (when it has one) must accept it.
func ValidateURL(rawURL string) error {
	scheme, err := schemeOf(rawURL)
	if err != nil {
		return err
	}
	drivers.RLock()
	d, ok := drivers.m[scheme]
	drivers.RUnlock()
	if !ok {
		return fmt.Errorf("%w %q (registered: %s; a transport plugin not compiled in?)", ErrUnsupportedScheme, scheme, strings.Join(Drivers(), ", "))
	}
	if v, ok := d.(URLValidator); ok {
		return v.ValidateURL(rawURL)
	}
	return nil
}

// schemeOf returns rawURL's scheme in lowercase. Its error never quotes the
// URL: a *url.Error and its causes would, credentials included.
func schemeOf(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", errors.New("transport: malformed URL: it does not parse as a URL")
	}
	return strings.ToLower(u.Scheme), nil
}

// checked is a driver's transport behind its URL check: a URL the driver
// refuses fails permanently before Deliver is reached.
type checked struct {
	Transport
	v URLValidator
}

// Deliver checks req.URL, then delivers.
func (c checked) Deliver(ctx context.Context, req *Request) (Result, error) {
	if err := c.v.ValidateURL(req.URL); err != nil {
		return Result{}, Permanent(err)
	}
	return c.Transport.Deliver(ctx, req)
}
