package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

func routedOf(st crd.InferenceServiceStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, crd.ConditionRouted)
}

func routeBackend(t *testing.T, w *world) string {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(w.obs.HTTPRoute.Object, "spec", "rules")
	if len(rules) == 0 {
		t.Fatal("route without rules")
	}
	refs := rules[0].(map[string]interface{})["backendRefs"].([]interface{})
	r := refs[0].(map[string]interface{})
	return fmt.Sprint(r["kind"], "/", r["name"])
}

// acceptRoute and acceptPool write the parent's status as a Gateway does (Accepted and
// ResolvedRefs, both required of it by the Gateway API).
func acceptRoute(w *world) {
	r := w.obs.HTTPRoute.DeepCopy()
	r.SetGeneration(1)
	_ = unstructured.SetNestedSlice(r.Object, []interface{}{map[string]interface{}{
		"parentRef": map[string]interface{}{"name": "public", "namespace": "gw"},
		"conditions": []interface{}{
			map[string]interface{}{"type": "Accepted", "status": "True", "observedGeneration": int64(1)},
			map[string]interface{}{"type": "ResolvedRefs", "status": "True", "observedGeneration": int64(1)},
		},
	}}, "status", "parents")
	w.obs.HTTPRoute = r
}

func setPoolStatus(w *world, accepted, resolved string) {
	p := w.obs.InferencePool.DeepCopy()
	_ = unstructured.SetNestedSlice(p.Object, []interface{}{map[string]interface{}{
		"parentRef": map[string]interface{}{"name": "public", "namespace": "gw", "kind": "Gateway"},
		"conditions": []interface{}{
			map[string]interface{}{"type": "Accepted", "status": accepted, "reason": "Accepted"},
			map[string]interface{}{"type": "ResolvedRefs", "status": resolved, "reason": "BackendNotFound", "message": "service qwen3-epp not found"},
		},
	}}, "status", "parents")
	w.obs.InferencePool = p
}

func poolPod(name string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{kinds.InstanceLabel: "qwen3"}}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

func poolWorld() *world {
	w := newWorld(1)
	w.ext = crd.SpecExtensions{Gateway: &crd.Gateway{}}
	w.f = Features{HTTPRoutes: true, GatewayParent: types.NamespacedName{Namespace: "gw", Name: "public"}, InferencePools: true, PoolServed: true}
	return w
}

