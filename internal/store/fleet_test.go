package store

import (
	"strings"
	"testing"
)

func TestSeparateQueues_WarnsOnlyWhenAnEmbeddedQueueHasLiveCompany(t *testing.T) {
	embeddedA := BridgeInstance{ID: "a", Alive: true, Heartbeat: "pid=1 beat_at_ms=2 queue=embedded"}
	embeddedB := BridgeInstance{ID: "b", Alive: true, Heartbeat: "pid=3 beat_at_ms=4 queue=embedded"}
	sharedC := BridgeInstance{ID: "c", Alive: true, Heartbeat: "pid=5 beat_at_ms=6 queue=nats"}
	sharedD := BridgeInstance{ID: "d", Alive: true, Heartbeat: "pid=7 beat_at_ms=8 queue=nats"}
	deadE := BridgeInstance{ID: "e", Heartbeat: ""}
	older := BridgeInstance{ID: "f", Alive: true, Heartbeat: "pid=9 beat_at_ms=10"}
	for _, tc := range []struct {
		name    string
		bridges []BridgeInstance
		self    string
		want    string // "" for no warning, else a text the warning holds
	}{
		{"one embedded replica alone", []BridgeInstance{embeddedA}, "", ""},
		{"two embedded replicas", []BridgeInstance{embeddedA, embeddedB}, "", "a, b run an embedded JetStream"},
		{"embedded beside a shared one", []BridgeInstance{embeddedA, sharedC}, "", "2 live bridges"},
		{"replicas on one NATS cluster", []BridgeInstance{sharedC, sharedD}, "", ""},
		{"an embedded one beside a dead one", []BridgeInstance{embeddedA, deadE}, "", ""},
		{"a starting embedded replica beside an older release", []BridgeInstance{older}, "g", "f, g"},
		{"a starting embedded replica alone (its own old heartbeat)", []BridgeInstance{{ID: "g", Alive: true, Heartbeat: "queue=embedded"}}, "g", ""},
	} {
		got := SeparateQueues(tc.bridges, tc.self)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want a warning containing %q (empty: none)", tc.name, got, tc.want)
		}
	}
}
