package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/mgmt"
	"github.com/jetrelay/jetrelay/internal/reconcile"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

// The operator assets this package's series feed, relative to this directory.
var (
	alertsFile    = filepath.Join("..", "..", "deploy", "prometheus", "jetrelay-alerts.yml")
	dashboardFile = filepath.Join("..", "..", "deploy", "grafana", "jetrelay-dashboard.json")
	docsFile      = filepath.Join("..", "..", "docs", "observability.md")
)

// exposedNames returns every series name a fully wired Metrics exposes
// (histogram and summary suffixes included), from a real JetStream and a
// real Redis, after one call of each engine.Observer method (and each kind of decision).
func exposedNames(t *testing.T) map[string]bool {
	t.Helper()
	js, qc := dispatchQueue(t)
	rdb := testenv.Redis(t).Client
	m := New(Options{ScrapeTimeout: 5 * time.Second})
	m.WatchQueue(js, qc)
	m.WatchWaiting(js, qc)
	m.WatchRedis(store.New(rdb))
	m.WatchBridge(func() bridge.Stats { return bridge.Stats{} })
	m.WatchReconciler(func() reconcile.Stats { return reconcile.Stats{} })
	m.WatchBreakers(func() engine.BreakerStats { return engine.BreakerStats{} })
	m.WatchLimits(func() []engine.SubscriptionLimit { return nil })
	m.WatchWork(func() engine.WorkStats { return engine.WorkStats{New: 2, Back: 1} })
	m.WatchParks(func() engine.ParkStats { return engine.ParkStats{Parked: 1, Parks: 2} })
	m.WatchPool(func() engine.PoolStats { return engine.PoolStats{Workers: 64, Busy: 1, Max: 4096} })
	m.WatchReadiness(map[string]mgmt.Check{"redis": func(ctx context.Context) error { return rdb.Ping(ctx).Err() }})
	l := engine.Labels{EventType: "budget.exhausted"}
	m.Sending(l)
	m.Sent(l, engine.Send{Transport: "https", Outcome: "delivered", StatusCode: 200, Latency: time.Millisecond})
	m.Decided(engine.Decision{Kind: engine.Delivered, Labels: l, StatusCode: 200, Latency: time.Millisecond, Age: time.Second})
	m.Decided(engine.Decision{Kind: engine.Failed, Labels: l, Reason: "boundary_skipped", Latency: time.Millisecond, AutoDisabled: true})
	m.Decided(engine.Decision{Kind: engine.Retrying, Labels: l, Reason: "http_5xx"})
	m.Decided(engine.Decision{Kind: engine.Stale, Labels: l})
	m.PayloadInvalid("x", "missing_required")
	m.Decided(engine.Decision{Kind: engine.PutOff, Reason: "breaker_open"})

	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		n := mf.GetName()
		names[n] = true
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[n+"_sum"], names[n+"_count"] = true, true
		}
	}
	for _, want := range []string{"jetrelay_consumer_pending", "jetrelay_dispatch_pending", "jetrelay_bridge_moved_total", "jetrelay_breakers", "jetrelay_ready"} {
		if !names[want] {
			t.Fatalf("the wired registry lacks %s; have %v", want, names)
		}
	}
	return names
}

// promqlFunctions are the functions and aggregations the assets may use.
var promqlFunctions = set("sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "stddev", "stdvar",
	"count_values", "group", "rate", "irate", "increase", "delta", "idelta", "deriv", "predict_linear",
	"histogram_quantile", "clamp", "clamp_min", "clamp_max", "abs", "absent", "absent_over_time",
	"max_over_time", "min_over_time", "avg_over_time", "sum_over_time", "count_over_time", "changes", "resets",
	"label_replace", "label_join", "vector", "scalar", "time", "round", "ceil", "floor", "sort", "sort_desc", "timestamp")

// promqlKeywords are words in an expression that are neither series nor functions.
var promqlKeywords = set("and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan")

var (
	stringLiteral = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	labelMatchers = regexp.MustCompile(`\{[^{}]*\}`)
	rangeSelector = regexp.MustCompile(`\[[^\[\]]*\]`)
	groupingList  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
)

