package sqs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/jetrelay/jetrelay/transport"
)

// maxAttributes is SQS's limit of message attributes per message.
const maxAttributes = 10

// Config configures a Transport. The zero value of every field means its
// default.
type Config struct {
	// Endpoint overrides the SQS endpoint (http://127.0.0.1:4566 for an
	// SQS-compatible server). Queue URLs then take its scheme.
	Endpoint string
	// Region is the signing region when a queue URL does not name one
	// (sqs.<region>.amazonaws.com). Default: the AWS chain's (AWS_REGION).
	Region string
	// Credentials overrides the standard AWS credential chain.
	Credentials aws.CredentialsProvider
	// Dial, if set, opens the SDK's connections when Endpoint is empty (the
	// host's SSRF guard). The host dialled is then sqs.<region>.amazonaws.com
	// with the region taken from the tenant's queue URL, so the address
	// it resolves to is vetted like a webhook's; no proxy is used, since a
	// proxy would dial past the check. An Endpoint is the operator's
	// choice and is dialled as configured.
	Dial transport.DialFunc
}

// Transport sends deliveries to SQS queues. It is safe for concurrent use.
type Transport struct {
	client      *awssqs.Client
	queueScheme string
	region      string
}

var _ transport.Transport = (*Transport)(nil)

// New loads the AWS configuration (environment, shared files) and returns a
// Transport. It does not contact AWS.
func New(ctx context.Context, cfg Config) (*Transport, error) {
	if err := checkRegion(cfg.Region); err != nil {
		return nil, fmt.Errorf("sqs: %w", err)
	}
	opts := []func(*awsconfig.LoadOptions) error{}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(cfg.Credentials))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		// The cause names a file or profile, never a secret.
		return nil, fmt.Errorf("sqs: load AWS configuration: %w", err)
	}
	t := &Transport{queueScheme: "https", region: awsCfg.Region}
	var endpoint *string
	if cfg.Endpoint != "" {
		if err := checkEndpoint(cfg.Endpoint); err != nil {
			return nil, fmt.Errorf("sqs: %w", err)
		}
		u, _ := url.Parse(cfg.Endpoint) // checkEndpoint parsed it
		t.queueScheme = u.Scheme
		endpoint = aws.String(cfg.Endpoint)
	}
	var httpClient *http.Client
	if cfg.Dial != nil && endpoint == nil {
		httpClient = guardedClient(awsCfg.HTTPClient, cfg.Dial)
	}
	t.client = awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) {
		o.BaseEndpoint = endpoint
		o.Retryer = aws.NopRetryer{} // the engine owns retries
		if httpClient != nil {
			o.HTTPClient = httpClient
		}
	})
	return t, nil
}

// guardedClient is the SDK's HTTP client with every connection opened by
// dial and no proxy. It is a plain *http.Client on purpose: the SDK
// re-applies its dialer settings to a BuildableClient, which would replace
// dial. The base transport keeps the AWS configuration's TLS settings
// (AWS_CA_BUNDLE).
func guardedClient(base aws.HTTPClient, dial transport.DialFunc) *http.Client {
	b, ok := base.(*awshttp.BuildableClient)
	if !ok {
		b = awshttp.NewBuildableClient()
	}
	tr := b.GetTransport()
	tr.Proxy = nil
	tr.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if errors.Is(err, transport.ErrBlocked) {
			err = &refusedDial{err}
		}
		return conn, err
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// refusedDial marks the policy's refusal so that Deliver can find it under
// the SDK's wrapping and report it as it is.
type refusedDial struct{ err error }

func (e *refusedDial) Error() string { return e.err.Error() }
func (e *refusedDial) Unwrap() error { return e.err }

// Deliver sends req as one SQS message and classifies the answer: a
// MessageId is Delivered; a throttling error Throttled; any other error
// answer Failed; no answer a retryable error; a URL, attribute or FIFO id
// that can never be sent a Permanent error.
func (t *Transport) Deliver(ctx context.Context, req *transport.Request) (transport.Result, error) {
	q, err := t.parseTarget(req.URL)
	if err != nil {
		return transport.Result{}, transport.Permanent(err)
	}
	in, err := input(q, req)
	if err != nil {
		return transport.Result{}, transport.Permanent(err)
	}
	var optFns []func(*awssqs.Options)
	if q.region != "" {
		optFns = append(optFns, func(o *awssqs.Options) { o.Region = q.region })
	} else if t.region == "" {
		return transport.Result{}, transport.Permanent(errors.New("sqs: no AWS region: set AWS_REGION or JETRELAY_SQS_REGION, or use a regional queue URL"))
	}
	start := time.Now()
	_, err = t.client.SendMessage(ctx, in, optFns...)
	latency := time.Since(start)
	if err == nil {
		return transport.Result{Outcome: transport.Delivered, StatusCode: 200, Latency: latency}, nil
	}
	if refused := (*refusedDial)(nil); errors.As(err, &refused) {
		// "Blocked by SSRF policy: ...", as for a webhook; still Blocked.
		return transport.Result{Latency: latency}, refused.err
	}
	var apiErr smithy.APIError
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &apiErr) && errors.As(err, &respErr) && ctx.Err() == nil {
		r := transport.Result{Outcome: transport.Failed, StatusCode: respErr.HTTPStatusCode(), Latency: latency,
			Message: "SQS " + apiErr.ErrorCode() + ": " + apiErr.ErrorMessage(), Reason: "sqs_refused"}
		switch code := apiErr.ErrorCode(); {
		case throttling(code):
			r.Outcome, r.Reason = transport.Throttled, "sqs_throttled"
		case code == "AWS.SimpleQueueService.NonExistentQueue", code == "QueueDoesNotExist":
			r.Reason = "sqs_queue_not_found"
		}
		return r, nil
	}
	if ctx.Err() != nil {
		return transport.Result{Latency: latency}, fmt.Errorf("sqs: no answer: %w", ctx.Err())
	}
	// The SDK's message names the operation and the endpoint, no secret.
	return transport.Result{Latency: latency}, fmt.Errorf("sqs: no answer: %w", err)
}

