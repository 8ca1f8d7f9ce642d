package engine

import (
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// The settings record follows the stored secret: first seen, it is only
// copied; replaced, the copy becomes the previous secret for the grace
// period; past it, the previous secret is removed; unchanged, nothing is
// written.
func TestRotationPatch_KeepsThePreviousSecretForTheGraceAndDropsItAfter(t *testing.T) {
	now := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	grace := time.Hour
	until := func(d time.Duration) *proto.Instant { return &proto.Instant{Time: now.Add(d)} }
	cases := []struct {
		name string
		cur  proto.SubscriptionSettings
		want store.Patch
	}{
		{"first seen", proto.SubscriptionSettings{}, store.Patch{{Name: "secret", Value: "enc:new"}}},
		{"replaced", proto.SubscriptionSettings{Secret: "enc:old"},
			store.Patch{{Name: "secret", Value: "enc:new"}, {Name: "previous_secret", Value: "enc:old"}, {Name: "previous_secret_until", Value: now.Add(grace)}}},
		{"unchanged, previous in grace", proto.SubscriptionSettings{Secret: "enc:new", PreviousSecret: "enc:old", PreviousSecretUntil: until(time.Minute)}, nil},
		{"unchanged, grace over", proto.SubscriptionSettings{Secret: "enc:new", PreviousSecret: "enc:old", PreviousSecretUntil: until(-time.Second)},
			store.Patch{{Name: "previous_secret", Value: nil}, {Name: "previous_secret_until", Value: nil}}},
		{"unchanged, nothing previous", proto.SubscriptionSettings{Secret: "enc:new"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rotationPatch(&c.cur, "enc:new", now, grace)
			if len(got) != len(c.want) {
				t.Fatalf("patch = %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("patch = %v, want %v", got, c.want)
				}
			}
		})
	}
}
