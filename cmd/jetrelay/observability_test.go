package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/proto"
)

// referenceSeries is contract §6.10: every cycles_webhook_* series of the
// reference service with its label names (tenant included, as with
// CYCLES_METRICS_TENANT_TAG_ENABLED=true). The latency Timer is a summary
// (_count, _sum) plus Micrometer's _max gauge.
var referenceSeries = map[string][]string{
	"cycles_webhook_delivery_attempts_total":          {"event_type", "tenant"},
	"cycles_webhook_delivery_success_total":           {"event_type", "status_code_family", "tenant"},
	"cycles_webhook_delivery_failed_total":            {"event_type", "reason", "tenant"},
	"cycles_webhook_delivery_retried_total":           {"event_type", "tenant"},
	"cycles_webhook_delivery_stale_total":             {"tenant"},
	"cycles_webhook_subscription_auto_disabled_total": {"reason", "tenant"},
	"cycles_webhook_delivery_latency_seconds":         {"event_type", "outcome", "tenant"},
	"cycles_webhook_delivery_latency_seconds_max":     {"event_type", "outcome", "tenant"},
	"cycles_webhook_events_payload_invalid_total":     {"rule", "type"},
}

// engineSeries is what jetrelay adds for a JetStream engine.
var engineSeries = map[string][]string{
	"jetrelay_stream_messages":                 {"stream"},
	"jetrelay_consumer_pending":                {"consumer", "stream"},
	"jetrelay_consumer_ack_pending":            {"consumer", "stream"},
	"jetrelay_consumer_max_ack_pending":        {"consumer", "stream"},
	"jetrelay_consumer_redelivered":            {"consumer", "stream"},
	"jetrelay_queue_info_up":                   nil,
	"jetrelay_dispatch_pending":                nil,
	"jetrelay_scheduled_wakeups":               nil,
	"jetrelay_held_deliveries":                 nil,
	"jetrelay_waiting_info_up":                 nil,
	"jetrelay_dispatch_failed":                 nil,
	"jetrelay_redis_info_up":                   nil,
	"jetrelay_bridge_moved_total":              nil,
	"jetrelay_bridge_published_total":          nil,
	"jetrelay_bridge_duplicates_total":         nil,
	"jetrelay_bridge_requeued_total":           nil,
	"jetrelay_bridge_recovered_total":          nil,
	"jetrelay_bridge_adopted_total":            nil,
	"jetrelay_bridge_promoted_total":           nil,
	"jetrelay_bridge_undeferred_total":         nil,
	"jetrelay_bridge_quarantined_total":        nil,
	"jetrelay_breakers":                        {"state"},
	"jetrelay_transport_sends_total":           {"outcome", "transport"},
	"jetrelay_transport_send_duration_seconds": {"transport"},
	"jetrelay_delivery_age_seconds":            nil,
	"jetrelay_sends_in_flight":                 nil,
	"jetrelay_ready":                           {"check"},
	"jetrelay_build_info":                      {"version"},
}

