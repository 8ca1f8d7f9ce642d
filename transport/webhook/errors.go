package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
)

// noAnswerError is a failed attempt that got no answer. Its message is short
// enough for a delivery's error_message and never quotes the URL (it may
// carry credentials); the cause stays reachable with errors.Is/As, so an
// error a custom DialContext marks transport.Permanent stays permanent.
type noAnswerError struct {
	msg     string
	cause   error
	timeout bool
}

func (e *noAnswerError) Error() string { return e.msg }
func (e *noAnswerError) Unwrap() error { return e.cause }

// Timeout reports whether the attempt ran out of time, as net.Error does.
func (e *noAnswerError) Timeout() bool { return e.timeout }

// noAnswer describes err from a send that got no response. parent is the
// caller's context, attempt the attempt's own (which the request timeout
// cancels).
func (t *Transport) noAnswer(parent, attempt context.Context, err error) error {
	if parent.Err() != nil {
		return fmt.Errorf("webhook: delivery abandoned: %w", parent.Err())
	}
	if context.Cause(attempt) == errRequestTimeout {
		return &noAnswerError{msg: fmt.Sprintf("request timed out after %s", t.cfg.RequestTimeout), timeout: true}
	}
	// *url.Error quotes the URL, query string included; describe the cause.
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	var (
		dnsErr  *net.DNSError
		opErr   *net.OpError
		netErr  net.Error
		certErr *tls.CertificateVerificationError
		alert   tls.AlertError
		record  tls.RecordHeaderError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	msg, timeout := "", false
	switch {
	case errors.Is(err, errConnectTimeout):
		msg, timeout = fmt.Sprintf("connect timed out after %s", t.cfg.ConnectTimeout), true
	case errors.As(err, &dnsErr):
		msg = fmt.Sprintf("DNS lookup of %s failed: %s", dnsErr.Name, dnsErr.Err)
		timeout = dnsErr.IsTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		msg = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		msg = "connection reset by peer"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		msg = "connect failed: " + opErr.Err.Error()
	case errors.As(err, &certErr), errors.As(err, &alert), errors.As(err, &record),
		errors.As(err, &unknown), errors.As(err, &host), errors.As(err, &invalid):
		msg = "TLS handshake failed: " + err.Error()
	case errors.As(err, &netErr) && netErr.Timeout():
		// net/http's own timeouts, e.g. the TLS handshake's.
		msg, timeout = err.Error(), true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		msg = "connection closed before a response"
	default:
		msg = err.Error()
	}
	return &noAnswerError{msg: msg, cause: err, timeout: timeout}
}