func throttling(code string) bool {
	switch code {
	case "ThrottlingException", "Throttling", "RequestThrottled", "KmsThrottled", "KMS.ThrottlingException", "RequestLimitExceeded":
		return true
	}
	return false
}

// queue is a parsed sqs:// URL.
type queue struct {
	url    string // the queue URL SQS knows
	region string // from the host, "" when it names none
	fifo   bool
}

// parseTarget reads sqs://host/account/queue. Errors never quote the URL.
func (t *Transport) parseTarget(raw string) (queue, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return queue{}, errors.New("sqs: invalid subscription URL: it does not parse as a URL")
	}
	switch {
	case !strings.EqualFold(u.Scheme, "sqs"):
		return queue{}, fmt.Errorf("sqs: subscription URL scheme must be sqs, got %q", u.Scheme)
	case u.User != nil:
		return queue{}, errors.New("sqs: subscription URL must not carry credentials: they come from the AWS configuration")
	case u.Hostname() == "":
		return queue{}, errors.New("sqs: subscription URL has no host (sqs://sqs.<region>.amazonaws.com/<account>/<queue>)")
	case u.RawQuery != "" || u.Fragment != "":
		return queue{}, errors.New("sqs: subscription URL must not have a query or fragment")
	}
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if len(parts) != 2 || !validName(parts[0], 128) || !validName(parts[1], 80) {
		return queue{}, errors.New("sqs: subscription URL path must be /<account id>/<queue name> (letters, digits, - and _)")
	}
	q := queue{url: t.queueScheme + "://" + u.Host + "/" + parts[0] + "/" + parts[1], fifo: strings.HasSuffix(parts[1], ".fifo")}
	if labels := strings.Split(u.Hostname(), "."); len(labels) >= 3 && labels[0] == "sqs" {
		q.region = labels[1]
	}
	return q, nil
}

func validName(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	base := strings.TrimSuffix(s, ".fifo")
	for _, r := range base {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return base != ""
}

// input builds the SendMessage call: transport.IdentityHeaders and the
// custom headers as String message attributes by the webhook's names.
func input(q queue, req *transport.Request) (*awssqs.SendMessageInput, error) {
	identity, err := transport.IdentityHeaders(req)
	if err != nil {
		return nil, fmt.Errorf("sqs: %w", err)
	}
	custom, err := transport.CustomHeaders(req, sqsReserved)
	if err != nil {
		return nil, fmt.Errorf("sqs: %w", err)
	}
	attrs := make(map[string]types.MessageAttributeValue, len(identity)+len(custom))
	for _, h := range identity {
		if strings.TrimSpace(h.Value) == "" {
			return nil, fmt.Errorf("sqs: attribute %s is empty", h.Name)
		}
		attrs[h.Name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(h.Value)}
	}
	for _, h := range custom {
		switch {
		case !validAttributeName(h.Name):
			return nil, fmt.Errorf("sqs: custom header name %q is not a valid message attribute name", h.Name)
		case strings.TrimSpace(h.Value) == "":
			return nil, fmt.Errorf("sqs: custom header %s is empty; SQS refuses empty attributes", h.Name)
		}
		attrs[h.Name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(h.Value)}
	}
	if len(attrs) > maxAttributes {
		return nil, fmt.Errorf("sqs: %d message attributes, SQS allows %d: drop custom headers", len(attrs), maxAttributes)
	}
	in := &awssqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(string(req.Body)), MessageAttributes: attrs}
	if q.fifo {
		group := req.SubscriptionID
		if group == "" {
			group = "jetrelay"
		}
		if !validFIFOID(group) || !validFIFOID(req.EventID) {
			return nil, errors.New("sqs: FIFO message group (subscription id) and deduplication id (event id) must be 1-128 printable ASCII characters")
		}
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(group), aws.String(req.EventID)
	}
	return in, nil
}

// sqsReserved reports the attribute names SQS keeps for itself.
func sqsReserved(name string) bool {
	lower := strings.ToLower(name)
	return strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon.")
}

func validAttributeName(s string) bool {
	if s == "" || len(s) > 256 || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func validFIFOID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if r < '!' || r > '~' {
			return false
		}
	}
	return true
}