// TestPoolRoute: with the InferencePool API served a model with spec.gateway gets a pool over
// its pods and a picker, and its route goes to the pool only while the picker serves: the
// Service carries requests before and whenever the picker is down. Routed says each step.
func TestPoolRoute(t *testing.T) {
	w := poolWorld()
	out := w.reconcile()
	if got := verbs(out.Actions); got != "create Deployment, create Service, create HorizontalPodAutoscaler, create HTTPRoute, "+
		"create InferencePool, create EndpointPicker, create EndpointPickerService, create ServiceAccount" {
		t.Fatalf("first reconcile: %s", got)
	}
	w.apply(out.Actions)
	// The RoleBinding once the ServiceAccount it names is seen as ours.
	out = w.reconcile()
	if got := verbs(out.Actions); got != "create RoleBinding" {
		t.Fatalf("with our ServiceAccount seen: %s", got)
	}
	w.apply(out.Actions)
	if got := routeBackend(t, w); got != "Service/qwen3" {
		t.Fatalf("before the picker serves the route goes to %s", got)
	}
	if sel, _, _ := unstructured.NestedStringMap(w.obs.InferencePool.Object, "spec", "selector", "matchLabels"); sel[kinds.InstanceLabel] != "qwen3" || len(sel) != 1 {
		t.Fatalf("pool selector %v", sel)
	}
	args := w.obs.Picker.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--pool-name=qwen3") || !slices.Contains(args, "--pool-namespace=default") || w.obs.Picker.Spec.Template.Spec.ServiceAccountName != "qwen3-epp" {
		t.Fatalf("picker args %v, service account %q", args, w.obs.Picker.Spec.Template.Spec.ServiceAccountName)
	}
	if _, ok := w.obs.Picker.Spec.Template.Labels[kinds.InstanceLabel]; ok {
		t.Fatal("the picker's pods carry the model's instance label: they would count as the model's")
	}
	acceptRoute(w)
	out = w.reconcile()
	if c := routedOf(out.Status); c == nil || c.Reason != ReasonPickerUnavailable || !strings.Contains(c.Message, "0 of 1 replicas available") {
		t.Fatalf("Routed before the picker is ready: %+v", c)
	}

	// The picker serves: the route moves to the pool.
	p := w.obs.Picker.DeepCopy()
	p.Status.AvailableReplicas = 1
	w.obs.Picker = p
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update HTTPRoute" {
		t.Fatalf("picker ready: %s", got)
	}
	w.apply(out.Actions)
	acceptRoute(w)
	if got := routeBackend(t, w); got != "InferencePool/qwen3" {
		t.Fatalf("with the picker serving the route goes to %s", got)
	}
	out = w.reconcile()
	if c := routedOf(out.Status); c == nil || c.Reason != ReasonPoolNotAccepted || !strings.Contains(c.Message, "has not accepted it yet") {
		t.Fatalf("Routed with no pool status: %+v", c)
	}
	setPoolStatus(w, "True", "False")
	if c := routedOf(w.reconcile().Status); c == nil || c.Reason != ReasonPoolNotAccepted || !strings.Contains(c.Message, "service qwen3-epp not found") {
		t.Fatalf("Routed with an unresolved picker: %+v", c)
	}
	setPoolStatus(w, "True", "True")
	if c := routedOf(w.reconcile().Status); c == nil || c.Reason != ReasonNoPoolEndpoints {
		t.Fatalf("Routed with no ready pod: %+v", c)
	}
	w.obs.Pods = []*corev1.Pod{poolPod("a")}
	out = w.reconcile()
	if c := routedOf(out.Status); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonPoolRoute || !strings.Contains(c.Message, "1 of 1 pods ready in the pool") {
		t.Fatalf("Routed serving: %+v", c)
	}
	if len(out.Actions) != 0 {
		t.Fatalf("converged pool route acts: %s", verbs(out.Actions))
	}

	// The picker goes down: the Service takes the requests again.
	p = w.obs.Picker.DeepCopy()
	p.Status.AvailableReplicas = 0
	w.obs.Picker = p
	out = w.reconcile()
	w.apply(out.Actions)
	if got := routeBackend(t, w); got != "Service/qwen3" {
		t.Fatalf("picker down: the route goes to %s", got)
	}
}

// TestPoolRouteDriftAndSwitchBack: the picker's owned fields are restored, a RoleBinding whose
// role changed is made anew, and with the pool route off every child of it goes while the
// route keeps the Service.
func TestPoolRouteDriftAndSwitchBack(t *testing.T) {
	w := poolWorld()
	w.apply(w.reconcile().Actions)
	w.apply(w.reconcile().Actions) // the RoleBinding, once the ServiceAccount is seen
	d := w.obs.Picker.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Args = []string{"--pool-name=other"}
	d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar"})
	w.obs.Picker = d
	out := w.reconcile()
	if got := verbs(out.Actions); got != "update EndpointPicker" {
		t.Fatalf("tampered picker: %s", got)
	}
	w.apply(out.Actions)
	if c := w.obs.Picker.Spec.Template.Spec.Containers; !slices.Contains(c[0].Args, "--pool-name=qwen3") || len(c) != 2 {
		t.Fatalf("restored picker containers %+v", c)
	}
	w.f.PickerClusterRole = "custom"
	out = w.reconcile()
	if got := verbs(out.Actions); got != "delete RoleBinding" {
		t.Fatalf("role changed: %s", got)
	}
	w.apply(out.Actions)
	if got := verbs(w.reconcile().Actions); got != "create RoleBinding" {
		t.Fatalf("after the delete: %s", got)
	}
	w.f.InferencePools = false
	out = w.reconcile()
	if got := verbs(out.Actions); got != "delete InferencePool, delete EndpointPicker, delete EndpointPickerService, delete ServiceAccount" {
		t.Fatalf("pool route off: %s", got)
	}
	if c := routedOf(out.Status); c == nil || c.Reason != ReasonRouteNotAccepted {
		t.Fatalf("Routed: %+v", c)
	}
	w.apply(out.Actions)
	acceptRoute(w)
	if c := routedOf(w.reconcile().Status); c == nil || c.Reason != ReasonServiceRoute || !strings.Contains(c.Message, "--inference-pool=off") {
		t.Fatalf("Routed after the switch back: %+v", c)
	}
}

