package soak

import (
	"reflect"
	"testing"
	"time"
)

func TestNewPlan_SameSeedSamePlan(t *testing.T) {
	a := NewPlan(42, 2*time.Minute, 6)
	b := NewPlan(42, 2*time.Minute, 6)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two plans of seed 42 differ: a run could not be reproduced from its seed")
	}
	if c := NewPlan(43, 2*time.Minute, 6); reflect.DeepEqual(a, c) {
		t.Error("seeds 42 and 43 drew the same plan")
	}
}

func TestNewPlan_OneHandbackInTheMiddle(t *testing.T) {
	for seed := range uint64(20) {
		p := NewPlan(seed, time.Minute, 6)
		var handbacks []time.Duration
		for _, f := range p.Faults {
			if f.Kind == Handback {
				handbacks = append(handbacks, f.At)
			}
			if f.At >= time.Minute {
				t.Errorf("seed %d: fault %s at %s, after the fault phase", seed, f.Kind, f.At)
			}
		}
		if len(handbacks) != 1 || handbacks[0] != 30*time.Second {
			t.Errorf("seed %d: handbacks at %v, want one at 30s", seed, handbacks)
		}
	}
}

func TestNamedRefusal_OnlyTheEnginesRefusals(t *testing.T) {
	for msg, want := range map[string]bool{
		"Delivery expired: 25h old (max 24h)":                            true,
		"Event not found: evt_1":                                         true,
		"Subscription not found":                                         true,
		"Subscription not active: PAUSED":                                true,
		"Ownership boundary (#209): system/system events are admin-only": true,
		"Webhook signing secret is missing; refusing unsigned delivery":  true,
		"HTTP 500":                   false,
		"request timed out after 2s": false,
		"":                           false,
	} {
		if got := namedRefusal(msg); got != want {
			t.Errorf("namedRefusal(%q) = %v, want %v", msg, got, want)
		}
	}
}
