package webhook

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/transport"
)

// FuzzRequestHeaders feeds stored custom headers and identity values to the
// request builder: whatever it accepts must go on the wire as exactly the
// headers it meant, with no injected line and no reserved name.
func FuzzRequestHeaders(f *testing.F) {
	f.Add("X-Api-Key", "k-123", "evt-1", "https://hooks.example.com/in")
	f.Add("X-A", "a\r\nX-Injected: 1", "evt-1", "https://h/")
	f.Add("Content-Type", "text/plain", "evt\n1", "http://h:99999/")
	f.Add("x-cycles-signature", "sha256=0", "evt-1", "https://u:p@h/?q=1")
	f.Add("Host", "evil", "", "ftp://h/")
	f.Add("X-Ünicode", "\x00", "evt-1", "https://h/")
	tr, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name, value, eventID, url string) {
		req := &transport.Request{URL: url, Body: []byte(`{}`), EventID: eventID, EventType: "tenant.created",
			Headers: map[string]string{name: value}}
		httpReq, lease, err := tr.newRequest(context.Background(), req)
		if err != nil {
			return
		}
		defer lease.release()
		var wire bytes.Buffer
		if err := httpReq.Write(&wire); err != nil {
			return // net/http refuses it too; nothing was sent
		}
		back, err := http.ReadRequest(bufio.NewReader(&wire))
		if err != nil {
			t.Fatalf("accepted request does not parse back: %v\n%q", err, wire.String())
		}
		// HTTP drops optional whitespace around a value; nothing else may change.
		if got := back.Header.Values(name); len(got) != 1 || got[0] != strings.Trim(value, " \t") {
			t.Fatalf("custom header %q=%q arrived as %q", name, value, got)
		}
		if back.Header.Get("X-Injected") != "" && name != "X-Injected" {
			t.Fatalf("a value injected a header: %q", wire.String())
		}
		if got := back.Header.Values("X-Cycles-Event-Id"); len(got) != 1 || got[0] != strings.Trim(eventID, " \t") {
			t.Fatalf("event id %q arrived as %q", eventID, got)
		}
	})
}
