package receive_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

// interopScript runs the npm package standardwebhooks (the specification's
// JavaScript library) on every case of stdin: it verifies jetrelay's
// headers with each secret the way a receiver would construct its Webhook,
// and signs the same message itself for jetrelay to verify.
const interopScript = `
const {Webhook} = require("standardwebhooks");
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = cases.map(c => {
  const r = {verified: [], signature: ""};
  for (const k of c.verify_with) {
    try {
      const wh = k.raw ? new Webhook(k.secret, {format: "raw"}) : new Webhook(k.secret);
      wh.verify(c.body, c.headers);
      r.verified.push("ok");
    } catch (e) { r.verified.push(e.message); }
  }
  r.signature = new Webhook(c.sign_with).sign(c.headers["webhook-id"], new Date(Number(c.headers["webhook-timestamp"]) * 1000), c.body);
  return r;
});
process.stdout.write(JSON.stringify(out));
`

type interopKey struct {
	Secret string `json:"secret"`
	Raw    bool   `json:"raw"`
}

type interopCase struct {
	Body       string            `json:"body"`
	Headers    map[string]string `json:"headers"`
	VerifyWith []interopKey      `json:"verify_with"`
	SignWith   string            `json:"sign_with"`
}

type interopResult struct {
	Verified  []string `json:"verified"`
	Signature string   `json:"signature"`
}

// jetrelay's Standard Webhooks signatures verify with the specification's
// own library, for every kind of secret: the specification's whsec_ form,
// admin's generated whsec_ + base64url (given to the library in
// proto.StandardWebhooksSecret's form), and a secret a user chose (in raw
// form, or the canonical form). During a rotation the header carries both
// secrets' signatures and a receiver holding either verifies it. The other
// way round, what the library signs, jetrelay's verifier accepts; and a
// request jetrelay signed 6 minutes ago, the library refuses as a replay.
func TestStandardWebhooks_InteroperatesWithTheNpmLibrary(t *testing.T) {
	modules := testenv.StandardWebhooksJS(t)
	var raw32 [32]byte
	_, _ = rand.Read(raw32[:])
	admin := "whsec_" + base64.RawURLEncoding.EncodeToString(raw32[:])
	oldSecret, newSecret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", admin
	userChosen := "my shared secret"
	body := `{"event_id":"evt_interop","event_type":"budget.exhausted","data":{"note":"ünïcode ✓"}}`
	now := time.Now().Unix()
	headers := func(ts int64, secrets ...string) map[string]string {
		var keys [][]byte
		for _, s := range secrets {
			keys = append(keys, proto.StandardWebhooksKey(s))
		}
		return map[string]string{
			"webhook-id": "evt_interop", "webhook-timestamp": strconv.FormatInt(ts, 10),
			"webhook-signature": proto.StandardWebhooksSignatures(keys, "evt_interop", ts, []byte(body)),
		}
	}
	canon := proto.StandardWebhooksSecret
	cases := []struct {
		name string
		c    interopCase
		want []string
	}{
		{"spec secret", interopCase{body, headers(now, oldSecret), []interopKey{{Secret: oldSecret}}, oldSecret}, []string{"ok"}},
		{"admin's generated secret", interopCase{body, headers(now, admin), []interopKey{{Secret: canon(admin)}}, canon(admin)}, []string{"ok"}},
		{"a secret a user chose", interopCase{body, headers(now, userChosen), []interopKey{{Secret: userChosen, Raw: true}, {Secret: canon(userChosen)}}, canon(userChosen)}, []string{"ok", "ok"}},
		{"rotation: either secret verifies", interopCase{body, headers(now, newSecret, oldSecret),
			[]interopKey{{Secret: canon(newSecret)}, {Secret: oldSecret}, {Secret: canon(userChosen)}}, canon(newSecret)},
			[]string{"ok", "ok", "No matching signature found"}},
		{"replay", interopCase{body, headers(now-6*60, oldSecret), []interopKey{{Secret: oldSecret}}, oldSecret}, []string{"Message timestamp too old"}},
	}
	in := make([]interopCase, len(cases))
	for i, c := range cases {
		in[i] = c.c
	}
	stdin, _ := json.Marshal(in)
	cmd := exec.Command("node", "-e", interopScript)
	cmd.Env = append(cmd.Environ(), "NODE_PATH="+modules)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var results []interopResult
	if err := json.Unmarshal(out, &results); err != nil || len(results) != len(cases) {
		t.Fatalf("node answered %s (%v)", out, err)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := results[i]
			if len(r.Verified) != len(c.want) {
				t.Fatalf("library verified %v, want %v", r.Verified, c.want)
			}
			for j := range c.want {
				if r.Verified[j] != c.want[j] {
					t.Errorf("library with %+v: %q, want %q", c.c.VerifyWith[j], r.Verified[j], c.want[j])
				}
			}
			// What the library signs, jetrelay's verifier accepts (with the
			// secret as jetrelay's subscription holds it) unless stale.
			v, err := receive.NewVerifier([]string{c.c.SignWith})
			if err != nil {
				t.Fatal(err)
			}
			err = v.VerifyStandardWebhooks([]byte(body), "evt_interop", c.c.Headers["webhook-timestamp"], r.Signature)
			if c.name == "replay" {
				if err == nil {
					t.Error("jetrelay's verifier accepted a 6-minute-old timestamp")
				}
			} else if err != nil {
				t.Errorf("jetrelay's verifier refused the library's signature %s: %v", r.Signature, err)
			}
		})
	}
}
