package reconcile

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

var testActivator = types.NamespacedName{Namespace: "inferenceservice-system", Name: "inferenceservice-activator"}

func idleWorld() *world {
	w := newWorld(0) // v1beta1 minReplicas 0 reads as v1alpha1 replicas 0
	w.ext = crd.SpecExtensions{Autoscaling: &crd.Autoscaling{MinReplicas: 0, MaxReplicas: 3, IdleSeconds: ptr.To[int32](60)}, Gateway: &crd.Gateway{}, ReplicasUnset: true}
	w.f = Features{HTTPRoutes: true, GatewayParent: types.NamespacedName{Namespace: "gw", Name: "public"}, Activator: testActivator, ActivatorPort: 80}
	return w
}

// request plays the activator: a request for the model seen now.
func (w *world) request() {
	s := w.obs.Service.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[kinds.LastRequestAnnotation] = w.now().UTC().Format(time.RFC3339Nano)
	w.obs.Service = s
}

func readyOf(w *world) (reason, msg string) {
	c := meta.FindStatusCondition(w.isvc.Status.Conditions, crd.ConditionReady)
	if c == nil {
		return "", ""
	}
	return c.Reason, c.Message
}

// TestScaleToZeroWhenIdle: a model with minReplicas 0 starts awake with one pod and the HPA
// (floor 1), routed through the activator; a request keeps it awake; a full idle window
// without one scales it to zero (no HPA, the Deployment at 0, Ready ScaledToZero with the idle
// time); a request after that wakes it, and its status waits for a pod again.
func TestScaleToZeroWhenIdle(t *testing.T) {
	w := idleWorld()
	out := w.reconcile()
	if got := verbs(out.Actions); got != "create Deployment, create Service, create HorizontalPodAutoscaler, create HTTPRoute" {
		t.Fatalf("first reconcile: %s", got)
	}
	w.apply(out.Actions)
	if n := *w.obs.Deployment.Spec.Replicas; n != 1 || *w.obs.HPA.Spec.MinReplicas != 1 || w.obs.HPA.Spec.MaxReplicas != 3 {
		t.Fatalf("awake: replicas %d, HPA %d-%d", n, *w.obs.HPA.Spec.MinReplicas, w.obs.HPA.Spec.MaxReplicas)
	}
	if w.obs.Deployment.Annotations[AwakeSinceAnnotation] == "" {
		t.Fatalf("awake without %s: %v", AwakeSinceAnnotation, w.obs.Deployment.Annotations)
	}
	rules, _, _ := unstructured.NestedSlice(w.obs.HTTPRoute.Object, "spec", "rules")
	rule := rules[0].(map[string]interface{})
	ref := rule["backendRefs"].([]interface{})[0].(map[string]interface{})
	filters := rule["filters"].([]interface{})
	set, _, _ := unstructured.NestedSlice(filters[len(filters)-1].(map[string]interface{}), "requestHeaderModifier", "set")
	if ref["namespace"] != testActivator.Namespace || ref["name"] != testActivator.Name || len(set) != 1 ||
		set[0].(map[string]interface{})["value"] != "default/qwen3" {
		t.Fatalf("route backend %v, filters %v", ref, filters)
	}
	w.podsReady()
	acceptRoute(w)
	out = w.reconcile()
	if len(out.Actions) != 0 || out.Recheck <= 0 || out.Recheck > time.Minute {
		t.Fatalf("awake and converged: %s, recheck %v", verbs(out.Actions), out.Recheck)
	}
	if r, msg := readyOf(w); r != ReasonAvailable || msg != "1/1 replicas ready" {
		t.Fatalf("awake Ready %s: %s", r, msg)
	}
	if c := routedOf(out.Status); c == nil || c.Reason != ReasonActivatorRoute {
		t.Fatalf("Routed %+v", c)
	}
	if out.StatusExt.Endpoint != "http://inferenceservice-activator.inferenceservice-system.svc/default/qwen3" {
		t.Fatalf("endpoint %s", out.StatusExt.Endpoint)
	}

	// A request 40s in keeps it awake past the first minute.
	w.later = 40 * time.Second
	w.request()
	w.later = 90 * time.Second
	if out = w.reconcile(); len(out.Actions) != 0 || out.Recheck <= 0 || out.Recheck > 15*time.Second {
		t.Fatalf("a request 50s ago: %s, recheck %v", verbs(out.Actions), out.Recheck)
	}

	// A full window without one: to zero, the HPA gone.
	w.later = 101 * time.Second
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment, delete HorizontalPodAutoscaler" {
		t.Fatalf("idle: %s", got)
	}
	w.apply(out.Actions)
	w.podsReady()
	if n := *w.obs.Deployment.Spec.Replicas; n != 0 || w.obs.Deployment.Annotations[AsleepSinceAnnotation] == "" || w.obs.Deployment.Annotations[AwakeSinceAnnotation] != "" {
		t.Fatalf("asleep: replicas %d, annotations %v", n, w.obs.Deployment.Annotations)
	}
	out = w.reconcile()
	if len(out.Actions) != 0 {
		t.Fatalf("asleep and converged: %s", verbs(out.Actions))
	}
	if r, msg := readyOf(w); r != ReasonScaledToZero || !strings.Contains(msg, "after 1m0s without a request") || !strings.Contains(msg, "wakes it") ||
		w.isvc.Status.Reason != ReasonScaledToZero || w.isvc.Status.Phase != crd.PhaseReady {
		t.Fatalf("asleep: Ready %s: %s; reason %q phase %q", r, msg, w.isvc.Status.Reason, w.isvc.Status.Phase)
	}
	if c := meta.FindStatusCondition(w.isvc.Status.Conditions, crd.ConditionAutoscalingActive); c != nil {
		t.Fatalf("asleep with an AutoscalingActive condition: %+v", c)
	}
	// Time alone changes nothing while asleep.
	w.later = time.Hour
	if out = w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("asleep an hour: %s", verbs(out.Actions))
	}

	// A request wakes it: one pod, the HPA back, and Ready waits for the pod.
	w.request()
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment, create HorizontalPodAutoscaler" {
		t.Fatalf("woken: %s", got)
	}
	w.apply(out.Actions)
	if n := *w.obs.Deployment.Spec.Replicas; n != 1 || w.obs.Deployment.Annotations[AsleepSinceAnnotation] != "" || w.obs.Deployment.Annotations[AwakeSinceAnnotation] == "" {
		t.Fatalf("woken: replicas %d, annotations %v", n, w.obs.Deployment.Annotations)
	}
	w.reconcile()
	if c := meta.FindStatusCondition(w.isvc.Status.Conditions, crd.ConditionReady); c == nil || c.Status != "False" {
		t.Fatalf("woken, no pod ready yet: Ready %+v", c)
	}
	w.podsReady()
	if out = w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("woken and converged: %s", verbs(out.Actions))
	}
	if r, _ := readyOf(w); r != ReasonAvailable {
		t.Fatalf("woken Ready %s", r)
	}
}

