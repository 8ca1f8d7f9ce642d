package handback

// WithAfterRead returns c with a hook Run calls after it read each stream
// message and before it handles it: a test holds the scan there while the
// server fires wake-ups.
func WithAfterRead(c Config, f func(seq uint64)) Config {
	c.afterRead = f
	return c
}
