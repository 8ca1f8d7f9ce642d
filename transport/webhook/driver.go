package webhook

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// Settings the driver reads from the host (transport.Env.Getenv).
const (
	SettingConnectTimeout = "JETRELAY_HTTP_CONNECT_TIMEOUT"
	SettingRequestTimeout = "JETRELAY_HTTP_REQUEST_TIMEOUT"
	SettingUserAgent      = "JETRELAY_USER_AGENT"
	// settingWorkers is the engine's worker count: a receiver may get that
	// many concurrent sends, so that many idle connections are kept for it.
	settingWorkers = "JETRELAY_WORKERS"
)

// Registered like every other transport: the http and https schemes share
// one driver, so the host opens one Transport for both.
func init() {
	transport.Register("http", driver{})
	transport.Register("https", driver{})
}

// driver opens the webhook transport from the host's settings, with the
// host's destination policy (URL check and dialer), and describes its
// settings so that the host lists and checks them with its own.
type driver struct{}

var (
	_ transport.Driver       = driver{}
	_ transport.Describer    = driver{}
	_ transport.URLValidator = driver{}
)

// Open builds the transport. Settings were checked when the host loaded
// them; a value that still does not parse is an error here too.
func (driver) Open(_ context.Context, env transport.Env) (transport.Transport, error) {
	connect, err := duration(env.Setting(SettingConnectTimeout))
	if err != nil {
		return nil, errors.New("webhook: " + SettingConnectTimeout + " " + err.Error())
	}
	request, err := duration(env.Setting(SettingRequestTimeout))
	if err != nil {
		return nil, errors.New("webhook: " + SettingRequestTimeout + " " + err.Error())
	}
	idle, _ := strconv.Atoi(env.Setting(settingWorkers))
	return New(Config{
		UserAgent: env.Setting(SettingUserAgent), ConnectTimeout: connect, RequestTimeout: request,
		MaxIdleConnsPerHost: max(idle, 0),
		DialContext:         env.Dialer(), CheckURL: env.URLCheck(),
	})
}

// Settings are the timeouts and the User-Agent.
func (driver) Settings() []transport.Setting {
	checkDuration := func(v string) error {
		_, err := duration(v)
		return err
	}
	return []transport.Setting{
		{Env: SettingConnectTimeout, Flag: "http-connect-timeout", Default: "5s", Usage: "webhook connect timeout", Check: checkDuration},
		{Env: SettingRequestTimeout, Flag: "http-request-timeout", Default: "30s", Usage: "webhook request timeout (until response headers)", Check: checkDuration},
		{Env: SettingUserAgent, Flag: "user-agent", Usage: "webhook User-Agent (default " + DefaultUserAgent + ")", Check: func(v string) error {
			if !proto.ValidHeaderValue(v) {
				return errors.New("contains characters not allowed in a header value")
			}
			return nil
		}},
	}
}

// duration parses a timeout setting: "" means the default, a negative
// value is refused.
func duration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, errors.New("is not a duration (e.g. 30s, 5m)")
	case d < 0:
		return 0, errors.New("must not be negative")
	}
	return d, nil
}

// ValidateURL accepts absolute http and https URLs with a host and a valid
// port, the form every send parses. Whether the destination policy allows
// the host is decided at send time (it can change without a restart).
func (driver) ValidateURL(rawURL string) error {
	_, err := parseTarget(rawURL)
	return err
}
