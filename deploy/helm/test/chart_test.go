package test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../jetrelay"

// The three custom resources the chart renders, with exactly the fields of
// their CRDs it uses (prometheus-operator monitoring.coreos.com/v1, KEDA
// keda.sh/v1alpha1): a misspelt field is rejected like one of a core type.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ruleFile `json:"spec"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert,omitempty"`
			Record      string            `json:"record,omitempty"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount int `json:"minReplicaCount"`
		MaxReplicaCount int `json:"maxReplicaCount"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// kinds maps apiVersion/kind to the type an object must decode into.
var kinds = map[string]func() any{
	"apps/v1/StatefulSet":                     func() any { return &appsv1.StatefulSet{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &serviceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &prometheusRule{} },
	"keda.sh/v1alpha1/ScaledObject":           func() any { return &scaledObject{} },
}

// objects is a rendered chart: every object by kind and name.
type objects map[string]any

func (o objects) get(t *testing.T, kind, name string) any {
	t.Helper()
	v, ok := o[kind+"/"+name]
	if !ok {
		t.Fatalf("no %s %s rendered; have %v", kind, name, o.names())
	}
	return v
}

func (o objects) names() []string {
	var n []string
	for k := range o {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// render renders the chart with the values files and overrides (as
// `helm template jetrelay deploy/helm/jetrelay -f … --set …`) and decodes
// every object strictly.
func render(t *testing.T, files []string, set map[string]any) (objects, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, f))
		if err != nil {
			t.Fatalf("values %s: %v", f, err)
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	for path, v := range set {
		setPath(vals, strings.Split(path, "."), v)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "jetrelay", Namespace: "jetrelay", IsInstall: true}, nil)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	objs := objects{}
	for file, text := range out {
		for _, doc := range strings.Split(text, "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s: not YAML: %v\n%s", file, err, doc)
			}
			mk, ok := kinds[meta.APIVersion+"/"+meta.Kind]
			if !ok {
				t.Fatalf("%s: unexpected object %s/%s", file, meta.APIVersion, meta.Kind)
			}
			obj := mk()
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s: %s does not decode strictly: %v\n%s", file, meta.Kind, err, doc)
			}
			name := reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta").Interface().(metav1.ObjectMeta).Name
			objs[meta.Kind+"/"+name] = obj
		}
	}
	return objs, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func setPath(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

func env(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

func TestChart_EmbeddedDefaultIsOneReplicaWithItsStoreOnAVolume(t *testing.T) {
	objs, err := render(t, nil, nil)
	if err != nil {
		t.Fatalf("render defaults: %v", err)
	}
	sts := objs.get(t, "StatefulSet", "jetrelay").(*appsv1.StatefulSet)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1", sts.Spec.Replicas)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "data" {
		t.Errorf("volumeClaimTemplates %+v, want one named data for the embedded store", sts.Spec.VolumeClaimTemplates)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	e := env(c)
	if _, set := e["NATS_URL"]; set {
		t.Errorf("NATS_URL set in the embedded shape")
	}
	if e["JETRELAY_DATA_DIR"].Value != "/data" || c.VolumeMounts[0].MountPath != "/data" {
		t.Errorf("data dir %q mounted at %q, want /data on the claim", e["JETRELAY_DATA_DIR"].Value, c.VolumeMounts[0].MountPath)
	}
	if pending, _ := strconv.Atoi(e["JETRELAY_MAX_ACK_PENDING"].Value); pending < heldAtBusiest(t, c) {
		t.Errorf("JETRELAY_MAX_ACK_PENDING %d below what the one replica holds at its busiest (%d)", pending, heldAtBusiest(t, c))
	}
	checkPod(t, sts)
	pdb := objs.get(t, "PodDisruptionBudget", "jetrelay").(*policyv1.PodDisruptionBudget)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	for _, k := range []string{"NetworkPolicy/jetrelay", "ServiceMonitor/jetrelay", "PrometheusRule/jetrelay", "ScaledObject/jetrelay"} {
		if _, ok := objs[k]; ok {
			t.Errorf("%s rendered although it is off by default", k)
		}
	}
}

// checkPod asserts what every shape's pod needs: stable bridge ids, probes,
// requests, a drain that fits the grace period, non-root.
func checkPod(t *testing.T, sts *appsv1.StatefulSet) {
	t.Helper()
	spec := sts.Spec.Template.Spec
	c := spec.Containers[0]
	id := env(c)["JETRELAY_BRIDGE_ID"]
	if id.ValueFrom == nil || id.ValueFrom.FieldRef == nil || id.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("JETRELAY_BRIDGE_ID %+v, want the pod name (stable in a StatefulSet)", id)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want GET /readyz", c.ReadinessProbe)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v, want GET /healthz", c.LivenessProbe)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests %v, want cpu and memory", c.Resources.Requests)
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds <= 25 {
		t.Errorf("terminationGracePeriodSeconds %v, want more than the 25 s drain", spec.TerminationGracePeriodSeconds)
	}
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
		t.Errorf("pod security context %+v, want runAsNonRoot", spec.SecurityContext)
	}
	// The worker pool follows demand, as `jetrelay run`'s defaults have it:
	// a floor below the cap. A floor at or above the cap is a fixed pool,
	// which leaves a replica idle behind slow receivers (issue 22).
	e := env(c)
	floor, errFloor := strconv.Atoi(e["JETRELAY_MIN_WORKERS"].Value)
	limit, errCap := strconv.Atoi(e["JETRELAY_WORKERS"].Value)
	if errFloor != nil || errCap != nil || floor != 64 || limit != 4096 {
		t.Errorf("JETRELAY_MIN_WORKERS %q, JETRELAY_WORKERS %q: want the elastic pool of jetrelay run's defaults, 64 growing to 4096",
			e["JETRELAY_MIN_WORKERS"].Value, e["JETRELAY_WORKERS"].Value)
	}
	// jetrelay refuses to start with MaxAckPending below its workers.
	if pending, err := strconv.Atoi(e["JETRELAY_MAX_ACK_PENDING"].Value); err != nil || pending < limit {
		t.Errorf("JETRELAY_MAX_ACK_PENDING %q, want at least JETRELAY_WORKERS (%d)", e["JETRELAY_MAX_ACK_PENDING"].Value, limit)
	}
}

