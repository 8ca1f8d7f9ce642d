package bench

import "strings"

// costStep is one step of a delivery in the cost model, and the functions
// whose presence in a CPU sample's stack makes the sample that step's.
type costStep struct {
	name    string
	how     string   // what the markers cover, for the reader
	markers []string // substrings of function names; a trailing "$" anchors the end
}

// stepReceiver is the receivers' own CPU: in production another machine's,
// so it is left out of jetrelay's cost.
const stepReceiver = "receiver (not jetrelay: excluded)"

// costSteps are checked in this order and the first step with a marker
// anywhere in a sample's stack takes the sample. The order makes a step
// own what it calls: the bridge owns its Redis commands and publishes;
// JSON parsed inside a Redis read is JSON, the round trip itself is the
// read; signing owns its HMAC.
var costSteps = []costStep{
	{stepReceiver, "the bench's HTTP server and signature check", []string{"net/http.(*conn).serve", "bench.(*sink)"}},
	{"bridge move and publish", "package bridge, with its Redis commands and JetStream publishes", []string{"jetrelay/jetrelay/bridge."}},
	{"signing", "proto.Sign (HMAC-SHA256 over the body)", []string{"jetrelay/proto.Sign"}},
	{"secret decryption", "AES-GCM of the stored enc: secret", []string{"proto.(*SecretKey).Decrypt", "crypto/cipher.", "crypto/aes."}},
	{"JSON", "encoding/json, gjson/sjson, proto.Parse*, in-place patches of records", []string{"encoding/json.", "goccy/go-json", "tidwall/gjson", "tidwall/sjson", "jetrelay/proto.Parse", "internal/store.Patch.", "internal/store.appendValue"}},
	{"outcome write", "the outcome script (store.RecordOutcome*) and the engine's record path", []string{"store.(*Store).RecordOutcome", "store.(*Store).runCasPair", "store.(*outcomeCommits)", "store.(*Store).readPair", "engine.(*Engine).recordSuccess", "engine.(*Engine).recordFailure", "engine.(*Engine).finalFailure", "engine.(*Engine).write$"}},
	{stepPutOffs, "a delivery that cannot go out now: wait, hold, wake-up publish", putOffMarkers},
	{"Redis reads", "delivery, event, subscription and secret reads (store.DeliveryAndLoad, store.Load and friends) up to the hand-off to the autopipeliner", []string{"store.(*Store).Load", "store.(*Store).DeliveryAndLoad", "store.(*Prefetched).Bundle", "store.(*Store).bundle$", "store.(*Store).read$", "store.(*Store).Delivery$", "store.(*Store).Subscription$", "internal/store.(*subCache", "internal/store.(*SubCache"}},
	{"POST (client side)", "transport/webhook and net/http's client, its connection loops included", []string{"jetrelay/transport/webhook.", "net/http.(*persistConn)", "net/http.(*Transport)", "net/http.(*Client)", "net/http.send"}},
	{"fetch and ack (NATS client)", "nats.go in the engine: fetch requests, message delivery, acks", []string{"nats-io/nats%2ego", "nats-io/nats.go"}},
	{"JetStream store", "the embedded server's stream and file store", []string{"server.(*fileStore)", "server.(*msgBlock)", "server.(*stream)"}},
	{"JetStream consumer (fetch, ack)", "the embedded server's consumer: pull requests, redelivery state, acks", []string{"server.(*consumer)"}},
	{"NATS server, other", "the embedded server's client connections and routing", []string{"nats-server/v2/server."}},
	{"engine, other", "decide, limits, breakers, lanes, metrics, tracing", []string{"jetrelay/jetrelay/engine."}},
	{"Redis round trips (autopipeliner)", "go-redis's autopipeliner goroutines write and read the batched commands of the reads and the outcome scripts together, so their socket I/O is one step", []string{"redis/go-redis"}},
	{"Go GC (background)", "runtime.gcBgMarkWorker; allocation inside a step is that step's", []string{"runtime.gcBgMarkWorker"}},
	{"Go scheduler, netpoll, syscalls", "runtime outside any step", []string{"runtime."}},
}

// stepPutOffs is the engine's put-off path: the functions of putOffMarkers
// and everything they call.
const stepPutOffs = "put-offs"

// putOffMarkers are the engine's put-off functions: deciding a wait or a
// hold, writing the record's wait note and publishing the wake-up or held
// copy (one at a time or in bulk), and the held-checks' releases.
var putOffMarkers = []string{"engine.(*Engine).wait$", "engine.(*Engine).hold$", "engine.(*Engine).holdForBreaker",
	"engine.(*Engine).putOffNow", "engine.(*putOffs).do", "engine.(*Engine).writePutOffs", "engine.(*Engine).publishWaiting",
	"engine.(*Engine).checkHeld", "engine.(*Engine).releaseHeld", "engine.(*Engine).noteWait"}

// putOffPathOf gives a stack to stepPutOffs when any of its functions is
// in the put-off path, whatever it calls (JSON, Redis, the publish), and
// to stepOther otherwise: the backlog scenario's price of a put-off.
func putOffPathOf(stack []string) string {
	for _, m := range putOffMarkers {
		for _, fn := range stack {
			if matchMarker(fn, m) {
				return stepPutOffs
			}
		}
	}
	return stepOther
}

// stepOther takes what no step claims.
const stepOther = "other"

// costStepOf attributes one stack (innermost function first) to a step.
func costStepOf(stack []string) string {
	for _, s := range costSteps {
		for _, m := range s.markers {
			for _, fn := range stack {
				if matchMarker(fn, m) {
					return s.name
				}
			}
		}
	}
	return stepOther
}

func matchMarker(fn, marker string) bool {
	if m, anchored := strings.CutSuffix(marker, "$"); anchored {
		return strings.HasSuffix(fn, m)
	}
	return strings.Contains(fn, marker)
}
