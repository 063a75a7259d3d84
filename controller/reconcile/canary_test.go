package reconcile

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/rollout"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// canaryWorld is a serving model with a gateway route and a two-step canary strategy.
func canaryWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld(2)
	w.ext = crd.SpecExtensions{Gateway: &crd.Gateway{}, Rollout: &crd.Rollout{Strategy: crd.RolloutCanary,
		Steps: []crd.RolloutStep{{Weight: 10, DurationSeconds: 60}, {Weight: 50, DurationSeconds: 60}}}}
	w.f = Features{HTTPRoutes: true, GatewayParent: types.NamespacedName{Namespace: "gw", Name: "public"}}
	for range 3 {
		w.apply(w.reconcile().Actions)
	}
	w.podsReady()
	acceptRoute(w)
	if out := w.reconcile(); len(out.Actions) > 0 {
		t.Fatalf("not converged: %s", verbs(out.Actions))
	}
	return w
}

// routeWeights is the route's first rule's backends, "name=weight".
func routeWeights(w *world) string {
	rules, _, _ := unstructured.NestedSlice(w.obs.HTTPRoute.Object, "spec", "rules")
	var out []string
	for _, r := range rules[0].(map[string]interface{})["backendRefs"].([]interface{}) {
		m := r.(map[string]interface{})
		out = append(out, fmt.Sprint(m["name"], "=", m["weight"]))
	}
	return strings.Join(out, ",")
}

func canaryReady(w *world) {
	d := w.obs.CanaryDeployment.DeepCopy()
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	w.obs.CanaryDeployment = d
}

func window(start time.Time, canaryErrors float64, canaryTTFT float64) *rollout.Window {
	h := func(n, s float64) map[float64]float64 {
		out := map[float64]float64{math.Inf(1): n}
		for _, le := range []float64{0.1, 0.25, 0.5, 1, 2.5} {
			if le >= s {
				out[le] = n
			} else {
				out[le] = 0
			}
		}
		return out
	}
	return &rollout.Window{Start: start, Stable: rollout.Sample{Requests: 200, TTFT: h(200, 0.2)},
		Canary: rollout.Sample{Requests: 40, Errors: canaryErrors, TTFT: h(40-canaryErrors, canaryTTFT)}}
}

