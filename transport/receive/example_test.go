package receive_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

// A webhook endpoint: verify first, then dedupe, then the handler that has
// side effects. The handler runs once per event id however often the event
// is delivered.
func Example() {
	verifier, err := receive.NewVerifier([]string{"whsec_current", "whsec_previous"})
	if err != nil {
		panic(err)
	}
	// In production: redisstore.New(client) or pgstore.New(pool, "").
	deduper := receive.NewDeduper(receive.NewMemoryStore(0))
	handled := 0
	endpoint := verifier.Middleware(deduper.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // the verified bytes, safe to parse now
		handled++
		fmt.Printf("handling %s: %s\n", r.Header.Get(proto.HeaderEventID), body)
	})))

	body := `{"event_id":"evt_1","event_type":"tenant.created"}`
	send := func(secret string) int {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set(proto.HeaderEventID, "evt_1")
		req.Header.Set(proto.HeaderSignature, proto.Sign(secret, []byte(body)))
		w := httptest.NewRecorder()
		endpoint.ServeHTTP(w, req)
		return w.Code
	}
	fmt.Println("first delivery:", send("whsec_current"))
	fmt.Println("retry of the same event:", send("whsec_current"))
	fmt.Println("forged:", send("whsec_guess"))
	fmt.Println("handled:", handled)
	// Output:
	// handling evt_1: {"event_id":"evt_1","event_type":"tenant.created"}
	// first delivery: 200
	// retry of the same event: 200
	// forged: 401
	// handled: 1
}

// A NATS subscriber of a jetrelay nats:// subscription: verify, then run the
// side effect once per event id. A message that does not verify is dropped:
// redelivering it will not make it valid.
func ExampleVerifier_VerifyMessage() {
	verifier, _ := receive.NewVerifier([]string{"whsec_current"})
	deduper := receive.NewDeduper(receive.NewMemoryStore(0))
	handle := func(m *nats.Msg) {
		id, err := verifier.VerifyMessage(receive.NATSMessage(m.Data, m.Header))
		if err != nil {
			fmt.Println("dropped:", err)
			return
		}
		outcome, _ := deduper.Do(context.Background(), id.EventID, func(context.Context) error {
			return nil // the side effect
		})
		fmt.Println(id.EventID, outcome)
	}

	body := []byte(`{"event_id":"evt_2"}`)
	msg := &nats.Msg{Data: body, Header: nats.Header{}}
	msg.Header.Set(proto.HeaderEventID, "evt_2")
	msg.Header.Set(proto.HeaderSignature, proto.Sign("whsec_current", body))
	handle(msg)
	handle(msg)
	msg.Header.Set(proto.HeaderSignature, proto.Sign("whsec_other", body))
	handle(msg)
	// Output:
	// evt_2 processed
	// evt_2 duplicate
	// dropped: receive: X-Cycles-Signature does not match the body
}
