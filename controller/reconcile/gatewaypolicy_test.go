package reconcile

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// servingPoolWorld is a pool route whose picker serves, route and pool accepted, one ready pod.
func servingPoolWorld(t *testing.T, f func(*Features)) *world {
	t.Helper()
	w := poolWorld()
	f(&w.f)
	w.apply(w.reconcile().Actions)
	w.apply(w.reconcile().Actions) // the RoleBinding
	p := w.obs.Picker.DeepCopy()
	p.Status.AvailableReplicas = 1
	w.obs.Picker = p
	w.apply(w.reconcile().Actions) // the route to the pool
	acceptRoute(w)
	setPoolStatus(w, "True", "True")
	w.obs.Pods = []*corev1.Pod{poolPod("a")}
	return w
}

// TestGatewayPoliciesIstio: where Istio's DestinationRule is served the pool's picker gets one
// saying TLS (the picker serves only TLS), as the extension's chart ships it; a hand edit is
// reverted; Routed waits for it; it goes with the pool route.
func TestGatewayPoliciesIstio(t *testing.T) {
	w := poolWorld()
	w.f.DestinationRules = true
	out := w.reconcile()
	if got := verbs(out.Actions); !strings.Contains(got, "create DestinationRule") || strings.Contains(got, "HealthCheckPolicy") {
		t.Fatalf("first reconcile: %s", got)
	}
	w.apply(out.Actions)
	dr := w.obs.DestinationRule
	if h, _, _ := unstructured.NestedString(dr.Object, "spec", "host"); h != "qwen3-epp.default.svc.cluster.local" || dr.GetName() != "qwen3-epp" {
		t.Fatalf("DestinationRule %s host %q", dr.GetName(), h)
	}
	if m, _, _ := unstructured.NestedString(dr.Object, "spec", "trafficPolicy", "tls", "mode"); m != "SIMPLE" {
		t.Fatalf("tls mode %q", m)
	}
	if skip, _, _ := unstructured.NestedBool(dr.Object, "spec", "trafficPolicy", "tls", "insecureSkipVerify"); !skip {
		t.Fatal("the picker's certificate is self-signed: insecureSkipVerify wanted")
	}

	w = servingPoolWorld(t, func(f *Features) { f.DestinationRules = true })
	out = w.reconcile()
	if c := routedOf(out.Status); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonPoolRoute || len(out.Actions) != 0 {
		t.Fatalf("converged: Routed %+v, %s", c, verbs(out.Actions))
	}
	// Someone turns TLS off: the rule is corrected, and Routed says the gateway cannot use the pool meanwhile.
	tampered := w.obs.DestinationRule.DeepCopy()
	_ = unstructured.SetNestedField(tampered.Object, "DISABLE", "spec", "trafficPolicy", "tls", "mode")
	w.obs.DestinationRule = tampered
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update DestinationRule" {
		t.Fatalf("tampered rule: %s", got)
	}
	if c := routedOf(out.Status); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonGatewayPolicyPending || !strings.Contains(c.Message, "plaintext") {
		t.Fatalf("Routed with the rule tampered: %+v", c)
	}
	w.apply(out.Actions)
	if got := verbs(w.reconcile().Actions); got != "" {
		t.Fatalf("after the correction: %s", got)
	}
	// Someone else's rule of that name is not ours to change, and Routed says so.
	theirs := w.obs.DestinationRule.DeepCopy()
	theirs.SetOwnerReferences(nil)
	w.obs.DestinationRule = theirs
	out = w.reconcile()
	if c := routedOf(out.Status); c == nil || c.Reason != ReasonGatewayPolicyPending || strings.Contains(verbs(out.Actions), "DestinationRule") {
		t.Fatalf("a namesake: Routed %+v, %s", c, verbs(out.Actions))
	}
	w.obs.DestinationRule = dr
	w.f.InferencePools = false
	if got := verbs(w.reconcile().Actions); !strings.Contains(got, "delete DestinationRule") {
		t.Fatalf("pool route off: %s", got)
	}
}

// TestGatewayPoliciesGKE: where GKE's HealthCheckPolicy is served the pool gets one checking
// vLLM's /health on the serving port (GKE checks "/" otherwise, a 404 from vLLM).
func TestGatewayPoliciesGKE(t *testing.T) {
	w := servingPoolWorld(t, func(f *Features) { f.HealthCheckPolicies = true })
	hcp := w.obs.HealthCheckPolicy
	if hcp == nil || hcp.GetName() != "qwen3" {
		t.Fatalf("HealthCheckPolicy %v", hcp)
	}
	if k, _, _ := unstructured.NestedString(hcp.Object, "spec", "targetRef", "kind"); k != KindInferencePool {
		t.Fatalf("targetRef kind %q", k)
	}
	if p, _, _ := unstructured.NestedString(hcp.Object, "spec", "default", "config", "httpHealthCheck", "requestPath"); p != "/health" {
		t.Fatalf("requestPath %q", p)
	}
	out := w.reconcile()
	if c := routedOf(out.Status); c == nil || c.Reason != ReasonPoolRoute || len(out.Actions) != 0 {
		t.Fatalf("converged: Routed %+v, %s", c, verbs(out.Actions))
	}
	w.obs.HealthCheckPolicy = nil
	out = w.reconcile()
	if c := routedOf(out.Status); c == nil || c.Reason != ReasonGatewayPolicyPending || verbs(out.Actions) != "create HealthCheckPolicy" {
		t.Fatalf("policy gone: Routed %+v, %s", c, verbs(out.Actions))
	}
}

// TestRoutedReadsRouteResolvedRefs: a route the Gateway accepted but whose backends it cannot
// resolve, or has not said it resolved, is not Routed.
func TestRoutedReadsRouteResolvedRefs(t *testing.T) {
	w := servingPoolWorld(t, func(*Features) {})
	r := w.obs.HTTPRoute.DeepCopy()
	conds := r.Object["status"].(map[string]interface{})["parents"].([]interface{})[0].(map[string]interface{})
	conds["conditions"] = []interface{}{
		map[string]interface{}{"type": "Accepted", "status": "True", "observedGeneration": int64(1)},
		map[string]interface{}{"type": "ResolvedRefs", "status": "False", "reason": "BackendNotFound", "message": "InferencePool default/qwen3 not found", "observedGeneration": int64(1)},
	}
	w.obs.HTTPRoute = r
	if c := routedOf(w.reconcile().Status); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonRouteRefsUnresolved || !strings.Contains(c.Message, "BackendNotFound") {
		t.Fatalf("unresolved: %+v", c)
	}
	r = r.DeepCopy()
	r.Object["status"].(map[string]interface{})["parents"].([]interface{})[0].(map[string]interface{})["conditions"] = []interface{}{
		map[string]interface{}{"type": "Accepted", "status": "True", "observedGeneration": int64(1)},
	}
	w.obs.HTTPRoute = r
	if c := routedOf(w.reconcile().Status); c == nil || c.Reason != ReasonRouteRefsUnresolved || !strings.Contains(c.Message, "has not said") {
		t.Fatalf("silent gateway: %+v", c)
	}
}
