package natsink_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/transporttest"
)

func TestDeliver_RefusesAnOversizedCustomHeaderSetWithoutPublishing(t *testing.T) {
	_, nc, _ := testenv.NATS(t)
	sub, err := nc.SubscribeSync("hdr.events")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(t, nc)
	many := map[string]string{}
	for i := range 500 {
		many[fmt.Sprintf("X-Tag-%03d", i)] = "v"
	}
	for name, headers := range map[string]map[string]string{
		"500 headers":  many,
		"a 1 MB value": {"X-Big": strings.Repeat("v", 1<<20)},
	} {
		req := transporttest.NewRequest("nats:///hdr.events", "hdr")
		req.Headers = headers
		if _, err := tr.Deliver(context.Background(), req); !errors.Is(err, transport.ErrPermanent) || !strings.Contains(err.Error(), "at most") {
			t.Errorf("%s: Deliver error = %v, want a permanent error stating the bound", name, err)
		}
	}
	if m, err := sub.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("published %s despite the refusal", m.Subject)
	}
}
