package admin

import (
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/proto"
)

func TestAllowSchemes_StoresPluginURLsAsAdminRecordsAndLeavesTheOriginalStrict(t *testing.T) {
	base, rdb := newWriter(t, true)
	w := base.AllowSchemes("nats", "SQS")
	for _, u := range []string{
		"nats:///cycles.events",
		"nats://user:pw@127.0.0.1:4222/cycles.events",
		"sqs://sqs.eu-west-1.amazonaws.com/123456789012/events.fifo",
	} {
		s := Subscription{TenantID: "acme", URL: u, EventTypes: []string{"budget.exhausted"}}
		id, _, err := w.CreateSubscription(ctxT(t), s)
		if err != nil {
			t.Fatalf("AllowSchemes(nats, sqs) refused %s: %v", u, err)
		}
		raw := getString(t, rdb, "webhook:"+id)
		sub, err := proto.ParseSubscription([]byte(raw))
		if err != nil {
			t.Fatalf("stored record unreadable: %v", err)
		}
		s.ID, s.CreatedAt = id, sub.CreatedAt.Time
		if raw != string(s.JSON()) {
			t.Errorf("stored record is not the admin serialization\n got: %s\nwant: %s", raw, s.JSON())
		}
		if _, _, err := base.CreateSubscription(ctxT(t), Subscription{URL: u, EventTypes: []string{"budget.exhausted"}}); err == nil {
			t.Errorf("the original writer accepted %s: AllowSchemes must not widen it", u)
		}
	}
	for _, u := range []string{"nats://", "nats:subject", "ftp://example.com/x", "sqs:///"} {
		if _, _, err := w.CreateSubscription(ctxT(t), Subscription{URL: u, EventTypes: []string{"budget.exhausted"}}); err == nil {
			t.Errorf("AllowSchemes(nats, sqs) accepted %q", u)
		}
	}
}

func TestSubscriptionValidate_URLErrorsNeverQuoteTheURL(t *testing.T) {
	const pw = "url-secret-pw"
	for _, u := range []string{
		"ftp://user:" + pw + "@example.com/x",
		"https://user:" + pw + "@[::1/x",
		"https://user:" + pw + "@/x",
		"nats://user:" + pw + "@127.0.0.1:4222/s",
	} {
		err := Subscription{URL: u, EventTypes: []string{"budget.exhausted"}}.Validate()
		if err == nil {
			t.Errorf("Validate accepted %q", u)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("error quotes the URL's password: %v", err)
		}
	}
}
