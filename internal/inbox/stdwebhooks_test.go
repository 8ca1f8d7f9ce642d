package inbox_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/inbox"
	"github.com/jetrelay/jetrelay/proto"
)

// postStandard posts a Standard Webhooks delivery signed at ts with sec,
// carrying X-Cycles-Signature too unless cycles is false.
func postStandard(t *testing.T, addr, sec, eventID, body string, ts time.Time, cycles bool) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(body))
	req.Header.Set(proto.HeaderEventID, eventID)
	req.Header.Set(proto.HeaderEventType, "tenant.created")
	if cycles {
		req.Header.Set(proto.HeaderSignature, proto.Sign(sec, []byte(body)))
	}
	req.Header.Set(proto.HeaderWebhookID, eventID)
	req.Header.Set(proto.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(proto.HeaderWebhookSignature, proto.SignStandardWebhooks(proto.StandardWebhooksKey(sec), eventID, ts.Unix(), []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The inbox takes Standard Webhooks deliveries, refuses one replayed past
// the tolerance although its X-Cycles-Signature still matches, and with
// --standard-webhooks-only refuses X-Cycles-Signature alone. A forward
// carries X-Cycles-Signature, not the timestamped headers.
func TestInbox_VerifiesStandardWebhooksAndRefusesReplays(t *testing.T) {
	pg := database(t)
	tg, url := newTarget(t)
	s := startInbox(t, inbox.Config{Listen: "127.0.0.1:0", PostgresURL: pg.URL, Forward: url, Secrets: []string{secret}})
	body := `{"event_id":"evt-sw"}`
	if code := postStandard(t, s.Addr(), secret, "evt-sw", body, time.Now(), true); code != http.StatusAccepted {
		t.Fatalf("Standard Webhooks delivery answered %d, want 202", code)
	}
	if code := postStandard(t, s.Addr(), secret, "evt-replayed", body, time.Now().Add(-6*time.Minute), true); code != http.StatusUnauthorized {
		t.Fatalf("a delivery replayed 6 minutes later answered %d, want 401", code)
	}
	if code := post(t, s.Addr(), secret, "evt-cycles", body); code != http.StatusAccepted {
		t.Fatalf("an X-Cycles-Signature delivery during the migration answered %d, want 202", code)
	}
	await(t, "evt-sw is forwarded", func() bool { return status(t, s, "evt-sw") == inbox.StatusDone })
	tg.mu.Lock()
	h := tg.got["evt-sw"][0]
	tg.mu.Unlock()
	if h.Get(proto.HeaderSignature) != proto.Sign(secret, []byte(body)) || h.Get(proto.HeaderWebhookSignature) != "" || h.Get(proto.HeaderWebhookTimestamp) != "" {
		t.Errorf("forward headers %v: want X-Cycles-Signature and no webhook-* header", h)
	}
	if e, err := s.Store().Get(context.Background(), "evt-replayed"); err == nil {
		t.Errorf("the replayed delivery was stored: %+v", e)
	}

	strict := startInbox(t, inbox.Config{Listen: "127.0.0.1:0", PostgresURL: pg.URL, Forward: url, Secrets: []string{secret},
		StandardWebhooksOnly: true, Workers: -1})
	if code := post(t, strict.Addr(), secret, "evt-cycles-only", body); code != http.StatusUnauthorized {
		t.Fatalf("--standard-webhooks-only: X-Cycles-Signature alone answered %d, want 401", code)
	}
	if code := postStandard(t, strict.Addr(), secret, "evt-sw-only", body, time.Now(), false); code != http.StatusAccepted {
		t.Fatalf("--standard-webhooks-only: a Standard Webhooks delivery answered %d, want 202", code)
	}
}
