package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
)

// queueFloorSteps are the cost model's steps that the queue alone covers.
var queueFloorSteps = []string{"JetStream store", "JetStream consumer (fetch, ack)", "NATS server, other", "fetch and ack (NATS client)"}

// stepPublish takes the queue floor's publishing client side: in the drain
// it is the bridge's step, so it is no floor of the steps above.
const stepPublish = "publish (client side)"

// minFloorSamples is how many samples a step needs, in the drain and alone,
// for its floor to be told.
const minFloorSamples = 10

// queueFloor is JetStream alone, on the profiled run's embedded server: a
// stream and consumer configured as the dispatch stream and its consumer
// (file storage, work-queue retention, explicit acks, the dedupe window),
// n work items published asynchronously as the bridge publishes them
// (message id, expected stream, the route headers), then fetched in
// batches and acked one by one, under a profile that splits the CPU by the
// same steps as the drain's, the publishes' client side apart. The engine
// is idle after the drain (its idle fetch's heartbeats aside), and its
// consumer does not see this stream. A step with fewer than
// minFloorSamples samples here has no floor to tell (floor.known).
func queueFloor(ctx context.Context, js jetstream.JetStream, n int) (map[string]floor, error) {
	qc := queue.Config{Stream: "JETRELAY_COSTFLOOR", Subject: "jetrelay.costfloor", Consumer: "jetrelay-costfloor"}.WithDefaults()
	stream, err := queue.EnsureStream(ctx, js, qc)
	if err != nil {
		return nil, err
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), qc.Stream) }()
	cons, err := queue.EnsureConsumer(ctx, js, qc)
	if err != nil {
		return nil, err
	}
	const batch = 256
	prof := startCaseProfile()
	stopped := false
	defer func() {
		if !stopped {
			prof.stopBy(costStepOf)
		}
	}()
	u0 := resourcesNow()
	if err := publishFloorItems(ctx, js, qc, n, batch); err != nil {
		return nil, err
	}
	for acked := 0; acked < n; {
		msgs, err := cons.Fetch(min(batch, n-acked), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("fetch: %w", err)
		}
		got := 0
		for m := range msgs.Messages() {
			if err := m.Ack(); err != nil {
				return nil, fmt.Errorf("ack: %w", err)
			}
			got++
		}
		if got == 0 {
			return nil, fmt.Errorf("fetch: nothing after %d of %d acked (%v)", acked, n, msgs.Error())
		}
		acked += got
	}
	// The server removes an acked item after the ack arrives: wait for
	// the last of them, so their removal is in the window.
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := stream.Info(ctx)
		if err != nil {
			return nil, err
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d items still stored 10s after the last ack", info.State.Msgs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	u1 := resourcesNow()
	stopped = true
	ps := prof.stopBy(queueFloorStepOf)
	if ps == nil {
		return nil, errors.New("no profile of the queue alone")
	}
	perSample := float64((u1.cpu - u0.cpu).Microseconds()) / float64(max(ps.samples, 1)) / float64(n)
	how := fmt.Sprintf("JetStream alone on the same embedded server: a stream and consumer configured as the dispatch stream's, %d work items published "+
		"asynchronously as the bridge publishes them, then fetched in batches of %d and acked one by one, %.0f µs per item in all "+
		"(%.1f µs of it the publishes' client side, which in the drain is the bridge's), split by the same profile steps as the drain",
		n, batch, perDelivery(u1.cpu-u0.cpu, n), float64(ps.components[stepPublish])*perSample)
	out := map[string]floor{}
	for _, s := range queueFloorSteps {
		k := ps.components[s]
		out[s] = floor{us: float64(k) * perSample, how: how, sampled: true, samples: k}
	}
	return out, nil
}

// publishFloorItems publishes n work items to qc's subject as the bridge
// does, waiting for each batch's PubAcks.
func publishFloorItems(ctx context.Context, js jetstream.JetStream, qc queue.Config, n, batch int) error {
	for i := 0; i < n; i += batch {
		for j := i; j < min(i+batch, n); j++ {
			id := fmt.Sprintf("whdel_costfloor%08d", j)
			msg := queue.NewMsg(qc.Subject, id)
			queue.SetRoute(msg, queue.Route{SubscriptionID: "whsub_costfloor", EventID: fmt.Sprintf("evt_costfloor%08d", j)})
			if _, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(id), jetstream.WithExpectStream(qc.Stream)); err != nil {
				return fmt.Errorf("publish: %w", err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return errors.New("publish: no PubAcks within 30s")
		}
	}
	return nil
}

// queueFloorStepOf is costStepOf with the publishes' client side apart.
func queueFloorStepOf(stack []string) string {
	for _, fn := range stack {
		if strings.Contains(fn, "bench.publishFloorItems") {
			if s := costStepOf(stack); s == "fetch and ack (NATS client)" {
				return stepPublish
			}
			break
		}
	}
	return costStepOf(stack)
}