// TestDecideIdle: the wake and sleep rules alone.
func TestDecideIdle(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	for _, tc := range []struct {
		name                       string
		asleep, awake, lastRequest string
		now                        time.Duration
		wantAsleep                 bool
		wantRecheck                time.Duration
	}{
		{"fresh: a full window", "", "", "", 0, false, time.Minute},
		{"awake, no request, window left", "", at(0), "", 30 * time.Second, false, 30 * time.Second},
		{"awake, window over", "", at(0), "", time.Minute, true, 0},
		{"a request extends it", "", at(0), at(50 * time.Second), 70 * time.Second, false, 40 * time.Second},
		{"an old request does not", "", at(0), at(-time.Hour), 61 * time.Second, true, 0},
		{"asleep, the request it slept on", at(0), "", at(-61 * time.Second), time.Hour, true, 0},
		{"asleep, a request it could not see", at(0), "", at(-30 * time.Second), time.Second, false, time.Minute},
		{"asleep, a new request", at(0), "", at(time.Hour), time.Hour, false, time.Minute},
	} {
		w := idleWorld()
		w.apply(w.reconcile().Actions)
		d, s := w.obs.Deployment.DeepCopy(), w.obs.Service.DeepCopy()
		d.Annotations = map[string]string{AsleepSinceAnnotation: tc.asleep, AwakeSinceAnnotation: tc.awake}
		s.Annotations = map[string]string{kinds.LastRequestAnnotation: tc.lastRequest}
		in := Input{ISVC: w.isvc, Ext: w.ext, Features: w.f, Observed: Observed{Deployment: d, Service: s}}
		in.Now.Time = t0.Add(tc.now)
		v := decideIdle(&in)
		if !v.on || v.asleep != tc.wantAsleep || v.recheck != tc.wantRecheck {
			t.Errorf("%s: asleep %v recheck %v, want %v %v", tc.name, v.asleep, v.recheck, tc.wantAsleep, tc.wantRecheck)
		}
	}
	// minReplicas 1: no idle decision at all.
	w := idleWorld()
	w.ext.Autoscaling = &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 3}
	in := Input{ISVC: w.isvc, Ext: w.ext}
	if v := decideIdle(&in); v.on {
		t.Fatal("minReplicas 1 sleeps")
	}
}