// TestPoolRouteMultiNodeSelectsLeaders: only a group's leader serves the API, so the pool
// selects leaders.
func TestPoolRouteMultiNodeSelectsLeaders(t *testing.T) {
	w := poolWorld()
	w.ext.MultiNode = &crd.MultiNode{Nodes: 2}
	w.f.LeaderWorkerSets = true
	d := DesiredChildren(w.isvc, &w.ext, w.f)
	sel, _, _ := unstructured.NestedStringMap(d.Pool.Pool.Object, "spec", "selector", "matchLabels")
	if sel[kinds.LWSWorkerLabel] != "0" || sel[kinds.InstanceLabel] != "qwen3" {
		t.Fatalf("multi-node pool selector %v", sel)
	}
}

// TestPickerRoleBindingOnlyForItsOwnServiceAccount: the RoleBinding binds a ServiceAccount by
// name, so a namesake the model does not control (made before the model, or after ours went)
// is reported and never bound, and our binding goes while it is there.
func TestPickerRoleBindingOnlyForItsOwnServiceAccount(t *testing.T) {
	w := poolWorld()
	stranger := &unstructured.Unstructured{}
	stranger.SetAPIVersion("v1")
	stranger.SetKind("ServiceAccount")
	stranger.SetNamespace("default")
	stranger.SetName(PickerName("qwen3"))
	stranger.SetLabels(map[string]string{kinds.ManagedByLabel: kinds.ManagedByValue}) // a label anyone can set
	w.obs.PickerServiceAccount = stranger
	out := w.reconcile()
	for _, a := range out.Actions {
		if a.Kind == KindPickerRoleBinding || a.Kind == KindPickerServiceAccess {
			t.Fatalf("with a stranger's ServiceAccount: %s", verbs(out.Actions))
		}
	}
	if len(out.Conflicts) != 1 || !strings.Contains(out.Conflicts[0], "ServiceAccount default/qwen3-epp already exists and is not owned by this InferenceService") {
		t.Fatalf("conflicts %q", out.Conflicts)
	}

	// Ours bound, then replaced by a stranger's of the same name: the binding goes.
	w = poolWorld()
	w.apply(w.reconcile().Actions)
	w.apply(w.reconcile().Actions)
	if w.obs.PickerRoleBinding == nil {
		t.Fatal("no RoleBinding for our own ServiceAccount")
	}
	w.obs.PickerServiceAccount = stranger
	if got := verbs(w.reconcile().Actions); got != "delete RoleBinding" {
		t.Fatalf("our ServiceAccount replaced by a stranger's: %s", got)
	}
	w.obs.PickerServiceAccount = nil
	if got := verbs(w.reconcile().Actions); got != "create ServiceAccount, delete RoleBinding" {
		t.Fatalf("our ServiceAccount gone: %s", got)
	}
}

// TestPoolOlderCRDPrunesAppProtocol: a pool read through a CRD older than v1.4.0 has no
// spec.appProtocol (pruned); that is no drift, so no write at rest. Through a newer CRD, a
// changed appProtocol or any other field still is, and the update writes it back.
func TestPoolOlderCRDPrunesAppProtocol(t *testing.T) {
	w := poolWorld()
	w.apply(w.reconcile().Actions)
	w.apply(w.reconcile().Actions)
	pruned := w.obs.InferencePool.DeepCopy()
	unstructured.RemoveNestedField(pruned.Object, "spec", "appProtocol")
	w.obs.InferencePool = pruned
	if got := verbs(w.reconcile().Actions); got != "" {
		t.Fatalf("pruned appProtocol: %s", got)
	}
	want := desiredPool(w.isvc, &w.ext, w.f).Pool
	if poolDrifted(pruned, want) {
		t.Fatal("poolDrifted on a pruned appProtocol")
	}
	other := pruned.DeepCopy()
	_ = unstructured.SetNestedField(other.Object, "FailOpen", "spec", "endpointPickerRef", "failureMode")
	if !poolDrifted(other, want) {
		t.Fatal("a changed failureMode on an older CRD is drift")
	}
	h2c := w.obs.InferencePool.DeepCopy()
	_ = unstructured.SetNestedField(h2c.Object, "kubernetes.io/h2c", "spec", "appProtocol")
	w.obs.InferencePool = h2c
	out := w.reconcile()
	if got := verbs(out.Actions); got != "update InferencePool" {
		t.Fatalf("changed appProtocol: %s", got)
	}
	if p, _, _ := unstructured.NestedString(out.Actions[0].Object.(*unstructured.Unstructured).Object, "spec", "appProtocol"); p != "http" {
		t.Fatalf("written appProtocol %q", p)
	}
}

