package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// KEDA's resource as testdata/keda_scaledobjects_crd.yaml serves it.
var scaledObjects = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}

const (
	kedaPrometheus = "http://127.0.0.1:9090" // never asked: no KEDA runs here
	kedaModel      = `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: queue}
spec: {model: Qwen/Qwen3-0.6B, replicas: 2, gpusPerReplica: 1}
`
)

// kedaOverlay renders manifests/overlays/keda and returns its own RBAC (what it adds to the
// base: a ClusterRole labelled to join the base's aggregated extensions role, no binding) as a
// manifest, after checking the operator's flags in it.
func kedaOverlay(t *testing.T) string {
	t.Helper()
	out := env.Kubectl(t, "kustomize", filepath.Join(env.Root, "manifests", "overlays", "keda"))
	var rbac []string
	var args []string
	for _, doc := range strings.Split(out, "\n---\n") {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(u.GetKind(), "ClusterRole") && u.GetName() == "inferenceservice-operator-keda":
			rbac = append(rbac, doc)
		case u.GetKind() == "Deployment" && u.GetName() == "inferenceservice-operator":
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			for _, a := range cs[0].(map[string]any)["args"].([]any) {
				args = append(args, a.(string))
			}
		case u.GetKind() == "APIService" || strings.HasPrefix(u.GetName(), "inferenceservice-metrics-adapter"):
			t.Errorf("the keda overlay keeps the operator's metrics adapter: %s %s", u.GetKind(), u.GetName())
		}
	}
	if len(rbac) != 1 || !strings.Contains(rbac[0], `ai.example.com/aggregate-to-inferenceservice-operator: "true"`) {
		t.Fatalf("the keda overlay's RBAC, one ClusterRole labelled for the base's extensions role: %q", rbac)
	}
	if !slices.Contains(args, "--autoscaler=keda") || !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--keda-prometheus-address=http") }) {
		t.Fatalf("the keda overlay's operator args %v", args)
	}
	return strings.Join(rbac, "\n---\n")
}

// restartWith replaces the shared operator with one started with extra flags; when the
// test ends, the suite's own is back.
func restartWith(t *testing.T, extra ...string) {
	t.Helper()
	stopOperator(t)
	if err := startOperator(testenv.Ctx(t, 2*time.Minute), extra...); err != nil {
		t.Fatalf("restarting the operator with %v: %v", extra, err)
	}
}

func autoscalingCondition(t *testing.T, ns, name string) (*metav1.Condition, error) {
	t.Helper()
	isvc, err := env.ISVC(ns, name)
	if err != nil {
		return nil, err
	}
	c := meta.FindStatusCondition(isvc.Status.Conditions, conditionAutoscaling)
	if c == nil {
		return nil, fmt.Errorf("no %s condition in %+v", conditionAutoscaling, isvc.Status.Conditions)
	}
	return c, nil
}