func rolloutCondition(st crd.InferenceServiceStatus) string {
	c := meta.FindStatusCondition(st.Conditions, crd.ConditionRollout)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// TestCanaryNoRollWithoutChange: the feature alone changes no pod: a model converged before
// spec.rollout, given a canary strategy, gets no update of its Deployment's template.
func TestCanaryNoRollWithoutChange(t *testing.T) {
	w := canaryWorld(t)
	before := w.obs.Deployment.Spec.Template.DeepCopy()
	out := w.reconcile()
	for _, a := range out.Actions {
		if a.Kind == "Deployment" || a.Kind == KindCanary {
			w.apply([]Action{a})
		}
	}
	if !equalJSON(t, before, &w.obs.Deployment.Spec.Template) || w.obs.CanaryDeployment != nil || out.StatusExt.Rollout != nil {
		t.Fatalf("a model without a change rolled or got a canary: %s, rollout %+v", verbs(out.Actions), out.StatusExt.Rollout)
	}
}

// TestCanaryPromoted: a new image runs as a canary beside the stable (which keeps its
// template), the route shifts step by step, each step judged, then the stable takes the new
// template and, once rolled out, the canary goes and the route is the stable's alone.
func TestCanaryPromoted(t *testing.T) {
	w := canaryWorld(t)
	oldImage := w.obs.Deployment.Spec.Template.Spec.Containers[0].Image
	w.isvc.Spec.Image = "vllm/vllm-openai:v0.12.0"
	out := w.reconcile()
	if got := verbs(out.Actions); got != "create CanaryDeployment, create CanaryService" {
		t.Fatalf("a new image: %s", got)
	}
	if !out.RolloutChanged || out.StatusExt.Rollout.Phase != crd.RolloutProgressing || out.StatusExt.Rollout.Step != 1 || rolloutCondition(out.Status) != "Unknown/Progressing" {
		t.Fatalf("rollout %+v, condition %s", out.StatusExt.Rollout, rolloutCondition(out.Status))
	}
	w.apply(out.Actions)
	c := w.obs.CanaryDeployment
	if c.Name != "qwen3-canary" || c.Spec.Template.Spec.Containers[0].Image != "vllm/vllm-openai:v0.12.0" || *c.Spec.Replicas != 1 ||
		c.Spec.Template.Labels[kinds.InstanceLabel] != "qwen3.canary" || c.Spec.Selector.MatchLabels[kinds.InstanceLabel] != "qwen3.canary" {
		t.Fatalf("canary %s image %s replicas %d labels %v", c.Name, c.Spec.Template.Spec.Containers[0].Image, *c.Spec.Replicas, c.Spec.Template.Labels)
	}
	if w.obs.CanaryService.Spec.Selector[kinds.InstanceLabel] != "qwen3.canary" || w.obs.Service.Spec.Selector[kinds.InstanceLabel] != "qwen3" {
		t.Fatalf("selectors: canary %v stable %v", w.obs.CanaryService.Spec.Selector, w.obs.Service.Spec.Selector)
	}
	if got := w.obs.Deployment.Spec.Template.Spec.Containers[0].Image; got != oldImage {
		t.Fatalf("the stable rolled to %s during the canary", got)
	}
	if out = w.reconcile(); len(out.Actions) > 0 || routeWeights(w) != "qwen3=1" {
		t.Fatalf("canary not ready: %s, route %s", verbs(out.Actions), routeWeights(w))
	}

	canaryReady(w)
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update HTTPRoute" || out.StatusExt.Rollout.Weight != 10 {
		t.Fatalf("canary ready: %s, rollout %+v", got, out.StatusExt.Rollout)
	}
	w.apply(out.Actions)
	if got := routeWeights(w); got != "qwen3=90,qwen3-canary=10" {
		t.Fatalf("step 1 route: %s", got)
	}
	start := w.now().Time
	w.window = window(start, 0, 0.2)
	out = w.reconcile()
	if len(out.Actions) > 0 || out.Recheck <= 0 || out.Recheck > time.Minute || !strings.Contains(out.StatusExt.Rollout.Message, "judged in") {
		t.Fatalf("step 1 running: %s, recheck %s, %q", verbs(out.Actions), out.Recheck, out.StatusExt.Rollout.Message)
	}
	w.later += 61 * time.Second
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update HTTPRoute" || out.StatusExt.Rollout.Step != 2 || rolloutCondition(out.Status) != "Unknown/StepPassed" {
		t.Fatalf("step 1 passed: %s, rollout %+v", got, out.StatusExt.Rollout)
	}
	w.apply(out.Actions)
	if got := routeWeights(w); got != "qwen3=50,qwen3-canary=50" {
		t.Fatalf("step 2 route: %s", got)
	}
	w.window = window(w.now().Time, 0, 0.2)
	w.later += 61 * time.Second
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment" || !strings.Contains(out.StatusExt.Rollout.Message, "promoting") {
		t.Fatalf("last step passed: %s, %q", got, out.StatusExt.Rollout.Message)
	}
	w.apply(out.Actions)
	if got := w.obs.Deployment.Spec.Template.Spec.Containers[0].Image; got != "vllm/vllm-openai:v0.12.0" {
		t.Fatalf("promotion: stable image %s", got)
	}
	w.window = nil
	out = w.reconcile()
	if len(out.Actions) > 0 || routeWeights(w) != "qwen3=50,qwen3-canary=50" {
		t.Fatalf("stable rolling: %s, route %s", verbs(out.Actions), routeWeights(w))
	}
	w.podsReady()
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update HTTPRoute" ||
		out.StatusExt.Rollout.Phase != crd.RolloutPromoted || rolloutCondition(out.Status) != "True/Promoted" {
		t.Fatalf("stable rolled out: %s, rollout %+v", got, out.StatusExt.Rollout)
	}
	w.apply(out.Actions)
	if routeWeights(w) != "qwen3=1" || w.obs.Deployment.Annotations[RevisionAnnotation] != out.StatusExt.Rollout.CanaryRevision {
		t.Fatalf("after promotion: route %s, stable revision %q", routeWeights(w), w.obs.Deployment.Annotations[RevisionAnnotation])
	}
	canaryGoesOnceTheGatewayTookTheRoute(t, w)
}

