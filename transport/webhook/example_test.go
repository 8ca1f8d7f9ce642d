package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

// A receiver answers 429 with Retry-After: the transport reports it as
// throttled, with the wait the receiver asked for, and leaves the retry to
// the engine.
func Example() {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer receiver.Close()

	tr, err := webhook.New(webhook.Config{})
	if err != nil {
		panic(err)
	}
	defer tr.Close()

	body := []byte(`{"event_id":"evt-1","event_type":"tenant.created"}`)
	res, err := tr.Deliver(context.Background(), &transport.Request{
		URL:         receiver.URL,
		Body:        body,
		EventID:     "evt-1",
		EventType:   "tenant.created",
		Signature:   proto.Sign("whsec_test", body),
		TraceID:     "0af7651916cd43dd8448eb211c80319c",
		Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	})
	fmt.Println(res.Outcome, res.StatusCode, res.RetryAfter, res.Message, err)
	// Output: throttled 429 7s HTTP 429 <nil>
}
