package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/proto"
)

// StatusPath is where the management server serves the status report.
const StatusPath = "/status"

// statusBudget bounds one /status request or one replica fetch.
const statusBudget = 3 * time.Second

// LocalReplica returns a function that reports this process's own state:
// eng's breakers and limits and br's counters (either may be nil, as the
// process's role decides).
func LocalReplica(name, role string, eng *engine.Engine, br *bridge.Bridge) func() Replica {
	return func() Replica {
		r := Replica{Name: name, Role: role}
		if eng != nil {
			st := eng.BreakerStats()
			r.Breakers = BreakerCounts{Closed: st.Closed, HalfOpen: st.HalfOpen, Open: st.Open}
			for _, b := range eng.OpenBreakers() {
				ob := Breaker{SubscriptionID: b.SubscriptionID, State: "half_open"}
				if b.Open {
					ob.State = "open"
				}
				if !b.OpenUntil.IsZero() {
					ob.OpenUntil = proto.FormatInstant(b.OpenUntil.UTC())
				}
				r.OpenBreakers = append(r.OpenBreakers, ob)
			}
			for _, l := range eng.Limits() {
				r.Limits = append(r.Limits, Limit{SubscriptionID: l.SubscriptionID, Limit: l.Limit, InFlight: l.InFlight})
			}
			for _, l := range eng.FailingLines() {
				r.FailingLines = append(r.FailingLines, FailingLine{SubscriptionID: l.SubscriptionID, Since: proto.FormatInstant(l.Since.UTC()), Error: l.Err})
			}
		}
		if br != nil {
			s := br.Stats()
			r.Bridge = &BridgeCounters{Moved: s.Moved, Published: s.Published, Duplicates: s.Duplicates,
				Requeued: s.Requeued, Recovered: s.Recovered, Quarantined: s.Quarantined}
		}
		return r
	}
}

// StatusHandler serves the status report as JSON (read-only, GET only):
// the cluster-wide queue state as t reads it, plus this replica's own.
func StatusHandler(t *Tool, local func() Replica) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), statusBudget)
		defer cancel()
		rep, err := t.Status(ctx, []Replica{local()})
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(rep)
	})
}

// ReadReplicas fetches each management endpoint's /status and returns the
// replicas they describe. An endpoint that does not answer becomes a
// replica with Error set, never a failure of the whole status.
func ReadReplicas(ctx context.Context, client *http.Client, endpoints []string) []Replica {
	var out []Replica
	for _, ep := range endpoints {
		ep = strings.TrimRight(strings.TrimSpace(ep), "/")
		if ep == "" {
			continue
		}
		rs, err := readReplica(ctx, client, ep)
		if err != nil {
			out = append(out, Replica{Name: ep, Endpoint: ep, Error: err.Error()})
			continue
		}
		for _, r := range rs {
			r.Endpoint = ep
			out = append(out, r)
		}
	}
	sortReplicas(out)
	return out
}

func readReplica(ctx context.Context, client *http.Client, endpoint string) ([]Replica, error) {
	ctx, cancel := context.WithTimeout(ctx, statusBudget)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+StatusPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("unreachable: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s%s answered %s", endpoint, StatusPath, resp.Status)
	}
	var rep Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, fmt.Errorf("%s%s: not a jetrelay status report: %w", endpoint, StatusPath, err)
	}
	return rep.Replicas, nil
}
