package transport

import "fmt"

// Bounds on a subscription's custom header set (Request.Headers). Admin
// does not validate headers at all (contract §9), so a record writer could
// store thousands of them or megabytes of values; real sets are a handful
// of short credentials and tags.
const (
	// MaxCustomHeaders is how many custom headers one request may carry.
	MaxCustomHeaders = 64
	// MaxCustomHeaderBytes bounds the custom headers' names and values
	// together, in bytes.
	MaxCustomHeaderBytes = 16 << 10
)

// CheckHeaderSetSize refuses a custom header set over MaxCustomHeaders or
// MaxCustomHeaderBytes. It says how large the set is, never what it holds.
// A transport returns the error as Permanent: the set can never be sent.
func CheckHeaderSetSize(headers map[string]string) error {
	if len(headers) > MaxCustomHeaders {
		return fmt.Errorf("%d custom headers, at most %d may be set", len(headers), MaxCustomHeaders)
	}
	size := 0
	for name, value := range headers {
		size += len(name) + len(value)
	}
	if size > MaxCustomHeaderBytes {
		return fmt.Errorf("custom headers hold %d bytes of names and values, at most %d may be set", size, MaxCustomHeaderBytes)
	}
	return nil
}
