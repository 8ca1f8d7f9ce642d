package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/jetrelay/jetrelay/proto"
)

// SystemTenant is the owner admin gives subscriptions created on the admin
// plane without ?tenant_id=. Its subscriptions receive every tenant's events.
const SystemTenant = "__system__"

// Subscription is what admin's POST /v1/admin/webhooks stores under
// webhook:{id} (contract §3.1). Zero values mean admin's defaults, noted per
// field; JSON applies the deterministic ones, CreateSubscription also mints
// the id, the creation time and the secret.
type Subscription struct {
	// ID is the subscription id; "" makes CreateSubscription mint one
	// (NewSubscriptionID).
	ID string
	// TenantID is the owner. "" means SystemTenant, admin's admin-plane
	// default; a literal null owner cannot be expressed.
	TenantID string
	// Name (≤256) and Description (≤1024) are left out of the record when "".
	Name, Description string
	// URL is the http(s) endpoint (≤2048), or a transport plugin's URL
	// when the Writer allows its scheme (AllowSchemes). Admin's security
	// policy (https-only, blocked CIDRs) is not applied: tests deliver to
	// loopback.
	URL string
	// EventTypes is always written: nil as null, empty as []. At least one
	// of EventTypes and EventCategories must be non-empty.
	EventTypes []string
	// EventCategories is left out of the record when empty.
	EventCategories []string
	// ScopeFilter is left out of the record when "" (matches every scope).
	ScopeFilter string
	// Headers are sent with every delivery; stored in plaintext, as admin
	// does. Written with keys sorted (admin keeps request order).
	Headers map[string]string
	// Status defaults to ACTIVE.
	Status proto.SubscriptionStatus
	// RetryPolicy nil means admin's create default {5, 1000, 2.0, 60000};
	// nil fields inside take the same defaults, since admin's create always
	// stores all four.
	RetryPolicy *proto.RetryPolicy
	// DisableAfterFailures 0 means the default 10 (for events a threshold of
	// 0 behaves exactly like 1).
	DisableAfterFailures int
	// ConsecutiveFailures is 0 on create; tests set it to seed a
	// subscription close to auto-disable.
	ConsecutiveFailures int
	// CreatedAt zero means now (CreateSubscription).
	CreatedAt time.Time
	// SigningSecret blank means a generated one (NewSigningSecret). It is
	// stored under webhook:secret:{id}, never in this record.
	SigningSecret string
	// Metadata, when set, must be a JSON object; it is written verbatim.
	Metadata json.RawMessage
}

// Validation limits admin enforces on a subscription (contract §9).
const (
	maxURLLen         = 2048
	maxNameLen        = 256
	maxDescriptionLen = 1024
)

// Validate checks s as admin's create endpoint would (contract §9), plus the
// checks that keep a record usable: headers that can be sent (no CR/LF) and
// ids that are safe inside a Redis key. It does not check the URL against
// admin's webhook-security policy.
func (s Subscription) Validate() error { return s.validate(nil) }

