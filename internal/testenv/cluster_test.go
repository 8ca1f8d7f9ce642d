package testenv

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestCluster_R3StreamKeepsItsMessagesWhenTheLeaderStops(t *testing.T) {
	c := Cluster(t, 3)
	nc, err := nats.Connect(c.ClientURLs(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 3})
	if err != nil {
		t.Fatalf("create R3 stream: %v", err)
	}
	for range 10 {
		if _, err := js.Publish(ctx, "r3", []byte("x")); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil || !slices.Contains(c.Names(), info.Cluster.Leader) {
		t.Fatalf("stream info %+v (%v): want a leader among %v", info, err, c.Names())
	}
	old := info.Cluster.Leader
	if err := c.Stop(old); err != nil {
		t.Fatal(err)
	}
	if c.Server(old) != nil {
		t.Fatalf("stopped node %s still returned by Server", old)
	}
	for {
		// Each request gets its own timeout: one sent into the election
		// may go unanswered.
		actx, acancel := context.WithTimeout(ctx, time.Second)
		info, err = st.Info(actx)
		acancel()
		if err == nil && info.Cluster.Leader != "" && info.Cluster.Leader != old {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no new stream leader after stopping %s: %v", old, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if info.State.Msgs != 10 {
		t.Errorf("stream holds %d messages after the leader stopped, want 10", info.State.Msgs)
	}
	if err := c.Restart(old); err != nil {
		t.Fatalf("restart %s: %v", old, err)
	}
}
