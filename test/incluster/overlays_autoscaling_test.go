package incluster

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/engine"
	// SGLang's rule is checked beside vLLM's.
	_ "github.com/example/inferenceservice-operator/controller/engine/sglang"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// adapterRule is one rule of prometheus-adapter's configuration file, the fields the rule
// for the HPAs' queue metric uses.
type adapterRule struct {
	SeriesQuery string `json:"seriesQuery"`
	Resources   struct {
		Overrides map[string]struct {
			Group    string `json:"group"`
			Resource string `json:"resource"`
		} `json:"overrides"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`
}

// promQLParses runs each expression through promtool's rule check, Prometheus's own parser.
func promQLParses(t *testing.T, exprs ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not on PATH: install it with `apt-get install -y prometheus` (Debian)")
	}
	var rules []any
	for i, e := range exprs {
		rules = append(rules, map[string]any{"record": "check:expr" + string(rune('a'+i)), "expr": e})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "check", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(testenv.Ctx(t, time.Minute), bin, "check", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, b)
	}
}

// TestPrometheusAdapterOverlay: manifests/overlays/prometheus-adapter is the base install
// without the operator's metrics adapter, plus prometheus-adapter's rules mapping each engine's
// queue (vllm:num_requests_waiting, sglang:num_queue_reqs) and KV-cache use
// (vllm:kv_cache_usage_perc, sglang:token_usage) to the metric the HPAs of its models ask for,
// per pod, the queue summed and the KV use averaged over the engine's other labels, in PromQL
// Prometheus parses; the
// Helm values carry the same rules; the overlay passes a server-side dry run.
func TestPrometheusAdapterOverlay(t *testing.T) {
	const overlay = "manifests/overlays/prometheus-adapter"
	objs := render(t, overlay)
	key := func(kind, ns, name string) string { return kind + " " + ns + "/" + name }
	adapter := func(name string) bool { return strings.HasPrefix(name, "inferenceservice-metrics-adapter") }
	have := map[string]bool{}
	for _, o := range objs {
		have[key(o.GetKind(), o.GetNamespace(), o.GetName())] = true
		if adapter(o.GetName()) || o.GetKind() == "APIService" {
			t.Errorf("the operator's metrics adapter is still installed: %s %s", o.GetKind(), o.GetName())
		}
	}
	base := 0
	for _, o := range render(t, "manifests") {
		if adapter(o.GetName()) {
			continue
		}
		base++
		if k := key(o.GetKind(), o.GetNamespace(), o.GetName()); !have[k] {
			t.Errorf("the overlay lacks the base's %s", k)
		}
	}
	if base+1 != len(objs) {
		t.Errorf("%d objects, want the base's %d but its metrics adapter, and the rule's ConfigMap", len(objs), base)
	}

	cm := find(t, objs, "ConfigMap", "monitoring", "prometheus-adapter-vllm-rules")
	data, _ := cm.Object["data"].(map[string]any)
	var config struct {
		Rules []adapterRule `json:"rules"`
	}
	if err := yaml.UnmarshalStrict([]byte(data["config.yaml"].(string)), &config); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	// Two rules per engine: its queue series and its KV-cache gauge, each served under the name
	// the HPA of a model on that engine asks for (spec.autoscaling.metric queue, kvCache); and
	// one for both engines' TTFT histograms (metric ttft), checked by ttftRuleServes.
	if len(config.Rules) != 2*len(engine.Names())+1 {
		t.Fatalf("%d rules, want two per engine %v and the TTFT p95's", len(config.Rules), engine.Names())
	}
	ttftRuleServes(t, config.Rules[len(config.Rules)-1])
	for _, name := range engine.Names() {
		e := engine.For(name)
		for _, metric := range []string{crd.AutoscalingMetricQueue, crd.AutoscalingMetricKVCache} {
			series, agg := e.Metrics().Queue, "sum"
			if metric == crd.AutoscalingMetricKVCache {
				series, agg = e.Metrics().KVCacheUsage, "avg"
			}
			i := slices.IndexFunc(config.Rules, func(r adapterRule) bool { return r.SeriesQuery == series+`{namespace!="",pod!=""}` })
			if i < 0 {
				t.Errorf("%s: no rule's seriesQuery is %s{namespace!=\"\",pod!=\"\"}", name, series)
				continue
			}
			r := config.Rules[i]
			if ns, pod := r.Resources.Overrides["namespace"], r.Resources.Overrides["pod"]; len(r.Resources.Overrides) != 2 ||
				ns.Resource != "namespace" || ns.Group != "" || pod.Resource != "pod" || pod.Group != "" {
				t.Errorf("%s: resources.overrides %+v: the namespace and pod labels name the core resources", name, r.Resources.Overrides)
			}
			// The name the operator's HPA for a model on e asks the custom metrics API for.
			isvc := &crd.InferenceService{Spec: crd.InferenceServiceSpec{Model: "Qwen/Qwen3-0.6B", Replicas: 2, GPUsPerReplica: ptr.To[int32](1)}}
			isvc.Name, isvc.Namespace, isvc.UID = "qwen3", "team-a", types.UID("u")
			asked := e.Metrics().QueueName
			if metric == crd.AutoscalingMetricKVCache {
				asked = e.Metrics().KVCacheName
			}
			if name == engine.VLLM { // the default engine: what DesiredChildren's HPA asks for
				ext := &crd.SpecExtensions{}
				if metric == crd.AutoscalingMetricKVCache {
					ext.Autoscaling = &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 2, Metric: metric}
				}
				hpa := reconcile.DesiredChildren(isvc, ext, reconcile.Features{}).HPA
				asked = hpa.Spec.Metrics[0].Pods.Metric.Name
			}
			if re, err := regexp.Compile(r.Name.Matches); err != nil || !re.MatchString(series) || r.Name.As != asked {
				t.Errorf("%s: name %+v (%v): must match %s and be served as %s", name, r.Name, err, series, asked)
			}
			// The query as prometheus-adapter expands it for one HPA's pods.
			tmpl, err := template.New("metricsQuery").Delims("<<", ">>").Parse(r.MetricsQuery)
			if err != nil {
				t.Fatal(err)
			}
			var q bytes.Buffer
			if err := tmpl.Execute(&q, map[string]any{
				"Series": series, "LabelMatchers": `namespace="team-a",pod=~"qwen3-6f7c9-x2x8d|qwen3-6f7c9-k8wq4"`,
				"GroupBy": "pod", "GroupBySlice": []string{"pod"},
			}); err != nil {
				t.Fatal(err)
			}
			want := agg + ` by (pod) (` + series + `{namespace="team-a",pod=~"qwen3-6f7c9-x2x8d|qwen3-6f7c9-k8wq4"})`
			if q.String() != want {
				t.Errorf("%s: metricsQuery expands to\n%s\nwant (one value per pod, the engine's other labels %sed)\n%s", name, q.String(), agg, want)
			}
			promQLParses(t, r.SeriesQuery, q.String())
		}
	}

	// The Helm chart's values hold the same rules.
	b, err := os.ReadFile(filepath.Join(env.Root, overlay, "helm-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Rules struct {
			Custom []adapterRule `json:"custom"`
		} `json:"rules"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(values.Rules.Custom, config.Rules) {
		t.Errorf("helm-values.yaml's rules.custom %+v differs from the ConfigMap's %+v", values.Rules.Custom, config.Rules)
	}

	env.CreateNamespace(t, "monitoring")
	applyClean(t, "apply", "--dry-run=server", "-k", filepath.Join(env.Root, overlay))
}

// TestKEDAQueueQueryParses: the PromQL a ScaledObject's trigger asks Prometheus parses, on the
// queue and on the KV cache (spec.autoscaling.metric kvCache).
func TestKEDAQueueQueryParses(t *testing.T) {
	for _, name := range engine.Names() {
		e := engine.For(name)
		promQLParses(t, reconcile.QueueQuery(e, "team-a", "qwen3"), reconcile.QueueQuery(e, "team-a", "llama-70b"),
			reconcile.KVCacheQuery(e, "team-a", "qwen3"), reconcile.TTFTQuery(e, "team-a", "qwen3", 60))
	}
}

// ttftRuleServes: the TTFT p95's rule matches both engines' bucket series, is served under the
// name the HPA of metric ttft asks for, and expands, for one HPA's pods and the window its
// metric selector names, to PromQL Prometheus parses: the p95 over that window, per pod.
func ttftRuleServes(t *testing.T, r adapterRule) {
	t.Helper()
	isvc := &crd.InferenceService{Spec: crd.InferenceServiceSpec{Model: "Qwen/Qwen3-0.6B", Replicas: 2, GPUsPerReplica: ptr.To[int32](1)}}
	isvc.Name, isvc.Namespace, isvc.UID = "qwen3", "team-a", types.UID("u")
	ext := &crd.SpecExtensions{Autoscaling: &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 2, Metric: crd.AutoscalingMetricTTFT, TTFTWindowSeconds: ptr.To[int32](45)}}
	m := reconcile.DesiredChildren(isvc, ext, reconcile.Features{}).HPA.Spec.Metrics[0].Pods.Metric
	re, err := regexp.Compile(r.Name.Matches)
	if err != nil || r.Name.As != m.Name {
		t.Fatalf("TTFT rule: name %+v (%v): must be served as %s", r.Name, err, m.Name)
	}
	for _, name := range engine.Names() {
		if s := engine.For(name).Metrics().TTFT + "_bucket"; !re.MatchString(s) || !strings.Contains(r.SeriesQuery, s) {
			t.Errorf("TTFT rule: %s's %s is not matched", name, s)
		}
	}
	tmpl, err := template.New("metricsQuery").Delims("<<", ">>").Parse(r.MetricsQuery)
	if err != nil {
		t.Fatal(err)
	}
	// What prometheus-adapter's metricsQuery.Build hands the template: the metric selector's
	// labels and the namespace in LabelValuesByName, and the pods joined by |.
	values := map[string]string{"namespace": "team-a", "pod": "qwen3-6f7c9-x2x8d|qwen3-6f7c9-k8wq4"}
	for k, v := range m.Selector.MatchLabels {
		values[k] = v
	}
	var q bytes.Buffer
	if err := tmpl.Execute(&q, map[string]any{"Series": "vllm:time_to_first_token_seconds_bucket", "LabelValuesByName": values,
		"LabelMatchers": `window_seconds="45",namespace="team-a",pod=~"qwen3-6f7c9-x2x8d|qwen3-6f7c9-k8wq4"`, "GroupBy": "pod", "GroupBySlice": []string{"pod"}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"histogram_quantile(0.95, sum by (pod, le) (", `namespace="team-a",pod=~"qwen3-6f7c9-x2x8d|qwen3-6f7c9-k8wq4"}[45s]`} {
		if !strings.Contains(q.String(), want) {
			t.Errorf("TTFT rule expands to\n%s\nwithout %s", q.String(), want)
		}
	}
	promQLParses(t, r.SeriesQuery, q.String())
}

// TestKEDAOverlay: manifests/overlays/keda is the base install without the operator's metrics
// adapter (KEDA serves its HPAs' metric), with --autoscaler=keda and a Prometheus address on
// the operator, and the ScaledObject rules in a ClusterRole of its own, labelled to join the
// base's aggregated extensions role (bound to the operator's ServiceAccount), so the base's
// ClusterRole stays exactly what the default install calls; it passes a server-side dry run.
func TestKEDAOverlay(t *testing.T) {
	const overlay = "manifests/overlays/keda"
	objs := render(t, overlay)
	have := map[string]bool{}
	for _, o := range objs {
		have[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = true
		if strings.HasPrefix(o.GetName(), "inferenceservice-metrics-adapter") {
			t.Errorf("the operator's metrics adapter is installed: %s %s", o.GetKind(), o.GetName())
		}
	}
	for _, o := range render(t, "manifests") {
		if k := o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName(); !strings.HasPrefix(o.GetName(), "inferenceservice-metrics-adapter") && !have[k] {
			t.Errorf("the overlay lacks the base's %s", k)
		}
	}
	d := convert[appsv1.Deployment](t, find(t, objs, "Deployment", systemNamespace, "inferenceservice-operator"))
	args := d.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--autoscaler=keda") || !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--keda-prometheus-address=http") }) {
		t.Errorf("operator args %v", args)
	}
	base := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "inferenceservice-operator"))
	if hasRule(base.Rules, "keda.sh", "scaledobjects", "list") {
		t.Error("the base ClusterRole grants scaledobjects")
	}
	role := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "inferenceservice-operator-keda"))
	for _, verb := range []string{"get", "list", "watch", "create", "update", "delete"} {
		if !hasRule(role.Rules, "keda.sh", "scaledobjects", verb) {
			t.Errorf("no scaledobjects %s", verb)
		}
	}
	if len(role.Rules) != 1 || len(role.Rules[0].Verbs) != 6 {
		t.Errorf("rules %+v: scaledobjects, with the verbs the operator calls, only", role.Rules)
	}
	ext := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "inferenceservice-operator-extensions"))
	if ext.AggregationRule == nil || len(ext.AggregationRule.ClusterRoleSelectors) != 1 ||
		!labels.SelectorFromSet(ext.AggregationRule.ClusterRoleSelectors[0].MatchLabels).Matches(labels.Set(role.Labels)) {
		t.Errorf("keda's role (labels %v) is not aggregated into %+v", role.Labels, ext.AggregationRule)
	}
	binding := convert[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "", "inferenceservice-operator-extensions"))
	if binding.RoleRef.Name != ext.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != "inferenceservice-operator" || binding.Subjects[0].Namespace != systemNamespace {
		t.Errorf("binding %+v", binding)
	}
	applyClean(t, "apply", "--dry-run=server", "-k", filepath.Join(env.Root, overlay))
}