// TestScaleToZeroWithoutActivator: no activator installed, the model still sleeps when idle,
// its route goes to its Service, and its status says nothing wakes it but a spec change.
func TestScaleToZeroWithoutActivator(t *testing.T) {
	w := idleWorld()
	w.f.Activator, w.f.ActivatorPort = types.NamespacedName{}, 0
	w.apply(w.reconcile().Actions)
	w.podsReady()
	if got := routeBackend(t, w); got != "Service/qwen3" {
		t.Fatalf("route %s", got)
	}
	w.later = 2 * time.Minute
	w.apply(w.reconcile().Actions)
	w.podsReady()
	w.reconcile()
	if r, msg := readyOf(w); r != ReasonScaledToZero || !strings.Contains(msg, "no activator is configured") {
		t.Fatalf("Ready %s: %s", r, msg)
	}
}

// TestScaleToZeroWithKEDA: under KEDA the ScaledObject scales the awake model from 1 and is
// removed while it sleeps, as the HPA is: KEDA never holds the count at zero, the operator does.
func TestScaleToZeroWithKEDA(t *testing.T) {
	w := idleWorld()
	w.f.HTTPRoutes, w.f.ScaledObjects, w.f.KEDAPrometheus = false, true, kedaProm
	out := w.reconcile()
	if got := verbs(out.Actions); got != "create Deployment, create Service, create ScaledObject" {
		t.Fatalf("first reconcile: %s", got)
	}
	w.apply(out.Actions)
	if n, _, _ := unstructured.NestedInt64(w.obs.ScaledObject.Object, "spec", "minReplicaCount"); n != 1 {
		t.Fatalf("awake: minReplicaCount %d", n)
	}
	w.podsReady()
	w.later = 2 * time.Minute
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment, delete ScaledObject" {
		t.Fatalf("idle: %s", got)
	}
	w.apply(out.Actions)
	w.podsReady()
	w.request()
	if got := verbs(w.reconcile().Actions); got != "update Deployment, create ScaledObject" {
		t.Fatalf("woken: %s", got)
	}
}