// TestPickerWanted: the pool route pays where a picker has a choice: more than one pod
// possible, or adapters to place. One pod forever and no adapters: no picker, and why.
func TestPickerWanted(t *testing.T) {
	adapters := []crd.Adapter{{Name: "sql", StorageURI: "hf://org/sql-lora"}}
	for _, c := range []struct {
		name string
		sc   Scale
		ext  crd.SpecExtensions
		want bool
		why  string
	}{
		{"replicas 1: the HPA may reach 3", Scale{Replicas: 1, Min: 1, Max: 3, Fixed: true}, crd.SpecExtensions{}, true, ""},
		{"replicas 2", Scale{Replicas: 2, Min: 1, Max: 6, Fixed: true}, crd.SpecExtensions{}, true, ""},
		{"autoscaling 1 to 4", Scale{Min: 1, Max: 4}, crd.SpecExtensions{Autoscaling: &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4}}, true, ""},
		{"maxReplicas 1 with adapters", Scale{Min: 1, Max: 1}, crd.SpecExtensions{Autoscaling: &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 1}, Adapters: adapters}, true, ""},
		{"maxReplicas 1", Scale{Min: 1, Max: 1}, crd.SpecExtensions{Autoscaling: &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 1}}, false,
			"at most one replica (spec.autoscaling.maxReplicas 1) and no adapters: the endpoint picker has nothing to choose between, so no InferencePool or picker is made"},
		{"zero to one", Scale{Min: 0, Max: 1}, crd.SpecExtensions{Autoscaling: &crd.Autoscaling{MinReplicas: 0, MaxReplicas: 1}}, false,
			"at most one replica (spec.autoscaling.maxReplicas 1) and no adapters: the endpoint picker has nothing to choose between, so no InferencePool or picker is made"},
		{"replicas 0 without autoscaling", Scale{Replicas: 0, Min: 1, Max: 0, Fixed: true}, crd.SpecExtensions{}, false,
			"at most one replica (spec.replicas 0 without autoscaling) and no adapters: the endpoint picker has nothing to choose between, so no InferencePool or picker is made"},
	} {
		got, why := pickerWanted(c.sc, &c.ext)
		if got != c.want || why != c.why {
			t.Errorf("%s: pickerWanted = %v, %q; want %v, %q", c.name, got, why, c.want, c.why)
		}
	}
}

// TestPoolRouteOneReplicaNoPicker: a model whose maximum drops to one pod loses its picker and
// pool, its route goes to the Service and Routed says why; raised again, the picker comes back.
func TestPoolRouteOneReplicaNoPicker(t *testing.T) {
	w := poolWorld()
	w.apply(w.reconcile().Actions)
	w.apply(w.reconcile().Actions)
	if w.obs.Picker == nil || w.obs.InferencePool == nil {
		t.Fatal("replicas 1 (the HPA may reach 3): no picker")
	}
	w.ext.Autoscaling = &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 1}
	out := w.reconcile()
	got := verbs(out.Actions)
	for _, k := range []string{"delete InferencePool", "delete EndpointPicker", "delete EndpointPickerService", "delete ServiceAccount", "delete RoleBinding"} {
		if !strings.Contains(got, k) {
			t.Fatalf("maxReplicas 1: %s; want %s", got, k)
		}
	}
	w.apply(out.Actions)
	acceptRoute(w)
	out = w.reconcile()
	if got := routeBackend(t, w); got != "Service/qwen3" {
		t.Fatalf("maxReplicas 1: the route goes to %s", got)
	}
	c := routedOf(out.Status)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonServiceRoute ||
		!strings.Contains(c.Message, "at most one replica (spec.autoscaling.maxReplicas 1) and no adapters: the endpoint picker has nothing to choose between") {
		t.Fatalf("Routed at maxReplicas 1: %+v", c)
	}
	w.ext.Adapters = []crd.Adapter{{Name: "sql", StorageURI: "hf://org/sql-lora"}}
	if got := verbs(w.reconcile().Actions); !strings.Contains(got, "create InferencePool") || !strings.Contains(got, "create EndpointPicker") {
		t.Fatalf("maxReplicas 1 with an adapter: %s", got)
	}
}
