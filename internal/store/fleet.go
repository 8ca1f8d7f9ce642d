package store

import (
	"fmt"
	"slices"
	"strings"
)

// Queue is the queue mode the bridge announced in its heartbeat
// ("embedded", "nats"), or "" when it did not say (releases before it did,
// or a dead bridge).
func (b BridgeInstance) Queue() string {
	for _, f := range strings.Fields(b.Heartbeat) {
		if v, ok := strings.CutPrefix(f, "queue="); ok {
			return v
		}
	}
	return ""
}

// SeparateQueues explains the trap of several live bridges of which some
// run an embedded JetStream: each embedded one holds the work items its own
// bridge moved out of Redis in a queue no other replica reads, and loses
// them with its data directory. It returns "" when there is no such trap.
// self names a bridge to count as live and embedded although its heartbeat
// is not written yet (a replica starting); empty for none.
func SeparateQueues(bridges []BridgeInstance, self string) string {
	var live, embedded []string
	for _, b := range bridges {
		if b.ID == self {
			continue
		}
		if b.Alive {
			live = append(live, b.ID)
			if b.Queue() == "embedded" {
				embedded = append(embedded, b.ID)
			}
		}
	}
	if self != "" {
		live = append(live, self)
		embedded = append(embedded, self)
	}
	if len(live) < 2 || len(embedded) == 0 {
		return ""
	}
	slices.Sort(live)
	slices.Sort(embedded)
	return fmt.Sprintf("%d live bridges share this Redis (%s) and %s run an embedded JetStream: "+
		"each embedded replica is a separate queue that only it delivers from, and a replica "+
		"that loses its JETRELAY_DATA_DIR loses the work items in it; set NATS_URL to one NATS cluster on every replica (docs/deployment.md)",
		len(live), strings.Join(live, ", "), strings.Join(embedded, ", "))
}