// canaryGoesOnceTheGatewayTookTheRoute: a rollout's end routes to the stable alone; the canary
// serves what the gateway still sends it until the gateway accepted that route, then goes.
func canaryGoesOnceTheGatewayTookTheRoute(t *testing.T, w *world) {
	t.Helper()
	if out := w.reconcile(); len(out.Actions) > 0 {
		t.Fatalf("the canary removed before the gateway took the route without it: %s", verbs(out.Actions))
	}
	acceptRoute(w)
	out := w.reconcile()
	if got := verbs(out.Actions); got != "delete CanaryDeployment, delete CanaryService" {
		t.Fatalf("the gateway took the route: %s", got)
	}
	w.apply(out.Actions)
	if out = w.reconcile(); len(out.Actions) > 0 {
		t.Fatalf("not converged after the rollout: %s", verbs(out.Actions))
	}
}

// TestCanaryRolledBack: a step whose canary answers 20% errors rolls back at once: the route
// is the stable's, the canary goes, the stable never took the new template, and the same spec
// is not tried again.
func TestCanaryRolledBack(t *testing.T) {
	w := canaryWorld(t)
	stable := w.obs.Deployment.Spec.Template.DeepCopy()
	w.isvc.Spec.Image = "vllm/vllm-openai:broken"
	w.apply(w.reconcile().Actions)
	canaryReady(w)
	w.apply(w.reconcile().Actions)
	w.window = window(w.now().Time, 8, 0.2)
	w.later += 61 * time.Second
	out := w.reconcile()
	if got := verbs(out.Actions); got != "update HTTPRoute" {
		t.Fatalf("failed step: %s", got)
	}
	r := out.StatusExt.Rollout
	if r.Phase != crd.RolloutRolledBack || r.FailedRevision != r.CanaryRevision || !strings.Contains(r.Message, "canary error rate 20.0% above 5%") ||
		rolloutCondition(out.Status) != "False/RolledBack" || !out.RolloutChanged {
		t.Fatalf("rollout %+v, condition %s", r, rolloutCondition(out.Status))
	}
	w.apply(out.Actions)
	w.window = nil
	if routeWeights(w) != "qwen3=1" || !equalJSON(t, stable, &w.obs.Deployment.Spec.Template) {
		t.Fatalf("route %s; stable changed", routeWeights(w))
	}
	canaryGoesOnceTheGatewayTookTheRoute(t, w)
	if out = w.reconcile(); len(out.Actions) > 0 {
		t.Fatalf("the failed revision was tried again: %s", verbs(out.Actions))
	}
	// A new change starts a new rollout.
	w.isvc.Spec.Image = "vllm/vllm-openai:fixed"
	if got := verbs(w.reconcile().Actions); got != "create CanaryDeployment, create CanaryService" {
		t.Fatalf("a new change after a rollback: %s", got)
	}
}

