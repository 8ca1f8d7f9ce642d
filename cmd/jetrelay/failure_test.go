package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/redisproc"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

// The failure scenarios of issue 3: each injects one failure into a
// sustained load of thousands of admin-written deliveries and then requires
// every delivery to reach SUCCESS against healthy receivers, with duplicate
// sends bounded by what was in flight. They run one at a time (no
// t.Parallel): each saturates this machine's cores on its own, and their
// failure timing must not depend on what the other tests are doing.

const (
	loadDeliveries = 3000
	loadPace       = 6 * time.Millisecond // per emit of loadSubscriptions deliveries
	// The failure is injected once the receiver has this many events:
	// well into the load, with more still being written.
	failAt = loadDeliveries / 3
)

func TestFailure_EngineReplicaSIGKILLedMidLoadLosesNothing(t *testing.T) {
	lb := newLoadBed(t, redisproc.Options{})
	lb.natsURL = startExternalNATS(t, "127.0.0.1:0", t.TempDir()).ClientURL()
	startRelay(t, lb.relayEnv("bridge-1", "JETRELAY_ROLE", "bridge"))
	victim := startRelay(t, lb.relayEnv("engine-1", "JETRELAY_ROLE", "engine"))
	startRelay(t, lb.relayEnv("engine-2", "JETRELAY_ROLE", "engine"))

	started := time.Now()
	w := lb.startLoad(loadDeliveries, loadPace)
	lb.awaitProgress(t, failAt, 20*time.Second)
	victim.kill(t)
	t.Logf("SIGKILLed engine replica 1 after %s, with %d events received", time.Since(started).Round(time.Millisecond), lb.accepted().Unique)

	ids, _ := w.wait(t, 30*time.Second)
	all := lb.awaitAllSuccess(t, ids, 30*time.Second)
	// Only sends the killed replica had in flight can repeat.
	lb.verifyReceived(t, "engine replica SIGKILL", all, started, loadWorkers)
}

func TestFailure_ExternalNATSRestartedMidLoadLosesNothing(t *testing.T) {
	lb := newLoadBed(t, redisproc.Options{})
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	dir := t.TempDir()
	ns := startExternalNATS(t, listen, dir)
	lb.natsURL = ns.ClientURL()
	replicas := []*relay{
		startRelay(t, lb.relayEnv("replica-1")),
		startRelay(t, lb.relayEnv("replica-2")),
	}

	started := time.Now()
	w := lb.startLoad(loadDeliveries, loadPace)
	lb.awaitProgress(t, failAt, 20*time.Second)
	ns.Shutdown()
	down := time.Now()
	var notReady []time.Duration
	for _, r := range replicas {
		r.awaitHTTP(t, "/readyz", http.StatusServiceUnavailable, 10*time.Second)
		notReady = append(notReady, time.Since(down).Round(time.Millisecond))
	}
	startExternalNATS(t, listen, dir)
	t.Logf("NATS server down for %s (replicas reported not ready %v after the shutdown), restarted on %s with the same store",
		time.Since(down).Round(time.Millisecond), notReady, listen)
	for _, r := range replicas {
		r.awaitHTTP(t, "/readyz", http.StatusOK, 15*time.Second)
	}

	ids, _ := w.wait(t, 30*time.Second)
	all := lb.awaitAllSuccess(t, ids, 30*time.Second)
	// Outcomes reach Redis before the ack, so a lost ack causes a skipped
	// redelivery, not a send; allow at most every worker's send to repeat.
	lb.verifyReceived(t, "external NATS restart", all, started, len(replicas)*loadWorkers)
}

func TestFailure_EmbeddedNATSRestartedMidLoadLosesNothing(t *testing.T) {
	lb := newLoadBed(t, redisproc.Options{})
	// No NATS_URL: the process runs its own JetStream under this data dir,
	// so killing the process kills the NATS server with it.
	env := lb.relayEnv("bridge-embedded", "JETRELAY_DATA_DIR", t.TempDir())
	r := startRelay(t, env)

	started := time.Now()
	w := lb.startLoad(loadDeliveries, loadPace)
	lb.awaitProgress(t, failAt, 20*time.Second)
	r.kill(t)
	left := lb.redis.Client.LLen(context.Background(), "dispatch:processing:bridge-embedded").Val()
	t.Logf("SIGKILLed jetrelay with its embedded NATS after %s (%d ids left in its processing list); starting it on the same data dir",
		time.Since(started).Round(time.Millisecond), left)
	startRelay(t, env)

	ids, _ := w.wait(t, 30*time.Second)
	all := lb.awaitAllSuccess(t, ids, 30*time.Second)
	awaitEmptyQueues(t, lb.bed, 10*time.Second)
	lb.verifyReceived(t, "embedded NATS restart", all, started, loadWorkers)
}

