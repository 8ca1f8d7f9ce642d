package store

import (
	"fmt"
	"testing"
)

func TestSubCache_ServesIdenticalBytesOnceParsedAndReparsesChangedOnes(t *testing.T) {
	c := newSubCache()
	v1 := []byte(`{"subscription_id":"whsub_1","url":"https://a.example/hook","status":"ACTIVE","consecutive_failures":0}`)
	first, err := c.parse("webhook:whsub_1", v1)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.parse("webhook:whsub_1", append([]byte(nil), v1...))
	if err != nil || again != first {
		t.Fatalf("identical bytes parsed again (%p vs %p, err %v)", again, first, err)
	}
	v2 := []byte(`{"subscription_id":"whsub_1","url":"https://a.example/hook","status":"PAUSED","consecutive_failures":3}`)
	changed, err := c.parse("webhook:whsub_1", v2)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Status != "PAUSED" || changed.ConsecutiveFailures != 3 {
		t.Fatalf("changed record served stale: status %s, failures %d", changed.Status, changed.ConsecutiveFailures)
	}
	if _, err := c.parse("webhook:whsub_1", []byte(`{"subscription_id":`)); err == nil {
		t.Fatal("a malformed record was accepted")
	}
}

func TestSubCache_StaysBounded(t *testing.T) {
	c := newSubCache()
	for i := range maxCachedSubscriptions * 3 {
		raw := fmt.Appendf(nil, `{"subscription_id":"whsub_%d","status":"ACTIVE"}`, i)
		if _, err := c.parse(fmt.Sprintf("webhook:whsub_%d", i), raw); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.m); n > maxCachedSubscriptions {
		t.Fatalf("cache holds %d entries, bound is %d", n, maxCachedSubscriptions)
	}
}