// TestCanaryRefusedOnPoolRoute: with the pool route the canary cannot take a share of the
// requests: the change waits, said in the Rollout condition, and the stable is not rolled.
func TestCanaryRefusedOnPoolRoute(t *testing.T) {
	w := canaryWorld(t)
	w.f.InferencePools, w.f.PoolServed = true, true
	w.apply(w.reconcile().Actions)
	w.apply(w.reconcile().Actions)
	stable := w.obs.Deployment.Spec.Template.DeepCopy()
	w.isvc.Spec.Image = "vllm/vllm-openai:v0.12.0"
	out := w.reconcile()
	for _, a := range out.Actions {
		if a.Kind == "Deployment" || a.Kind == KindCanary {
			t.Fatalf("refused canary acted: %s", verbs(out.Actions))
		}
	}
	c := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionRollout)
	if c == nil || c.Reason != rollout.ReasonCanaryUnsupported || !strings.Contains(c.Message, "pool route") {
		t.Fatalf("condition %+v", c)
	}
	w.apply(out.Actions)
	if !equalJSON(t, stable, &w.obs.Deployment.Spec.Template) {
		t.Fatal("stable rolled")
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestCanaryPodsFencedAsTheStables: with NetworkPolicies on, the model's policy covers its
// canary's pods while the canary runs (they serve the same port to the same callers, and a
// tenant of another namespace must not reach them), and goes back to the stable's pods alone
// once the canary is gone; a model without a rollout keeps its policy as it always was.
func TestCanaryPodsFencedAsTheStables(t *testing.T) {
	w := newWorld(2)
	w.ext = crd.SpecExtensions{Gateway: &crd.Gateway{}, Rollout: &crd.Rollout{Strategy: crd.RolloutCanary,
		Steps: []crd.RolloutStep{{Weight: 10, DurationSeconds: 60}}}}
	w.f = Features{HTTPRoutes: true, GatewayParent: types.NamespacedName{Namespace: "gw", Name: "public"},
		NetworkPolicies: true, NetworkPolicy: npOptions(), ServiceMonitors: true}
	for range 3 {
		w.apply(w.reconcile().Actions)
	}
	w.podsReady()
	acceptRoute(w)
	w.apply(w.reconcile().Actions)
	selects := func() string {
		np := typedNP(t, w.obs.NetworkPolicy)
		s := fmt.Sprint(np.Spec.PodSelector.MatchLabels)
		for _, e := range np.Spec.PodSelector.MatchExpressions {
			s += fmt.Sprint(" ", e.Key, " ", e.Operator, " ", e.Values)
		}
		return s
	}
	stableOnly := fmt.Sprint(map[string]string{kinds.InstanceLabel: "qwen3"})
	if got := selects(); got != stableOnly {
		t.Fatalf("before a rollout the policy selects %s, want %s", got, stableOnly)
	}
	w.isvc.Spec.Image = "vllm/vllm-openai:v0.12.0"
	w.apply(w.reconcile().Actions)
	if w.obs.CanaryDeployment == nil {
		t.Fatal("no canary")
	}
	if got, want := selects(), "map[] "+kinds.InstanceLabel+" In [qwen3 qwen3.canary]"; got != want {
		t.Fatalf("with a canary the policy selects %s, want %s", got, want)
	}
	if exprs, _, _ := unstructured.NestedSlice(w.obs.ServiceMonitor.Object, "spec", "selector", "matchExpressions"); len(exprs) != 1 {
		t.Fatalf("with a canary the ServiceMonitor selects %v", w.obs.ServiceMonitor.Object["spec"])
	}
	if out := w.reconcile(); len(out.Actions) > 0 {
		t.Fatalf("the widened policy drifts: %s", verbs(out.Actions))
	}
	w.isvc.Spec.Image = "" // the change taken back: the canary goes
	for range 3 {
		w.apply(w.reconcile().Actions)
	}
	if w.obs.CanaryDeployment != nil {
		t.Fatal("the canary stayed after its change was taken back")
	}
	if got := selects(); got != stableOnly {
		t.Fatalf("after the canary the policy selects %s, want %s", got, stableOnly)
	}
	if m, _, _ := unstructured.NestedStringMap(w.obs.ServiceMonitor.Object, "spec", "selector", "matchLabels"); m[kinds.InstanceLabel] != "qwen3" {
		t.Fatalf("after the canary the ServiceMonitor selects %v", w.obs.ServiceMonitor.Object["spec"])
	}
}