func TestFailure_RedisRestartedMidLoadFailsNothing(t *testing.T) {
	// AOF with fsync every second, as production runs Redis: a SIGKILL
	// loses nothing that was acknowledged.
	lb := newLoadBed(t, redisproc.Options{AppendOnly: true})
	lb.natsURL = startExternalNATS(t, "127.0.0.1:0", t.TempDir()).ClientURL()
	replicas := []*relay{
		startRelay(t, lb.relayEnv("replica-1")),
		startRelay(t, lb.relayEnv("replica-2")),
	}

	started := time.Now()
	w := lb.startLoad(loadDeliveries, loadPace)
	lb.awaitProgress(t, failAt, 20*time.Second)
	if err := lb.redis.Server.Kill(); err != nil {
		t.Fatalf("SIGKILL redis-server: %v", err)
	}
	down := time.Now()
	var notReady []time.Duration
	for i, r := range replicas {
		body := r.awaitHTTP(t, "/readyz", http.StatusServiceUnavailable, 10*time.Second)
		notReady = append(notReady, time.Since(down).Round(time.Millisecond))
		if !strings.Contains(strings.ToLower(body), "redis") {
			t.Errorf("replica %d /readyz body %s does not name Redis as the problem", i+1, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := lb.redis.Server.Restart(ctx); err != nil {
		t.Fatalf("restart redis-server from its AOF: %v", err)
	}
	t.Logf("Redis down for %s (replicas reported not ready %v after the kill), restarted from its AOF",
		time.Since(down).Round(time.Millisecond), notReady)
	for _, r := range replicas {
		r.awaitHTTP(t, "/readyz", http.StatusOK, 15*time.Second)
	}

	ids, _ := w.wait(t, 30*time.Second)
	// awaitAllSuccess fails on any FAILED delivery: Redis being down must
	// delay deliveries, never fail them.
	all := lb.awaitAllSuccess(t, ids, 30*time.Second)
	awaitEmptyQueues(t, lb.bed, 10*time.Second)
	// A send whose outcome could not be written is sent again.
	lb.verifyReceived(t, "Redis restart (AOF)", all, started, len(replicas)*loadWorkers)
}

func TestFailure_R3StreamLeaderKilledMidLoadLosesNothing(t *testing.T) {
	lb := newLoadBed(t, redisproc.Options{})
	cl := testenv.Cluster(t, 3)
	lb.natsURL = cl.ClientURLs()
	replicas := []*relay{
		startRelay(t, lb.relayEnv("replica-1", "JETRELAY_STREAM_REPLICAS", "3")),
		startRelay(t, lb.relayEnv("replica-2", "JETRELAY_STREAM_REPLICAS", "3")),
	}
	js := clusterJetStream(t, lb.natsURL)

	started := time.Now()
	w := lb.startLoad(loadDeliveries, loadPace)
	lb.awaitProgress(t, failAt, 20*time.Second)
	leader := streamLeader(t, js, "", 10*time.Second)
	// The node that dies takes the consumer's leadership with it as well,
	// the worst case of a node loss, and one that otherwise happens only
	// when the placement happens to put both leaders on it.
	colocateConsumerLeader(t, js, leader, 10*time.Second)
	if err := cl.Stop(leader); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	atKill := lb.accepted().Unique
	next := streamLeader(t, js, leader, 15*time.Second)
	t.Logf("stopped %s, leader of the stream and its consumer, after %s; %s leads the stream after %s", leader,
		killed.Sub(started).Round(time.Millisecond), next, time.Since(killed).Round(time.Millisecond))

	// New leaders are elected in about a second; delivery must resume soon
	// after, not only when the engines' pull requests time out.
	const resumeWithin = 10 * time.Second
	resumed := false
	for time.Since(killed) < resumeWithin {
		if lb.accepted().Unique >= atKill+100 {
			resumed = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resumed {
		t.Logf("delivery resumed %s after the leader stopped", time.Since(killed).Round(time.Millisecond))
	} else {
		t.Errorf("delivery stalled: the receiver got %d events in the %s after the stream and consumer leader stopped, want delivery to resume (100+)",
			lb.accepted().Unique-atKill, resumeWithin)
	}

	ids, _ := w.wait(t, 30*time.Second)
	// Long enough to see the run complete even after such a stall.
	all := lb.awaitAllSuccess(t, ids, 45*time.Second)
	t.Logf("everything SUCCESS %s after the leader stopped", time.Since(killed).Round(time.Millisecond))
	lb.verifyReceived(t, "R3 stream leader killed", all, started, len(replicas)*loadWorkers)
}

func TestFailure_BridgeSIGKILLedRepeatedlyWhileAdminPushesLosesNothing(t *testing.T) {
	lb := newLoadBed(t, redisproc.Options{})
	lb.natsURL = startExternalNATS(t, "127.0.0.1:0", t.TempDir()).ClientURL()
	startRelay(t, lb.relayEnv("engine-1", "JETRELAY_ROLE", "engine"))
	bridgeEnv := lb.relayEnv("bridge-under-test", "JETRELAY_ROLE", "bridge")

	started := time.Now()
	// Slower than the other scenarios so admin keeps pushing through all
	// five crashes.
	w := lb.startLoad(loadDeliveries, 10*time.Millisecond)
	var delays []time.Duration
	leftInFlight := 0 // kills that left ids in the processing list
	for range 5 {
		br := startRelay(t, bridgeEnv)
		d := rand.N(800 * time.Millisecond)
		delays = append(delays, d)
		time.Sleep(d) // the random moment of the crash, not a synchronisation
		br.kill(t)
		if lb.redis.Client.LLen(context.Background(), "dispatch:processing:bridge-under-test").Val() > 0 {
			leftInFlight++
		}
	}
	t.Logf("SIGKILLed the bridge 5 times, %v after each start; %d kills left ids in its processing list; %d deliveries written by then",
		delays, leftInFlight, w.count())
	startRelay(t, bridgeEnv)

	ids, _ := w.wait(t, 30*time.Second)
	all := lb.awaitAllSuccess(t, ids, 30*time.Second)
	awaitEmptyQueues(t, lb.bed, 10*time.Second)
	// The engine never crashed and republished ids collapse on Nats-Msg-Id,
	// so a duplicate send here would need two work items for one delivery
	// at once; allow no more than one engine's worth.
	lb.verifyReceived(t, "bridge SIGKILLed 5 times", all, started, loadWorkers)
}

// startExternalNATS starts an in-process JetStream server with a TCP
// listener on listen and its store in dir; the same listen and dir start
// it again after a Shutdown. It is shut down when the test ends.
func startExternalNATS(t *testing.T, listen, dir string) *natsserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ns, err := natsserver.Start(ctx, natsserver.Options{StoreDir: dir, Listen: listen})
	if err != nil {
		t.Fatalf("start nats-server on %s: %v", listen, err)
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// clusterJetStream is the test's own JetStream client on the cluster, for
// finding the stream leader.
func clusterJetStream(t *testing.T, urls string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to the cluster: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// colocateConsumerLeader moves the leadership of the engines' durable
// consumer onto node (a leader stepdown with a preferred placement) and
// waits until the consumer reports it.
func colocateConsumerLeader(t *testing.T, js jetstream.JetStream, node string, within time.Duration) {
	t.Helper()
	qc := queue.Config{}.WithDefaults()
	subject := "$JS.API.CONSUMER.LEADER.STEPDOWN." + qc.Stream + "." + qc.Consumer
	req := []byte(`{"placement":{"preferred":"` + node + `"}}`)
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cons, err := js.Consumer(ctx, qc.Stream, qc.Consumer)
		if err == nil {
			var info *jetstream.ConsumerInfo
			if info, err = cons.Info(ctx); err == nil && info.Cluster != nil {
				if info.Cluster.Leader == node {
					cancel()
					return
				}
				last = "consumer leader " + info.Cluster.Leader
				if info.Cluster.Leader != "" {
					if _, err := js.Conn().RequestWithContext(ctx, subject, req); err != nil {
						last += "; stepdown: " + err.Error()
					}
				}
			}
		}
		if err != nil {
			last = err.Error()
		}
		cancel()
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("consumer %s did not move its leadership to %s within %s (last: %s)", qc.Consumer, node, within, last)
}

// streamLeader polls the dispatch stream's cluster info until it names a
// leader other than not, and returns it.
func streamLeader(t *testing.T, js jetstream.JetStream, not string, within time.Duration) string {
	t.Helper()
	name := queue.Config{}.WithDefaults().Stream
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		// One request per attempt: a request sent into an election may
		// go unanswered.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := js.Stream(ctx, name)
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = st.Info(ctx); err == nil && info.Cluster != nil &&
				info.Cluster.Leader != "" && info.Cluster.Leader != not {
				cancel()
				return info.Cluster.Leader
			}
		}
		cancel()
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("stream %s has no leader other than %q after %s (last error: %v)", name, not, within, last)
	return ""
}
