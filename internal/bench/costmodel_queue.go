package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
)

// queueFloorSteps are the cost model's steps that the queue alone covers.
var queueFloorSteps = []string{"JetStream store", "JetStream consumer (fetch, ack)", "NATS server, other", "fetch and ack (NATS client)"}

// queueFloor is JetStream alone, on the profiled run's embedded server: a
// stream and consumer configured as the dispatch stream and its consumer
// (file storage, work-queue retention, explicit acks, the dedupe window),
// n work items published asynchronously as the bridge publishes them
// (message id, expected stream, the route headers), then fetched in
// batches and acked one by one, as the engine does, under a profile that
// splits the CPU by the same steps as the drain's. Nothing else runs then:
// the engine is idle after the drain, and its consumer does not see this
// stream.
func queueFloor(ctx context.Context, js jetstream.JetStream, n int) (map[string]floor, error) {
	qc := queue.Config{Stream: "JETRELAY_COSTFLOOR", Subject: "jetrelay.costfloor", Consumer: "jetrelay-costfloor"}.WithDefaults()
	if _, err := queue.EnsureStream(ctx, js, qc); err != nil {
		return nil, err
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), qc.Stream) }()
	cons, err := queue.EnsureConsumer(ctx, js, qc)
	if err != nil {
		return nil, err
	}
	const batch = 256
	prof := startCaseProfile()
	u0 := resourcesNow()
	for i := 0; i < n; i += batch {
		for j := i; j < min(i+batch, n); j++ {
			id := fmt.Sprintf("whdel_costfloor%08d", j)
			msg := queue.NewMsg(qc.Subject, id)
			queue.SetRoute(msg, queue.Route{SubscriptionID: "whsub_costfloor", EventID: fmt.Sprintf("evt_costfloor%08d", j)})
			if _, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(id), jetstream.WithExpectStream(qc.Stream)); err != nil {
				prof.stopBy(costStepOf)
				return nil, fmt.Errorf("publish: %w", err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			prof.stopBy(costStepOf)
			return nil, ctx.Err()
		case <-time.After(30 * time.Second):
			prof.stopBy(costStepOf)
			return nil, errors.New("publish: no PubAcks within 30s")
		}
	}
	for acked := 0; acked < n; {
		msgs, err := cons.Fetch(min(batch, n-acked), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			prof.stopBy(costStepOf)
			return nil, fmt.Errorf("fetch: %w", err)
		}
		got := 0
		for m := range msgs.Messages() {
			if err := m.Ack(); err != nil {
				prof.stopBy(costStepOf)
				return nil, fmt.Errorf("ack: %w", err)
			}
			got++
		}
		if got == 0 {
			prof.stopBy(costStepOf)
			return nil, fmt.Errorf("fetch: nothing after %d of %d acked (%v)", acked, n, msgs.Error())
		}
		acked += got
	}
	u1 := resourcesNow()
	ps := prof.stopBy(costStepOf)
	if ps == nil || ps.samples == 0 {
		return nil, errors.New("no profile of the queue alone")
	}
	perSample := float64((u1.cpu - u0.cpu).Microseconds()) / float64(ps.samples) / float64(n)
	how := fmt.Sprintf("JetStream alone on the same embedded server: a stream and consumer configured as the dispatch stream's, %d work items published "+
		"asynchronously as the bridge publishes them, then fetched in batches of %d and acked one by one as the engine acks them, "+
		"%.0f µs per item in all, split by the same profile steps as the drain (the publishes' client side counts here as the NATS client's; "+
		"in the drain it is the bridge's)", n, batch, perDelivery(u1.cpu-u0.cpu, n))
	out := map[string]floor{}
	for _, s := range queueFloorSteps {
		out[s] = floor{us: float64(ps.components[s]) * perSample, how: how}
	}
	return out, nil
}
