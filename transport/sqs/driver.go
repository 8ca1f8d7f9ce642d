package sqs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jetrelay/jetrelay/transport"
)

// Settings the driver reads from the host (transport.Env.Getenv).
const (
	SettingEndpoint = "JETRELAY_SQS_ENDPOINT"
	SettingRegion   = "JETRELAY_SQS_REGION"
)

func init() { transport.Register("sqs", driver{}) }

// driver opens the sqs:// transport from the host's settings and describes
// them, so that the host lists and checks them with its own.
type driver struct{}

var (
	_ transport.Driver       = driver{}
	_ transport.Describer    = driver{}
	_ transport.URLValidator = driver{}
)

// Open builds the transport; the host's dialer (its SSRF guard) opens the
// connections to AWS endpoints that tenants' queue URLs name.
func (driver) Open(ctx context.Context, env transport.Env) (transport.Transport, error) {
	return New(ctx, Config{Endpoint: env.Setting(SettingEndpoint), Region: env.Setting(SettingRegion), Dial: env.Dialer()})
}

// Settings are the endpoint override and the default region.
func (driver) Settings() []transport.Setting {
	return []transport.Setting{
		{Env: SettingEndpoint, Flag: "sqs-endpoint", Check: checkEndpoint,
			Usage: "endpoint of an SQS-compatible server for sqs:// subscriptions (http(s) URL without credentials); empty: AWS. Credentials come from the standard AWS_* variables"},
		{Env: SettingRegion, Flag: "sqs-region", Check: checkRegion,
			Usage: "AWS region of sqs:// subscriptions whose queue host names none (default: AWS_REGION)"},
	}
}

// checkEndpoint accepts "" or an http(s) URL with a host and no
// credentials. Its errors never quote the value: a URL that carries
// credentials by mistake must not reach a log.
func checkEndpoint(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("endpoint is not a URL")
	case u.User != nil:
		return errors.New("endpoint must not carry credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead); value not shown")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("endpoint must be an http or https URL, got scheme %q", u.Scheme)
	case u.Hostname() == "":
		return errors.New("endpoint has no host")
	case u.RawQuery != "" || u.Fragment != "":
		return errors.New("endpoint must not have a query or fragment")
	}
	return nil
}

// checkRegion accepts "" or what an AWS region name is made of.
func checkRegion(region string) error {
	if strings.ContainsFunc(region, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') }) {
		return fmt.Errorf("must be an AWS region name such as eu-west-1, got %q", region)
	}
	return nil
}

// ValidateURL accepts sqs://<queue host>/<account id>/<queue name>, the
// form every send parses.
func (driver) ValidateURL(rawURL string) error {
	_, err := (&Transport{queueScheme: "https"}).parseTarget(rawURL)
	return err
}
