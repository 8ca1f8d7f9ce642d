package proto_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// FuzzVerifyStandardWebhooks feeds the receiver's parsing of the three
// Standard Webhooks headers (and the secret) whatever a sender could put
// there. It must answer one of the documented errors or nil, never panic,
// and nil only when a signature made with the key over those exact bytes is
// in the header; a header jetrelay built must always verify.
func FuzzVerifyStandardWebhooks(f *testing.F) {
	f.Add(specSecret, specID, "1614265330", specSignature, []byte(specPayload))
	f.Add("whsec_", "", "", "", []byte{})
	f.Add("my-secret", "evt_1", "01614265330", "v1,"+specSignature[3:]+"  v1a,xyz v1", []byte("{}"))
	f.Add("whsec_ab-_", "evt_1", "-1", "v1,,,, ,v1", []byte(nil))
	f.Add("whsec_YWJj", "e", "999999999999", "v1,"+"AAAA v1,AAAA v1,AAAA", []byte("x"))
	now := time.Unix(1614265330, 0)
	f.Fuzz(func(t *testing.T, secret, id, ts, sig string, body []byte) {
		key := proto.StandardWebhooksKey(secret)
		err := proto.VerifyStandardWebhooks([][]byte{key}, id, ts, sig, body, now, 0)
		switch {
		case err == nil:
			if _, perr := proto.ParseWebhookTimestamp(ts); perr != nil {
				t.Fatalf("accepted timestamp %q that does not parse", ts)
			}
			if len(proto.ParseWebhookSignatures(sig)) == 0 {
				t.Fatalf("accepted signature header %q with no v1 entry", sig)
			}
		case errors.Is(err, proto.ErrWebhookHeadersMissing), errors.Is(err, proto.ErrWebhookTimestamp), errors.Is(err, proto.ErrWebhookSignature):
		default:
			t.Fatalf("undocumented error %v", err)
		}
		if id == "" {
			return
		}
		own := proto.StandardWebhooksSignatures([][]byte{key}, id, now.Unix(), body)
		if err := proto.VerifyStandardWebhooks([][]byte{key}, id, strconv.FormatInt(now.Unix(), 10), own+" "+sig, body, now, 0); err != nil {
			t.Fatalf("a signature jetrelay made does not verify: %v", err)
		}
	})
}