// heldAtBusiest is what one replica may hold against the shared consumer's
// MaxAckPending at its busiest (docs/operations.md, Sizing): its pool at
// the most the memory budget allows (3/4 of the memory limit, half of it
// at 64 KiB a worker) and up to 6 x min(workers, 512) buffered items.
func heldAtBusiest(t *testing.T, c corev1.Container) int {
	t.Helper()
	workers, err := strconv.Atoi(env(c)["JETRELAY_WORKERS"].Value)
	if err != nil {
		t.Fatalf("JETRELAY_WORKERS: %v", err)
	}
	limit := c.Resources.Limits.Memory().Value()
	if limit <= 0 {
		t.Fatalf("no memory limit: the pool's memory budget would not follow the pod")
	}
	pool := min(workers, int(limit*3/4/2/(64<<10)))
	return pool + 6*min(workers, 512)
}

func TestChart_ClusterShapeScalesOnTheBacklogWithMonitoring(t *testing.T) {
	objs, err := render(t, []string{"values-cluster.yaml"}, nil)
	if err != nil {
		t.Fatalf("render values-cluster.yaml: %v", err)
	}
	sts := objs.get(t, "StatefulSet", "jetrelay").(*appsv1.StatefulSet)
	if sts.Spec.Replicas != nil {
		t.Errorf("replicas %d set although the autoscaler owns them", *sts.Spec.Replicas)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 0 {
		t.Errorf("volume claims on external NATS: %+v", sts.Spec.VolumeClaimTemplates)
	}
	e := env(sts.Spec.Template.Spec.Containers[0])
	if !strings.HasPrefix(e["NATS_URL"].Value, "nats://") || e["JETRELAY_STREAM_REPLICAS"].Value != "3" {
		t.Errorf("NATS_URL %q stream replicas %q, want the external cluster at R3", e["NATS_URL"].Value, e["JETRELAY_STREAM_REPLICAS"].Value)
	}
	checkPod(t, sts)
	so := objs.get(t, "ScaledObject", "jetrelay").(*scaledObject)
	// Every replica shares one consumer: its MaxAckPending must cover what
	// all of them hold at their busiest, or slow receivers on some
	// replicas stop JetStream handing out work to all.
	c := sts.Spec.Template.Spec.Containers[0]
	pending, _ := strconv.Atoi(e["JETRELAY_MAX_ACK_PENDING"].Value)
	if need := so.Spec.MaxReplicaCount * heldAtBusiest(t, c); pending < need {
		t.Errorf("JETRELAY_MAX_ACK_PENDING %d, want at least %d: %d replicas holding %d items each at their busiest",
			pending, need, so.Spec.MaxReplicaCount, heldAtBusiest(t, c))
	}
	tr := so.Spec.Triggers[0]
	if so.Spec.ScaleTargetRef.Kind != "StatefulSet" || tr.Type != "nats-jetstream" || tr.Metadata["stream"] != "JETRELAY_DISPATCH" || tr.Metadata["consumer"] != "jetrelay-engine" || tr.Metadata["lagThreshold"] == "" {
		t.Errorf("ScaledObject %+v, want the nats-jetstream scaler on the dispatch consumer's lag", so.Spec)
	}
	np := objs.get(t, "NetworkPolicy", "jetrelay").(*networkingv1.NetworkPolicy)
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) == 0 {
		t.Errorf("NetworkPolicy ingress %+v, want the management port from the listed peers only", np.Spec.Ingress)
	}
	sm := objs.get(t, "ServiceMonitor", "jetrelay").(*serviceMonitor)
	if sm.Spec.Endpoints[0].Path != "/metrics" || sm.Spec.Endpoints[0].Port != "management" {
		t.Errorf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
	}

	// The rules and the dashboard are deploy/'s own files, unchanged.
	pr := objs.get(t, "PrometheusRule", "jetrelay").(*prometheusRule)
	var want ruleFile
	raw, err := os.ReadFile("../../prometheus/jetrelay-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, &want); err != nil {
		t.Fatalf("deploy/prometheus/jetrelay-alerts.yml: %v", err)
	}
	if !reflect.DeepEqual(pr.Spec, want) || len(want.Groups) == 0 {
		t.Errorf("PrometheusRule spec differs from deploy/prometheus/jetrelay-alerts.yml")
	}
	cm := objs.get(t, "ConfigMap", "jetrelay-dashboard").(*corev1.ConfigMap)
	dash, err := os.ReadFile("../../grafana/jetrelay-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(cm.Data["jetrelay-dashboard.json"]) != strings.TrimSpace(string(dash)) || cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap differs from deploy/grafana/jetrelay-dashboard.json or lacks the sidecar label")
	}
}