// validate is Validate accepting URLs with the extra schemes too.
func (s Subscription) validate(extraSchemes []string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.ID != "" {
		if err := checkKeyPart("subscription id", s.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if s.TenantID != "" {
		if err := checkKeyPart("tenant id", s.TenantID); err != nil {
			errs = append(errs, err)
		}
	}
	if javaLen(s.Name) > maxNameLen {
		bad("name is longer than %d characters", maxNameLen)
	}
	if javaLen(s.Description) > maxDescriptionLen {
		bad("description is longer than %d characters", maxDescriptionLen)
	}
	if err := checkURL(s.URL, extraSchemes); err != nil {
		errs = append(errs, err)
	}
	if len(s.EventTypes) == 0 && len(s.EventCategories) == 0 {
		bad("subscription must retain at least one event_type or event_category")
	}
	for _, t := range s.EventTypes {
		if err := checkSelector("event type", t); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range s.EventCategories {
		if err := checkSelector("event category", c); err != nil {
			errs = append(errs, err)
		}
	}
	if concreteOwner(s.owner()) {
		for _, t := range s.EventTypes {
			if !tenantAccessible(categoryOf(t)) {
				bad("event type %s is admin-only; tenants can subscribe to budget.*, reservation.*, tenant.* only", t)
			}
		}
		for _, c := range s.EventCategories {
			if !tenantAccessible(c) {
				bad("event category %s is admin-only; tenants can subscribe to budget, reservation, tenant only", c)
			}
		}
	}
	for k, v := range s.Headers {
		// Admin stores headers unchecked (even reserved names, which the
		// events service must cope with); only unsendable ones are refused.
		if !proto.ValidHeaderName(k) {
			bad("header name %s is not an HTTP token", strconv.Quote(k))
		} else if !proto.ValidHeaderValue(v) {
			bad("header %s has a control character (CR, LF, …) in its value", k)
		}
	}
	if s.Status != "" && !s.Status.Known() {
		bad("status %s is not ACTIVE, PAUSED or DISABLED", strconv.Quote(string(s.Status)))
	}
	if p := s.RetryPolicy; p != nil {
		if v := p.MaxRetries; v != nil && (*v < 0 || *v > 10) {
			bad("retry_policy.max_retries %d is outside 0..10", *v)
		}
		if v := p.InitialDelayMs; v != nil && (*v < 100 || *v > 60000) {
			bad("retry_policy.initial_delay_ms %d is outside 100..60000", *v)
		}
		if v := p.BackoffMultiplier; v != nil && !(*v >= 1.0 && *v <= 10.0) {
			bad("retry_policy.backoff_multiplier %v is outside 1.0..10.0", *v)
		}
		if v := p.MaxDelayMs; v != nil && (*v < 1000 || *v > 3600000) {
			bad("retry_policy.max_delay_ms %d is outside 1000..3600000", *v)
		}
	}
	if len(s.Metadata) > 0 && !isJSONObject(s.Metadata) {
		bad("metadata must be a JSON object")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("admin: invalid subscription: %w", err)
	}
	return nil
}

// JSON is the webhook:{id} record exactly as admin serializes it: field
// order of WebhookSubscription, literal nulls for always-written fields,
// NON_NULL fields left out. An empty ID or zero CreatedAt is written as null;
// CreateSubscription fills both first.
func (s Subscription) JSON() []byte {
	o := newObject(512)
	o.str("subscription_id", s.ID)
	o.str("tenant_id", s.owner())
	o.optStr("name", s.Name)
	o.optStr("description", s.Description)
	o.str("url", s.URL)
	o.strings("event_types", s.EventTypes)
	if len(s.EventCategories) > 0 {
		o.strings("event_categories", s.EventCategories)
	}
	o.optStr("scope_filter", s.ScopeFilter)
	if len(s.Headers) > 0 {
		o.key("headers")
		h := newObject(128)
		for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
			h.str(k, s.Headers[k])
		}
		o.b = append(o.b, h.bytes()...)
	}
	o.str("status", string(s.status()))
	o.key("retry_policy")
	o.b = appendRetryPolicy(o.b, s.RetryPolicy)
	o.int("disable_after_failures", int64(s.disableAfter()))
	o.int("consecutive_failures", int64(s.ConsecutiveFailures))
	o.instant("created_at", s.CreatedAt)
	o.optRaw("metadata", s.Metadata)
	return o.bytes()
}

func (s Subscription) owner() string {
	if s.TenantID == "" {
		return SystemTenant
	}
	return s.TenantID
}

func (s Subscription) status() proto.SubscriptionStatus {
	if s.Status == "" {
		return proto.SubscriptionActive
	}
	return s.Status
}

func (s Subscription) disableAfter() int {
	if s.DisableAfterFailures == 0 {
		return proto.DefaultDisableAfterFailures
	}
	return s.DisableAfterFailures
}

// appendRetryPolicy writes p with every field filled, as admin's create
// stores it. backoff_multiplier is a Java double, so 2 is written "2.0".
func appendRetryPolicy(b []byte, p *proto.RetryPolicy) []byte {
	var rp proto.RetryPolicy
	if p != nil {
		rp = *p
	}
	maxRetries, initial, mult, maxDelay := int64(proto.DefaultMaxRetries), int64(proto.DefaultInitialDelayMs), proto.DefaultBackoffMultiplier, int64(proto.DefaultMaxDelayMs)
	if rp.MaxRetries != nil {
		maxRetries = int64(*rp.MaxRetries)
	}
	if rp.InitialDelayMs != nil {
		initial = *rp.InitialDelayMs
	}
	if rp.BackoffMultiplier != nil {
		mult = *rp.BackoffMultiplier
	}
	if rp.MaxDelayMs != nil {
		maxDelay = *rp.MaxDelayMs
	}
	o := newObject(96)
	o.int("max_retries", maxRetries)
	o.int("initial_delay_ms", initial)
	o.key("backoff_multiplier")
	o.b = appendJavaDouble(o.b, mult)
	o.int("max_delay_ms", maxDelay)
	return append(b, o.bytes()...)
}

// appendJavaDouble writes v as Java's Double.toString does for values in
// [1e-3, 1e7), the only form a validated multiplier (1.0..10.0) can take:
// shortest round-trip digits with at least one fractional digit.
func appendJavaDouble(b []byte, v float64) []byte {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	b = append(b, s...)
	if !strings.Contains(s, ".") {
		b = append(b, ".0"...)
	}
	return b
}

// checkURL applies admin's URL rules to http(s) URLs. A URL with one of
// extraSchemes (a transport plugin's: nats, sqs) needs a host or a path;
// its transport checks the rest when it delivers. Errors never quote the
// URL: it may carry a password.
func checkURL(raw string, extraSchemes []string) error {
	if strings.TrimSpace(raw) == "" {
		return errors.New("url is required")
	}
	if len(raw) > maxURLLen {
		return fmt.Errorf("url is longer than %d characters", maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("url is malformed: it does not parse as a URL")
	}
	switch scheme := strings.ToLower(u.Scheme); {
	case u.Scheme == "http" || u.Scheme == "https":
		if u.Hostname() == "" {
			return fmt.Errorf("url (%s): no host in URL", u.Scheme)
		}
	case scheme != "" && slices.Contains(extraSchemes, scheme):
		if u.Opaque != "" || (u.Host == "" && strings.Trim(u.Path, "/") == "") {
			return fmt.Errorf("url (%s): needs a host or a path (%s://host/path)", scheme, scheme)
		}
	case len(extraSchemes) > 0:
		return fmt.Errorf("url scheme %s is not allowed: use http, https, %s", strconv.Quote(u.Scheme), strings.Join(extraSchemes, ", "))
	default:
		return fmt.Errorf("url scheme %s: only HTTP(S) URLs are allowed", strconv.Quote(u.Scheme))
	}
	return nil
}

// checkKeyPart rejects values that would corrupt the Redis key they are
// part of or a log line that prints them.
func checkKeyPart(what, v string) error {
	if len(v) > 256 {
		return fmt.Errorf("%s is longer than 256 bytes", what)
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%s %s contains whitespace or a control character", what, strconv.Quote(v))
		}
	}
	return nil
}

// checkSelector accepts the lowercase dotted names Cycles uses for event
// types and categories (budget.exhausted, api_key); admin's enums are closed,
// but the vocabulary is not enforced here so tests can subscribe to types
// the events service does not know.
func checkSelector(what, v string) error {
	if v == "" {
		return fmt.Errorf("%s must not be empty", what)
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.') {
			return fmt.Errorf("%s %s must be lowercase letters, digits, '_' and '.'", what, strconv.Quote(v))
		}
	}
	return nil
}

// javaLen is the length Java's @Size measures: UTF-16 code units.
func javaLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

func isJSONObject(raw json.RawMessage) bool {
	t := strings.TrimLeft(string(raw), " \t\r\n")
	return strings.HasPrefix(t, "{") && json.Valid(raw)
}
