package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

func TestConfig_DefaultsAndRefusals(t *testing.T) {
	c, err := Config{InstanceID: "bridge-1"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Period != time.Minute || c.Margin != 5*time.Minute || c.Batch != 2000 || c.MaxDeliveryAge != 24*time.Hour {
		t.Fatalf("defaults: %+v", c)
	}
	for _, bad := range []Config{{}, {InstanceID: "b", Margin: -time.Second}, {InstanceID: "b", Batch: -1}} {
		if _, err := bad.withDefaults(); err == nil || !strings.Contains(err.Error(), "reconcile: invalid config") {
			t.Errorf("%+v: err = %v, want a refusal", bad, err)
		}
	}
}

func TestStuck_OnlyNowhereAndPastTheMarginFromTheLaterOfCreationAndRetry(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *proto.Instant { return &proto.Instant{Time: now.Add(d)} }
	margin := 5 * time.Minute
	cases := []struct {
		name  string
		d     proto.Delivery
		place string
		want  bool
	}{
		{"new delivery lost", proto.Delivery{AttemptedAt: at(-10 * time.Minute)}, Nowhere, true},
		{"new delivery just written", proto.Delivery{AttemptedAt: at(-time.Minute)}, Nowhere, false},
		{"retry due long ago", proto.Delivery{AttemptedAt: at(-time.Hour), NextRetryAt: at(-10 * time.Minute)}, Nowhere, true},
		{"retry due a moment ago", proto.Delivery{AttemptedAt: at(-time.Hour), NextRetryAt: at(-time.Minute)}, Nowhere, false},
		{"put off to the future", proto.Delivery{AttemptedAt: at(-time.Hour), NextRetryAt: at(time.Hour)}, Nowhere, false},
		{"queued", proto.Delivery{AttemptedAt: at(-time.Hour)}, WorkItem, false},
		{"unknown", proto.Delivery{AttemptedAt: at(-time.Hour)}, Unknown, false},
	}
	for _, tc := range cases {
		if got := Stuck(Place{Kind: tc.place}, Due(&tc.d, 0), now, margin); got != tc.want {
			t.Errorf("%s: stuck = %v, want %v", tc.name, got, tc.want)
		}
	}
}