func TestChart_HPAKindScalesOnJetrelaysBacklogGauge(t *testing.T) {
	objs, err := render(t, []string{"values-cluster.yaml"}, map[string]any{"autoscaling.kind": "hpa"})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	hpa := objs.get(t, "HorizontalPodAutoscaler", "jetrelay").(*autoscalingv2.HorizontalPodAutoscaler)
	m := hpa.Spec.Metrics[0]
	if m.External == nil || m.External.Metric.Name != "jetrelay_consumer_pending" || hpa.Spec.ScaleTargetRef.Kind != "StatefulSet" {
		t.Errorf("HPA %+v, want an external metric jetrelay_consumer_pending on the StatefulSet", hpa.Spec)
	}
	if _, ok := objs["ScaledObject/jetrelay"]; ok {
		t.Errorf("a ScaledObject was rendered beside the HPA")
	}
}

func TestChart_RefusesSeveralEmbeddedReplicas(t *testing.T) {
	for name, set := range map[string]map[string]any{
		"three replicas":                {"replicaCount": 3},
		"autoscaling":                   {"autoscaling.enabled": true},
		"no key, no plain":              {"webhookSecret.encryptionKeySecret.name": ""},
		"ack-pending below the workers": {"maxAckPending": 1000},
	} {
		_, err := render(t, nil, set)
		if err == nil {
			t.Errorf("%s: rendered, want a refusal", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	_, err := render(t, nil, map[string]any{"replicaCount": 3})
	if err == nil || !strings.Contains(err.Error(), "separate queue") {
		t.Errorf("three embedded replicas: %v, want an error saying each would be a separate queue", err)
	}
}

func TestChart_FilesMatchDeploy(t *testing.T) {
	for copyPath, orig := range map[string]string{
		"files/jetrelay-alerts.yml":     "../../prometheus/jetrelay-alerts.yml",
		"files/jetrelay-dashboard.json": "../../grafana/jetrelay-dashboard.json",
	} {
		a, errA := os.ReadFile(filepath.Join(chartDir, copyPath))
		b, errB := os.ReadFile(orig)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s (copy it again: cp %s deploy/helm/jetrelay/%s)", copyPath, orig, strings.TrimPrefix(orig, "../../"), copyPath)
		}
	}
}

func TestChart_Lints(t *testing.T) {
	for _, files := range [][]string{nil, {"values-cluster.yaml"}} {
		vals := map[string]any{}
		for _, f := range files {
			v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, f))
			if err != nil {
				t.Fatal(err)
			}
			vals = v.AsMap()
		}
		l := lint.All(chartDir, vals, "jetrelay", false)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint %v: %s", files, m)
			} else {
				t.Logf("helm lint %v: %s", files, m)
			}
		}
	}
}