// TestKEDAScaledObject: --autoscaler=keda without KEDA's CRD keeps the HPA and says so in the
// model's status; with the CRD, the HPA gives way to a ScaledObject that KEDA's schema
// accepts (server-side dry run, strict), that holds the HPA's bounds and target on the
// model's queue from Prometheus, that is restored when edited and written no more at rest,
// and whose Ready condition, as KEDA writes it, is the model's AutoscalingActive.
func TestKEDAScaledObject(t *testing.T) {
	// A missing Prometheus address stops the start with a message naming the flag.
	cmd := exec.CommandContext(testenv.Ctx(t, time.Minute), env.Bin, "--kubeconfig="+env.SAKubeconfig, "--autoscaler=keda",
		"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "--autoscaler=keda needs --keda-prometheus-address") {
		t.Fatalf("--autoscaler=keda without an address: %v\n%s", err, out)
	}

	ns := env.Namespace(t)
	applyYAML(t, ns, kedaModel)
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/queue", testenv.Timeout(time.Minute))
	ctx := context.Background()
	testenv.Eventually(t, time.Minute, "the HPA in hpa mode", func() error {
		_, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "queue", metav1.GetOptions{})
		return err
	})

	rbac := filepath.Join(t.TempDir(), "keda_rbac.yaml")
	if err := os.WriteFile(rbac, []byte(kedaOverlay(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "apply", "-f", rbac)
	t.Cleanup(func() { env.Kubectl(t, "delete", "-f", rbac, "--ignore-not-found") })
	// The clusterrole-aggregation controller joins it to the base's extensions role, which the
	// base binds to the operator's ServiceAccount.
	testenv.Eventually(t, time.Minute, "the operator's ServiceAccount granted ScaledObjects through the aggregated role", func() error {
		sar, err := env.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + testenv.SystemNamespace + ":inferenceservice-operator",
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + testenv.SystemNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "watch", Group: "keda.sh", Resource: "scaledobjects"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("watch scaledobjects.keda.sh in %s not allowed: %s", ns, sar.Status.Reason)
		}
		return nil
	})
	crdFile := filepath.Join(env.Root, "test", "e2e", "testdata", "keda_scaledobjects_crd.yaml")
	t.Cleanup(func() {
		env.Kubectl(t, "delete", "-f", crdFile, "--ignore-not-found", "--wait=true", testenv.Timeout(time.Minute))
	})
	// Registered last, so it runs first: the suite's operator is back before the CRD goes.
	t.Cleanup(func() {
		stopOperator(t)
		if err := startOperator(testenv.Ctx(t, 2*time.Minute)); err != nil {
			t.Errorf("restarting the operator: %v", err)
		}
	})
	keda := []string{"--autoscaler=keda", "--keda-prometheus-address=" + kedaPrometheus}

	// KEDA's CRD not served: the HPA stays, and the status says why.
	restartWith(t, keda...)
	testenv.Eventually(t, 30*time.Second, "AutoscalingActive to say KEDA is not served", func() error {
		c, err := autoscalingCondition(t, ns, "queue")
		if err != nil {
			return err
		}
		if c.Reason != "KEDANotServed" || !strings.HasPrefix(c.Message, "--autoscaler=keda, but KEDA's ScaledObjects (keda.sh/v1alpha1) are not served") {
			return fmt.Errorf("condition %+v", c)
		}
		t.Logf("without KEDA's CRD: AutoscalingActive %s %s: %s", c.Status, c.Reason, c.Message)
		return nil
	})
	if _, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "queue", metav1.GetOptions{}); err != nil {
		t.Fatalf("the HPA without KEDA's CRD: %v", err)
	}

	// Served: the ScaledObject replaces the HPA.
	env.Kubectl(t, "apply", "-f", crdFile)
	env.Kubectl(t, "wait", "--for=condition=Established", "-f", crdFile, testenv.Timeout(time.Minute))
	restartWith(t, keda...)
	var so *unstructured.Unstructured
	testenv.Eventually(t, 30*time.Second, "the ScaledObject, and no HPA", func() error {
		var err error
		if so, err = env.Dyn.Resource(scaledObjects).Namespace(ns).Get(ctx, "queue", metav1.GetOptions{}); err != nil {
			return err
		}
		if _, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "queue", metav1.GetOptions{}); !isNotFound(err) {
			return fmt.Errorf("HPA still there: %v", err)
		}
		return nil
	})
	// The HPA's delete and the ScaledObject's create are two passes, so never sent together:
	// KEDA's webhook refuses a ScaledObject while an HPA it does not own scales the Deployment.
	// A pass's writes are told in one Normal Event.
	testenv.Eventually(t, 30*time.Second, "the Event of the ScaledObject's create, alone", func() error {
		evs, err := env.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Type == "Normal" && strings.Contains(e.Note, "Created ScaledObject queue") {
				if strings.Contains(e.Note, "HorizontalPodAutoscaler") {
					t.Fatalf("the ScaledObject created in the pass that deletes the HPA: %s: %s", e.Reason, e.Note)
				}
				return nil
			}
		}
		return fmt.Errorf("no Event of the ScaledObject's create yet")
	})
	spec, _ := json.Marshal(so.Object["spec"])
	want := `{"maxReplicaCount":6,"minReplicaCount":1,"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"queue"},` +
		`"triggers":[{"metadata":{"query":"sum(vllm:num_requests_waiting{namespace=\"` + ns + `\",ai_example_com_inferenceservice=\"queue\"})",` +
		`"serverAddress":"` + kedaPrometheus + `","threshold":"5"},"metricType":"AverageValue","type":"prometheus"}]}`
	if string(spec) != want {
		t.Fatalf("ScaledObject spec\n got %s\nwant %s", spec, want)
	}
	t.Logf("ScaledObject spec: %s", spec)
	isvc, err := env.ISVC(ns, "queue")
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(so); ref == nil || ref.UID != isvc.UID || ref.Kind != crd.Kind {
		t.Fatalf("ScaledObject controller %+v", ref)
	}
	// No KEDA runs: the status claims nothing.
	testenv.Eventually(t, 30*time.Second, "AutoscalingActive Unknown until KEDA reports", func() error {
		c, err := autoscalingCondition(t, ns, "queue")
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionUnknown || c.Reason != "KEDANotReported" {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})

	// KEDA's schema takes the object as the operator stores it, and refuses a field it lacks.
	stored := so.DeepCopy()
	unstructured.RemoveNestedField(stored.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(stored.Object, "status")
	dry := func(u *unstructured.Unstructured) (string, error) {
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "so.yaml")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return kubectlErr(t, nil, "apply", "--dry-run=server", "--validate=strict", "-f", f)
	}
	if out, err := dry(stored); err != nil {
		t.Fatalf("server-side dry run of the stored ScaledObject: %v\n%s", err, out)
	}
	bad := stored.DeepCopy()
	_ = unstructured.SetNestedField(bad.Object, int64(30), "spec", "pollingIntervalSeconds")
	if out, err := dry(bad); err == nil || !strings.Contains(out, "pollingIntervalSeconds") {
		t.Fatalf("the stand-in CRD accepted a field KEDA's lacks: %v\n%s", err, out)
	}

	// A hand edit is reverted; at rest nothing is written.
	env.Kubectl(t, "patch", "-n", ns, "scaledobject/queue", "--type=json",
		`-p=[{"op":"replace","path":"/spec/triggers/0/metadata/threshold","value":"50"}]`)
	testenv.Eventually(t, 30*time.Second, "the edited threshold restored", func() error {
		u, err := env.Dyn.Resource(scaledObjects).Namespace(ns).Get(ctx, "queue", metav1.GetOptions{})
		if err != nil {
			return err
		}
		tr, _, _ := unstructured.NestedSlice(u.Object, "spec", "triggers")
		if th := tr[0].(map[string]any)["metadata"].(map[string]any)["threshold"]; th != "5" {
			return fmt.Errorf("threshold %v", th)
		}
		return nil
	})
	before := writesSettle(t)

	// KEDA's verdict, written as KEDA writes it, becomes the model's.
	u := mustGetSO(t, ns)
	u.Object["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "ScaledObjectCheckFailed", "message": "Triggers defined in ScaledObject are not working correctly"},
	}}
	if _, err := env.Dyn.Resource(scaledObjects).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "AutoscalingActive False with KEDA's reason", func() error {
		c, err := autoscalingCondition(t, ns, "queue")
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionFalse || c.Reason != "ScaledObjectCheckFailed" || !strings.Contains(c.Message, "not working correctly") {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	after := writesSettle(t)
	if got := mustGetSO(t, ns); fmt.Sprint(got.Object["spec"]) != fmt.Sprint(so.Object["spec"]) {
		t.Fatalf("spec moved: %v", got.Object["spec"])
	}
	// The isvc's status, and the transition's one Warning Event.
	t.Logf("writes at rest %v, after KEDA's verdict %v", before, after)
	if after-before != 2 {
		t.Fatalf("%v writes for one condition change, want 2 (status and Event)", after-before)
	}
	events, err := env.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	for _, e := range events.Items {
		if e.Type == "Warning" && e.Reason == eventAutoscalingBlind && strings.Contains(e.Note, "ScaledObjectCheckFailed") {
			warned = append(warned, e.Note)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("Warning Events for KEDA's verdict: %q, want one", warned)
	}
}

func mustGetSO(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	u, err := env.Dyn.Resource(scaledObjects).Namespace(ns).Get(context.Background(), "queue", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// startModelPrometheus runs a real Prometheus scraping each pod's /metrics every second, with
// the labels the operator's ServiceMonitor gives the series (namespace, pod, and the model's own
// label as its podTargetLabels relabel it: prometheus-operator's sanitized name), until the
// test ends.
func startModelPrometheus(t *testing.T, pods []corev1.Pod) *promServer {
	t.Helper()
	return runPrometheus(t, t.TempDir(), map[string]any{
		"global":         map[string]any{"scrape_interval": "1s"},
		"scrape_configs": []any{modelScrapeJob(pods)},
	})
}

// modelScrapeJob is the scrape job of startModelPrometheus: each pod's /metrics, labelled as
// the model's ServiceMonitor labels its series.
func modelScrapeJob(pods []corev1.Pod) map[string]any {
	var static []any
	for _, p := range pods {
		static = append(static, map[string]any{
			"targets": []any{net.JoinHostPort(p.Status.PodIP, fmt.Sprint(reconcile.Port))},
			"labels": map[string]any{"namespace": p.Namespace, "pod": p.Name,
				prometheusLabelName(kinds.InstanceLabel): p.Labels[kinds.InstanceLabel]},
		})
	}
	return map[string]any{"job_name": "models", "static_configs": static}
}

// prometheusLabelName is a Kubernetes label key as Prometheus's pod discovery
// (__meta_kubernetes_pod_label_<name>) and prometheus-operator's podTargetLabels write it:
// every character but [a-zA-Z0-9_] becomes an underscore.
func prometheusLabelName(k string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, k)
}

// podsOf is the pod label of each sample.
func podsOf(s []sample) []string {
	var out []string
	for _, x := range s {
		out = append(out, x.Labels["pod"])
	}
	slices.Sort(out)
	return out
}

// TestQueueQueriesOnPrometheus: on a real Prometheus scraping real model pods, the KEDA
// trigger's query covers exactly the model's pods, not those of a sibling whose name extends
// it (queue-b runs on a LeaderWorkerSet, whose leader is named queue-b-0, as a pod of queue
// could be), and prometheus-adapter's rule, expanded as the adapter expands it for an HPA's
// pods, gives one value per pod, under the pod's name.
func TestQueueQueriesOnPrometheus(t *testing.T) {
	startLWS(t)
	w := useWebhookCRD(t) // restarts the operator, which now discovers LeaderWorkerSet
	ns := env.Namespace(t)
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	applyYAMLWith(t, w.cache, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: queue}
spec: {model: Qwen/Qwen3-0.6B, replicas: 2, gpusPerReplica: 1}
---
apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: queue-b}
spec: {baseModel: Qwen/Qwen3-32B, replicas: 1, gpusPerReplica: 16, multiNode: {nodes: 2}}
`)
	env.WaitPhase(t, ns, "queue", crd.PhaseReady, 90*time.Second)
	env.WaitPhase(t, ns, "queue-b", crd.PhaseReady, 3*time.Minute)
	mine, err := readyModelPods(t, ns, "queue")
	if err != nil || len(mine) != 2 {
		t.Fatalf("%d ready pods of queue (%v), want 2", len(mine), err)
	}
	var sibling []corev1.Pod
	for _, p := range groupPods(t, ns, "queue-b") {
		if p.Labels[kinds.LWSWorkerLabel] == "0" && p.Status.PodIP != "" {
			sibling = append(sibling, p) // the leader serves the API and the metrics
		}
	}
	if len(sibling) != 1 || sibling[0].Name != "queue-b-0" {
		t.Fatalf("queue-b's leaders %v, want queue-b-0", podNames(sibling))
	}
	prom := startModelPrometheus(t, append(slices.Clone(mine), sibling...))
	want := []string{mine[0].Name, mine[1].Name}
	slices.Sort(want)

	vllmEngine := engine.For(engine.VLLM)
	q := reconcile.QueueQuery(vllmEngine, ns, "queue")
	selector, ok := strings.CutPrefix(q, "sum(")
	if !ok {
		t.Fatalf("the query %s is not a sum", q)
	}
	perPod := "count by (pod) (" + selector
	testenv.Eventually(t, time.Minute, "the KEDA query's series: the model's pods", func() error {
		s, err := prom.query(perPod)
		if err != nil {
			return err
		}
		if got := podsOf(s); !slices.Equal(got, want) {
			return fmt.Errorf("%s covers %v, want %v", perPod, got, want)
		}
		return nil
	})
	if _, err := prom.scalar(q); err != nil {
		t.Fatalf("the KEDA query, one value for the model: %v", err)
	}

	var rules struct {
		Data map[string]string `json:"data"`
	}
	b, err := os.ReadFile(filepath.Join(env.Root, "manifests", "components", "prometheus-adapter", "adapter_rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Rules []struct {
			SeriesQuery  string `json:"seriesQuery"`
			MetricsQuery string `json:"metricsQuery"`
		} `json:"rules"`
	}
	if err := yaml.Unmarshal([]byte(rules.Data["config.yaml"]), &config); err != nil {
		t.Fatalf("adapter_rules.yaml: %v", err)
	}
	// The models here run vLLM: its engine's rule.
	vllmRule := slices.IndexFunc(config.Rules, func(r struct {
		SeriesQuery  string `json:"seriesQuery"`
		MetricsQuery string `json:"metricsQuery"`
	}) bool {
		return strings.HasPrefix(r.SeriesQuery, vllmEngine.Metrics().Queue+"{")
	})
	if vllmRule < 0 {
		t.Fatalf("adapter_rules.yaml has no rule for %s", vllmEngine.Metrics().Queue)
	}
	rule := config.Rules[vllmRule]
	tmpl, err := template.New("metricsQuery").Delims("<<", ">>").Parse(rule.MetricsQuery)
	if err != nil {
		t.Fatal(err)
	}
	var adapterQuery strings.Builder
	if err := tmpl.Execute(&adapterQuery, map[string]any{"Series": vllmEngine.Metrics().Queue,
		"LabelMatchers": `namespace="` + ns + `",pod=~"` + strings.Join(want, "|") + `"`, "GroupBy": "pod", "GroupBySlice": []string{"pod"}}); err != nil {
		t.Fatal(err)
	}
	s, err := prom.query(adapterQuery.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := podsOf(s); !slices.Equal(got, want) {
		t.Fatalf("prometheus-adapter's query %s: pods %v, want %v", adapterQuery.String(), got, want)
	}
	everyPod := append(slices.Clone(want), sibling[0].Name)
	slices.Sort(everyPod)
	testenv.Eventually(t, time.Minute, "the rule's seriesQuery: every model pod", func() error {
		all, err := prom.query(rule.SeriesQuery)
		if err != nil {
			return err
		}
		if got := podsOf(all); !slices.Equal(got, everyPod) {
			return fmt.Errorf("%s: pods %v, want %v", rule.SeriesQuery, got, everyPod)
		}
		return nil
	})
	t.Logf("KEDA: %s; prometheus-adapter for the HPA: %s -> %v", q, adapterQuery.String(), s)
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
