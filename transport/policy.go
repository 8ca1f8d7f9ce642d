package transport

// URLCheckKey is the Env.Shared key under which the host offers its
// destination policy's URL check, a func(rawURL string) error (jetrelay's
// SSRF guard: https only, allowed patterns). A driver whose URLs name
// tenant-chosen hosts calls it before each send and returns its error as it
// is: a Blocked or Permanent error stays so.
type URLCheckKey struct{}

// URLCheck returns the check the host offers under URLCheckKey, or nil when
// it offers none.
func (env Env) URLCheck() func(rawURL string) error {
	c, _ := env.Shared[URLCheckKey{}].(func(string) error)
	return c
}