func TestRun_MetricsExposeEveryReferenceSeriesAndLogsKeepSecretsOut(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	ctx := context.Background()

	// A healthy receiver behind a URL with credentials in it, and a dead
	// one that fails fast and is disabled after one failed delivery.
	const password = "pa55w0rd-in-url"
	healthyID, healthySecret, err := b.writer.CreateSubscription(ctx, admin.Subscription{
		TenantID: "tenant-proc", URL: strings.Replace(b.recvBase, "http://", "http://ops:"+password+"@", 1) + "/ok",
		EventTypes: []string{"budget.exhausted"},
	})
	if err != nil {
		t.Fatal(err)
	}
	healthy := b.recv.Handle("/ok", healthySecret, receiver.Healthy())
	b.mux.Handle("/ok", b.recv)
	one := 1
	deadSecret := "whsec_dead_" + strings.Repeat("s", 24)
	if _, _, err := b.writer.CreateSubscription(ctx, admin.Subscription{
		TenantID: "tenant-proc", URL: b.recvBase + "/down", EventTypes: []string{"budget.exhausted"},
		RetryPolicy:          &proto.RetryPolicy{MaxRetries: &one, InitialDelayMs: ptr(int64(100))},
		DisableAfterFailures: 1, SigningSecret: deadSecret,
	}); err != nil {
		t.Fatal(err)
	}
	b.recv.Handle("/down", deadSecret, receiver.Always(http.StatusServiceUnavailable))
	b.mux.Handle("/down", b.recv)

	// One event to both (success; 503, retry, failure, auto-disable), one
	// with an uppercase trace id (payload validator), and two deliveries
	// that fail unsent: a missing event and a stale one.
	sent := b.emit(t, "budget.exhausted", 1)
	ev := event("budget.exhausted")
	ev.TraceID = strings.ToUpper(proto.NewTraceID())
	evID, shaped, err := b.writer.Emit(ctx, ev, admin.TraceSnapshot{})
	if err != nil {
		t.Fatal(err)
	}
	missing := admin.Delivery{SubscriptionID: healthyID, EventID: "evt_gone", EventType: "budget.exhausted"}
	stale := admin.Delivery{SubscriptionID: healthyID, EventID: evID, EventType: "budget.exhausted",
		DeliveryID: "del_stale_1", AttemptedAt: time.Now().Add(-48 * time.Hour)}
	var unsent []string
	for _, d := range []admin.Delivery{missing, stale} {
		if _, err := b.writer.Enqueue(ctx, d); err != nil {
			t.Fatal(err)
		}
		if d.DeliveryID == "" {
			d.DeliveryID = admin.DeliveryID(d.EventID, d.SubscriptionID)
		}
		unsent = append(unsent, d.DeliveryID)
	}

	// Inactive policy "fail": the dead subscription's second delivery, if it
	// is still retrying when the first one disables it, ends at once
	// ("Subscription not active") instead of waiting for a re-enable.
	r := startRelay(t, b.env("JETRELAY_LOG_FORMAT", "json", "JETRELAY_LOG_LEVEL", "debug", "CYCLES_METRICS_TENANT_TAG_ENABLED", "true",
		"JETRELAY_INACTIVE_SUBSCRIPTIONS", "fail"))
	all := append(append(slices.Clone(sent), shaped...), unsent...)
	b.awaitSettled(t, all, 20*time.Second)
	r.awaitHTTP(t, "/readyz", http.StatusOK, 10*time.Second)

	// Metrics: every reference series with its label names, the engine's
	// own, and the outcomes this test caused.
	code, body := r.get("/actuator/prometheus") // the reference path; /metrics serves the same
	if code != http.StatusOK {
		t.Fatalf("/actuator/prometheus answered %d: %.300s", code, body)
	}
	if code, _ := r.get("/metrics"); code != http.StatusOK {
		t.Errorf("/metrics answered %d, want 200", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	for _, want := range []map[string][]string{referenceSeries, engineSeries} {
		for name, labels := range want {
			mf := fams[name]
			if mf == nil || len(mf.GetMetric()) == 0 {
				t.Errorf("/metrics has no %s series", name)
				continue
			}
			for _, mt := range mf.GetMetric() {
				var have []string
				for _, lp := range mt.GetLabel() {
					have = append(have, lp.GetName())
				}
				slices.Sort(have)
				if !slices.Equal(have, labels) {
					t.Errorf("%s has labels %v, want %v", name, have, labels)
					break
				}
			}
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"cycles_webhook_delivery_success_total", map[string]string{"tenant": "tenant-proc", "event_type": "budget.exhausted", "status_code_family": "2xx"}},
		{"cycles_webhook_delivery_failed_total", map[string]string{"reason": "http_5xx"}},
		{"cycles_webhook_delivery_failed_total", map[string]string{"reason": "event_not_found", "tenant": "UNKNOWN"}},
		{"cycles_webhook_delivery_retried_total", map[string]string{"event_type": "budget.exhausted"}},
		{"cycles_webhook_delivery_stale_total", map[string]string{"tenant": "UNKNOWN"}},
		{"cycles_webhook_subscription_auto_disabled_total", map[string]string{"reason": "consecutive_failures", "tenant": "tenant-proc"}},
		{"cycles_webhook_events_payload_invalid_total", map[string]string{"type": "budget.exhausted", "rule": "trace_id_shape"}},
		{"jetrelay_transport_sends_total", map[string]string{"transport": "http", "outcome": "delivered"}},
		{"jetrelay_ready", map[string]string{"check": "engine"}},
	} {
		if v := sumWhere(fams[c.name], c.labels); v < 1 {
			t.Errorf("%s%v = %v, want at least 1", c.name, c.labels, v)
		}
	}

	// Logs: JSON, one line per terminal outcome with the stable keys, and
	// no secret, signature or URL credential anywhere.
	logs := r.logs.String()
	var signatures []string
	for _, d := range healthy.Deliveries() {
		signatures = append(signatures, d.Header.Get(proto.HeaderSignature))
	}
	for _, secret := range append([]string{password, "ops:", healthySecret, deadSecret, b.keyB64, "sha256="}, signatures...) {
		if secret != "" && strings.Contains(logs, secret) {
			t.Errorf("the logs contain %q (a secret, signature or URL credential)", secret)
		}
	}
	outcomes := map[string]map[string]int{} // delivery id → outcome → lines
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("log line is not JSON: %.200s", sc.Text())
			continue
		}
		outcome, _ := line["outcome"].(string)
		id, _ := line["delivery_id"].(string)
		if outcome != "success" && outcome != "failed" {
			continue
		}
		if outcomes[id] == nil {
			outcomes[id] = map[string]int{}
		}
		outcomes[id][outcome]++
		keys := []string{"delivery_id", "subscription_id", "event_id"}
		if outcome == "success" {
			keys = append(keys, "trace_id", "attempt")
		}
		for _, k := range keys {
			if v, ok := line[k]; !ok || v == "" {
				t.Errorf("%s line of %s lacks %q: %s", outcome, id, k, sc.Text())
			}
		}
	}
	for _, id := range all {
		if n := outcomes[id]["success"] + outcomes[id]["failed"]; n != 1 {
			t.Errorf("delivery %s has %d terminal outcome lines (%v), want exactly 1", id, n, outcomes[id])
		}
	}
}

// awaitSettled polls until every delivery is SUCCESS or FAILED.
func (b *bed) awaitSettled(t *testing.T, ids []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st := b.statuses(ids)
		left := map[string]proto.DeliveryStatus{}
		for id, s := range st {
			if s != proto.DeliverySuccess && s != proto.DeliveryFailed {
				left[id] = s
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries not final after %s: %v", len(left), within, sample(left, 5))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sumWhere adds the values of mf's series whose labels include want.
func sumWhere(mf *dto.MetricFamily, want map[string]string) float64 {
	var sum float64
next:
	for _, mt := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range mt.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		sum += mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
	}
	return sum
}

func ptr[T any](v T) *T { return &v }