// TestActivatorGrant: a route through the activator in another namespace comes with the
// namespace's ReferenceGrant, made once (none when seen, none for the activator's own
// namespace), labelled for the cache and owned by no one.
func TestActivatorGrant(t *testing.T) {
	w := idleWorld()
	w.f.ReferenceGrants = true
	out := w.reconcile()
	if got := verbs(out.Actions); got != "create Deployment, create Service, create HorizontalPodAutoscaler, create HTTPRoute, create ReferenceGrant" {
		t.Fatalf("first reconcile: %s", got)
	}
	g := out.Actions[len(out.Actions)-1].Object.(*unstructured.Unstructured)
	from, _, _ := unstructured.NestedSlice(g.Object, "spec", "from")
	to, _, _ := unstructured.NestedSlice(g.Object, "spec", "to")
	if g.GetNamespace() != testActivator.Namespace || g.GetName() != "inferenceservice-routes-from-default" || len(g.GetOwnerReferences()) != 0 ||
		g.GetLabels()[kinds.ManagedByLabel] != kinds.ManagedByValue || from[0].(map[string]interface{})["namespace"] != "default" ||
		to[0].(map[string]interface{})["name"] != testActivator.Name {
		t.Fatalf("grant %v", g.Object)
	}
	w.apply(out.Actions[:len(out.Actions)-1])
	w.obs.ActivatorGrant = g
	w.podsReady()
	if got := verbs(w.reconcile().Actions); got != "" {
		t.Fatalf("grant seen: %s", got)
	}
	w.f.Activator.Namespace = "default" // the activator beside the model: no grant needed
	w.obs.ActivatorGrant = nil
	for _, a := range w.reconcile().Actions {
		if a.Kind == KindReferenceGrant {
			t.Fatal("a grant for the activator's own namespace")
		}
	}
}

// TestActivatorGrantGoesWithItsLastModel: the operator's grant is deleted by a model that no
// longer routes through the activator when no other model of the namespace does; kept while
// another does, and a grant made by hand (without the operator's label) is never deleted.
func TestActivatorGrantGoesWithItsLastModel(t *testing.T) {
	w := idleWorld()
	w.f.ReferenceGrants = true
	out := w.reconcile()
	g := out.Actions[len(out.Actions)-1].Object.(*unstructured.Unstructured)
	w.apply(out.Actions[:len(out.Actions)-1])
	w.obs.ActivatorGrant = g
	w.ext.Autoscaling.MinReplicas = 1 // no longer at zero: its route goes to its Service
	w.obs.GrantNeededElsewhere = true
	for _, a := range w.reconcile().Actions {
		if a.Kind == KindReferenceGrant {
			t.Fatalf("another model needs the grant: %s", verbs(w.reconcile().Actions))
		}
	}
	w.obs.GrantNeededElsewhere = false
	out = w.reconcile()
	i := slices.IndexFunc(out.Actions, func(a Action) bool { return a.Kind == KindReferenceGrant })
	if i < 0 || out.Actions[i].Verb != Delete || out.Actions[i].Object.GetName() != g.GetName() {
		t.Fatalf("the last model needing it: %s", verbs(out.Actions))
	}
	hand := g.DeepCopy()
	hand.SetLabels(nil)
	w.obs.ActivatorGrant = hand
	for _, a := range w.reconcile().Actions {
		if a.Kind == KindReferenceGrant {
			t.Fatal("a grant made by hand deleted")
		}
	}
	if GrantUnneeded(g, false) != g || GrantUnneeded(g, true) != nil || GrantUnneeded(hand, false) != nil || GrantUnneeded(nil, false) != nil {
		t.Fatal("GrantUnneeded")
	}
}

// TestLastColdStartInStatus: the activator's measure on the Service is the status's; a value
// that does not read is not shown.
func TestLastColdStartInStatus(t *testing.T) {
	w := idleWorld()
	w.apply(w.reconcile().Actions)
	s := w.obs.Service.DeepCopy()
	s.Annotations = map[string]string{kinds.ColdStartAnnotation: `{"arrived":"2026-01-01T00:00:05Z","firstByteSeconds":12.5}`}
	w.obs.Service = s
	if c := w.reconcile().StatusExt.LastColdStart; c == nil || c.Arrived != "2026-01-01T00:00:05Z" || c.FirstByteSeconds != 12.5 {
		t.Fatalf("last cold start %+v", c)
	}
	s.Annotations[kinds.ColdStartAnnotation] = `{"arrived":"yesterday","firstByteSeconds":12.5}`
	if c := w.reconcile().StatusExt.LastColdStart; c != nil {
		t.Fatalf("an unreadable cold start shown: %+v", c)
	}
}