// promqlNames checks the shape of a PromQL expression (balanced brackets,
// known functions) and returns the series names it selects. It is the
// part of promtool's check that matters here: a rule that parses but
// selects a series jetrelay does not expose never fires.
func promqlNames(expr string) ([]string, error) {
	e := stringLiteral.ReplaceAllString(expr, `""`)
	depth := map[rune]int{}
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for _, r := range e {
		switch r {
		case '(', '[', '{':
			depth[r]++
		case ')', ']', '}':
			if depth[pairs[r]]--; depth[pairs[r]] < 0 {
				return nil, fmt.Errorf("unbalanced %q", r)
			}
		}
	}
	for r, d := range depth {
		if d != 0 {
			return nil, fmt.Errorf("unclosed %q", r)
		}
	}
	e = labelMatchers.ReplaceAllString(e, "")
	e = rangeSelector.ReplaceAllString(e, "")
	e = groupingList.ReplaceAllString(e, "")
	var names []string
	for i := 0; i < len(e); {
		c := e[i]
		switch {
		case c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(e) && (e[j] == '_' || e[j] == ':' || e[j] >= 'a' && e[j] <= 'z' || e[j] >= 'A' && e[j] <= 'Z' || e[j] >= '0' && e[j] <= '9') {
				j++
			}
			word := e[i:j]
			rest := strings.TrimLeft(e[j:], " \t\n")
			switch {
			case strings.HasPrefix(rest, "("):
				if !promqlFunctions[word] {
					return nil, fmt.Errorf("unknown function %s", word)
				}
			case promqlKeywords[strings.ToLower(word)]:
			default:
				names = append(names, word)
			}
			i = j
		case c >= '0' && c <= '9' || c == '.':
			// A number or a duration (1e-9, 0.25, 5m): never a name.
			j := i + 1
			for j < len(e) && (e[j] >= '0' && e[j] <= '9' || e[j] == '.' || e[j] >= 'a' && e[j] <= 'z' || (e[j] == '-' || e[j] == '+') && (e[j-1] == 'e' || e[j-1] == 'E')) {
				j++
			}
			i = j
		default:
			i++
		}
	}
	return names, nil
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestAlertRules_ParseAndSelectOnlyExposedSeries(t *testing.T) {
	names := exposedNames(t)
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true) // a misspelt key is an error, as in promtool
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	docs, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	groups, alerts := map[string]bool{}, map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || groups[g.Name] {
			t.Errorf("group name %q is empty or repeated", g.Name)
		}
		groups[g.Name] = true
		for _, r := range g.Rules {
			id := r.Alert + r.Record
			if (r.Alert == "") == (r.Record == "") {
				t.Errorf("rule %q must be either an alert or a recording rule", id)
			}
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", id, r.For, err)
				}
			}
			used, err := promqlNames(r.Expr)
			if err != nil || len(used) == 0 {
				t.Errorf("%s: expression %q: %v (selects %v)", id, r.Expr, err, used)
			}
			for _, n := range used {
				if !names[n] {
					t.Errorf("%s selects %s, which jetrelay does not expose", id, n)
				}
			}
			if r.Alert == "" {
				continue
			}
			if alerts[r.Alert] {
				t.Errorf("alert %s is defined twice", r.Alert)
			}
			alerts[r.Alert] = true
			if s := r.Labels["severity"]; s != "info" && s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want info, warning or critical", r.Alert, s)
			}
			anchor := "docs/observability.md#" + strings.ToLower(r.Alert)
			if r.Annotations["summary"] == "" || !strings.Contains(r.Annotations["description"], anchor) {
				t.Errorf("%s: needs a summary and a description pointing to %s", r.Alert, anchor)
			}
			if !bytes.Contains(docs, []byte("\n### "+r.Alert+"\n")) {
				t.Errorf("%s has no '### %s' section in %s", r.Alert, r.Alert, docsFile)
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("no alerts found")
	}
}

func TestAlertRules_PassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		// Where `go tool task test` puts it (deps:promtool).
		promtool = filepath.Join("..", "..", ".cache", "bin", "promtool")
		if _, serr := os.Stat(promtool); serr != nil {
			t.Fatal("promtool not found on PATH nor in .cache/bin: `go tool task test` extracts it there (deps:promtool); TestAlertRules_ParseAndSelectOnlyExposedSeries checks the rules without it")
		}
	}
	out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput()
	if err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}

func TestDashboard_QueriesOnlyExposedSeries(t *testing.T) {
	names := exposedNames(t)
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type    string                   `json:"type"`
			Title   string                   `json:"title"`
			GridPos struct{ H, W, X, Y int } `json:"gridPos"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s is not JSON: %v", dashboardFile, err)
	}
	if dash.Title == "" || dash.UID == "" {
		t.Errorf("dashboard needs a title and a uid")
	}
	check := func(where, expr string) {
		used, err := promqlNames(expr)
		if err != nil || len(used) == 0 {
			t.Errorf("%s: expression %q: %v (selects %v)", where, expr, err, used)
		}
		for _, n := range used {
			if !names[n] {
				t.Errorf("%s queries %s, which jetrelay does not expose", where, n)
			}
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			m := labelValues.FindStringSubmatch(q)
			if m == nil || !names[m[1]] {
				t.Errorf("variable %s: query %q is not label_values of an exposed series", v.Name, q)
			}
		}
	}
	queries := 0
	for _, p := range dash.Panels {
		if p.GridPos.W < 1 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q does not fit the 24-column grid: %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr)
			queries++
		}
	}
	if queries < 10 {
		t.Errorf("the dashboard has %d queries; expected the full set", queries)
	}
}

func TestPromqlNames_FindsSeriesNotFunctionsLabelsOrDurations(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`sum by (reason) (rate(a_total{reason=~"x|y", instance="$i"}[5m])) / sum(rate(b_total[$__rate_interval])) > 1e-9`, []string{"a_total", "b_total"}},
		{`max by (stream, consumer) (c / d) > 0.8 and on (stream) e offset 5m`, []string{"c", "d", "e"}},
		{`histogram_quantile(0.99, sum by (le) (rate(f_bucket[1m])))`, []string{"f_bucket"}},
	}
	for _, c := range cases {
		got, err := promqlNames(c.expr)
		if err != nil || strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("promqlNames(%q) = %v, %v; want %v", c.expr, got, err, c.want)
		}
	}
	for _, bad := range []string{`sum(rate(x[5m])`, `frobnicate(x)`, `x{a="1"`} {
		if _, err := promqlNames(bad); err == nil {
			t.Errorf("promqlNames(%q) accepted a malformed expression", bad)
		}
	}
}
