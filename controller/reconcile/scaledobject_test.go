package reconcile

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

const kedaProm = "http://prometheus-operated.monitoring.svc:9090"

var kedaOn = Features{ScaledObjects: true, KEDAPrometheus: kedaProm}

// applyKEDA plays the API server for the ScaledObject (stored as it decodes JSON, numbers as
// int64) and hands the other actions to apply.
func (w *world) applyKEDA(t *testing.T, actions []Action) {
	t.Helper()
	var rest []Action
	for _, a := range actions {
		u, ok := a.Object.(*unstructured.Unstructured)
		if !ok || u.GetKind() != KindScaledObject {
			rest = append(rest, a)
			continue
		}
		if a.Verb == Delete {
			w.obs.ScaledObject = nil
			continue
		}
		b, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		stored := &unstructured.Unstructured{}
		if err := stored.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		w.rv++
		stored.SetResourceVersion(fmt.Sprint(w.rv))
		w.obs.ScaledObject = stored
	}
	w.apply(rest)
}

// kedaSaid is the live ScaledObject as KEDA leaves it: its name label, its finalizer, and a
// Ready condition (status "" leaves the status out).
func (w *world) kedaSaid(status, reason, message string) {
	so := w.obs.ScaledObject.DeepCopy()
	so.SetLabels(mergeLabels(so.GetLabels(), map[string]string{"scaledobject.keda.sh/name": so.GetName()}))
	so.SetFinalizers([]string{"finalizer.keda.sh"})
	if status != "" {
		so.Object["status"] = map[string]interface{}{
			"scaleTargetKind": "apps/v1.Deployment", "originalReplicaCount": int64(3),
			"conditions": []interface{}{
				map[string]interface{}{"type": "Ready", "status": status, "reason": reason, "message": message},
				map[string]interface{}{"type": "Active", "status": "False", "reason": "ScalerNotActive", "message": "Scaling is not performed because triggers are not active"},
			},
		}
	}
	w.obs.ScaledObject = so
}

// TestScaledObjectShape: with KEDA, the model's autoscaler is a ScaledObject holding what the
// HPA would: the Deployment, its bounds, the queue target per pod from Prometheus.
func TestScaledObjectShape(t *testing.T) {
	w := newWorld(3) // the seed's bounds: 1..9
	w.f = kedaOn
	out := w.reconcile()
	if got := verbs(out.Actions); got != "create Deployment, create Service, create ScaledObject" {
		t.Fatalf("first reconcile: %s", got)
	}
	so := out.Actions[2].Object.(*unstructured.Unstructured)
	if !out.Actions[2].AfterDeployment {
		t.Fatal("the ScaledObject scales the Deployment: it waits for the Deployment's create")
	}
	if so.GetAPIVersion() != "keda.sh/v1alpha1" || so.GetName() != "qwen3" || so.GetNamespace() != "default" {
		t.Fatalf("identity %s %s/%s", so.GetAPIVersion(), so.GetNamespace(), so.GetName())
	}
	if ref := so.GetOwnerReferences(); len(ref) != 1 || ref[0].UID != w.isvc.UID || !*ref[0].Controller {
		t.Fatalf("owner %v", ref)
	}
	if so.GetLabels()[kinds.ManagedByLabel] != kinds.ManagedByValue || so.GetLabels()[kinds.InstanceLabel] != "qwen3" {
		t.Fatalf("labels %v: the label-scoped cache would not see it", so.GetLabels())
	}
	spec, _ := json.Marshal(so.Object["spec"])
	want := `{"maxReplicaCount":9,"minReplicaCount":1,"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"qwen3"},` +
		`"triggers":[{"metadata":{"query":"sum(vllm:num_requests_waiting{namespace=\"default\",ai_example_com_inferenceservice=\"qwen3\"})",` +
		`"serverAddress":"` + kedaProm + `","threshold":"5"},"metricType":"AverageValue","type":"prometheus"}]}`
	if string(spec) != want {
		t.Fatalf("spec\n got %s\nwant %s", spec, want)
	}

	// v1beta1's bounds and target go the same way.
	w2 := newWorld(2)
	w2.f = kedaOn
	w2.ext = crd.SpecExtensions{Autoscaling: &crd.Autoscaling{MinReplicas: 2, MaxReplicas: 6, TargetQueueLength: ptr.To[int32](3)}, ReplicasUnset: true}
	so = DesiredChildren(w2.isvc, &w2.ext, w2.f).ScaledObject
	if lo, _, _ := unstructured.NestedInt64(so.Object, "spec", "minReplicaCount"); lo != 2 {
		t.Fatalf("minReplicaCount %d", lo)
	}
	if hi, _, _ := unstructured.NestedInt64(so.Object, "spec", "maxReplicaCount"); hi != 6 {
		t.Fatalf("maxReplicaCount %d", hi)
	}
	if tr, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers"); tr[0].(map[string]interface{})["metadata"].(map[string]interface{})["threshold"] != "3" {
		t.Fatalf("threshold in %v", tr)
	}
	// Scaled to zero: no autoscaler of either kind.
	w3 := newWorld(0)
	w3.f = kedaOn
	if d := DesiredChildren(w3.isvc, &w3.ext, w3.f); d.ScaledObject != nil || d.HPA != nil {
		t.Fatalf("scaled to zero: %v %v", d.ScaledObject, d.HPA)
	}
}

// TestScaledObjectCarriesHPABehavior: the HPA's scaling behavior reaches KEDA's HPA through
// advanced.horizontalPodAutoscalerConfig, as the API server would store it.
func TestScaledObjectCarriesHPABehavior(t *testing.T) {
	w := newWorld(2)
	hpa := desiredHPA(w.isvc, &w.ext, scaleOf(w.isvc, &w.ext), sharedOf(w.isvc))
	hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](300),
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}},
	}}
	so := desiredScaledObject(w.isvc, hpa, kedaProm)
	b, _ := json.Marshal(so.Object["spec"].(map[string]interface{})["advanced"])
	if string(b) != `{"horizontalPodAutoscalerConfig":{"behavior":{"scaleDown":{"policies":[{"periodSeconds":60,"type":"Pods","value":1}],"stabilizationWindowSeconds":300}}}}` {
		t.Fatalf("advanced %s", b)
	}
	if n, _, _ := unstructured.NestedInt64(so.Object, "spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", "scaleDown", "stabilizationWindowSeconds"); n != 300 {
		t.Fatal("numbers must be int64, as decoded JSON holds them, or every compare drifts")
	}
}

// TestScaledObjectConverges: once stored, and with what KEDA adds (its label, finalizer and
// status), nothing is written; a change of the spec or a hand edit is written back.
func TestScaledObjectConverges(t *testing.T) {
	w := newWorld(3)
	w.f = kedaOn
	w.applyKEDA(t, w.reconcile().Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("converged: %s", verbs(out.Actions))
	}
	w.kedaSaid("True", "ScaledObjectReady", "ScaledObject is defined correctly and is ready for scaling")
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("with KEDA's label, finalizer and status: %s", verbs(out.Actions))
	}

	w.isvc.Spec.Replicas, w.isvc.Generation = 6, 2
	out := w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment, create PodDisruptionBudget, update ScaledObject" {
		t.Fatalf("after 3->6: %s", got)
	}
	so := out.Actions[2].Object.(*unstructured.Unstructured)
	lo, _, _ := unstructured.NestedInt64(so.Object, "spec", "minReplicaCount")
	hi, _, _ := unstructured.NestedInt64(so.Object, "spec", "maxReplicaCount")
	if lo != 3 || hi != 18 || so.GetLabels()["scaledobject.keda.sh/name"] != "qwen3" || so.GetResourceVersion() == "" {
		t.Fatalf("update: %d..%d labels %v rv %q", lo, hi, so.GetLabels(), so.GetResourceVersion())
	}
	w.applyKEDA(t, out.Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("after 3->6 converged: %s", verbs(out.Actions))
	}

	edited := w.obs.ScaledObject.DeepCopy()
	tr, _, _ := unstructured.NestedSlice(edited.Object, "spec", "triggers")
	tr[0].(map[string]interface{})["metadata"].(map[string]interface{})["query"] = "sum(up)"
	_ = unstructured.SetNestedSlice(edited.Object, tr, "spec", "triggers")
	w.obs.ScaledObject = edited
	if got := verbs(w.reconcile().Actions); got != "update ScaledObject" {
		t.Fatalf("hand-edited query: %s", got)
	}
}

// TestSwitchToKEDA: a model scaled by our HPA, restarted with KEDA: the HPA is deleted, and
// the ScaledObject is created only in a later pass, once the cache no longer holds the HPA
// (a pass's actions run concurrently, and KEDA's webhook refuses a ScaledObject whose
// Deployment an HPA it does not own already targets); someone else's ScaledObject of the same
// name is a conflict, not overwritten.
func TestSwitchToKEDA(t *testing.T) {
	w := converged(t, 3)
	if w.obs.HPA == nil {
		t.Fatal("no HPA in hpa mode")
	}
	w.f = kedaOn
	out := w.reconcile()
	if got := verbs(out.Actions); got != "delete HorizontalPodAutoscaler" {
		t.Fatalf("switching to KEDA, while our HPA is cached: %s", got)
	}
	if c := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionAutoscalingActive); c == nil || c.Reason != ReasonKEDANotReported {
		t.Fatalf("AutoscalingActive while the HPA goes: %+v", c)
	}
	w.applyKEDA(t, out.Actions)
	out = w.reconcile()
	if got := verbs(out.Actions); got != "create ScaledObject" {
		t.Fatalf("switching to KEDA, the HPA gone: %s", got)
	}
	w.applyKEDA(t, out.Actions)
	if out := w.reconcile(); len(out.Actions) != 0 || w.obs.HPA != nil {
		t.Fatalf("after the switch: %s, HPA %v", verbs(out.Actions), w.obs.HPA != nil)
	}

	theirs := newWorld(3)
	theirs.f = kedaOn
	theirs.applyKEDA(t, theirs.reconcile().Actions)
	foreign := theirs.obs.ScaledObject.DeepCopy()
	foreign.SetOwnerReferences(nil)
	theirs.obs.ScaledObject = foreign
	out = theirs.reconcile()
	if len(out.Actions) != 0 || len(out.Conflicts) != 1 || !strings.Contains(out.Conflicts[0], "ScaledObject default/qwen3") {
		t.Fatalf("someone else's ScaledObject: %s %v", verbs(out.Actions), out.Conflicts)
	}
}

// TestScaledObjectAutoscalingCondition: AutoscalingActive says what KEDA's Ready condition
// says, and nothing before KEDA says it.
func TestScaledObjectAutoscalingCondition(t *testing.T) {
	w := newWorld(3)
	w.f = kedaOn
	w.applyKEDA(t, w.reconcile().Actions)
	w.podsReady()
	for _, c := range []struct {
		name, status, reason, message string
		want                          metav1.ConditionStatus
		wantReason                    string
	}{
		{"KEDA silent", "", "", "", metav1.ConditionUnknown, ReasonKEDANotReported},
		{"KEDA undecided", "Unknown", "ScaledObjectCheckFailed", "", metav1.ConditionUnknown, ReasonKEDANotReported},
		{"ready", "True", "ScaledObjectReady", "ScaledObject is defined correctly and is ready for scaling", metav1.ConditionTrue, "ScaledObjectReady"},
		{"Prometheus unreachable", "False", "ScaledObjectCheckFailed", "Triggers defined in ScaledObject are not working correctly", metav1.ConditionFalse, "ScaledObjectCheckFailed"},
	} {
		w.kedaSaid(c.status, c.reason, c.message)
		out := w.reconcile()
		cond := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionAutoscalingActive)
		if cond == nil || cond.Status != c.want || cond.Reason != c.wantReason || (c.message != "" && !strings.HasSuffix(cond.Message, c.message)) {
			t.Errorf("%s: %+v", c.name, cond)
		}
		if out.Status.Phase != crd.PhaseReady {
			t.Errorf("%s: phase %s; the model serves either way", c.name, out.Status.Phase)
		}
	}
}

// TestKEDAUnservedKeepsTheHPA: --autoscaler=keda on a cluster without KEDA's CRD keeps the
// HPA, and AutoscalingActive says so, with the HPA's status, reason and words.
func TestKEDAUnservedKeepsTheHPA(t *testing.T) {
	w := newWorld(2)
	w.f = Features{KEDAUnserved: true}
	w.apply(w.reconcile().Actions)
	w.podsReady()
	w.obs.Pods = []*corev1.Pod{readyPod("qwen3-0", w.now().Add(-time.Hour))}
	if out := w.reconcile(); len(out.Actions) != 0 || w.obs.HPA == nil {
		t.Fatalf("not converged on an HPA: %s", verbs(out.Actions))
	}
	w.setHPAStatus(hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", blindMessage, "", -1))
	cond := meta.FindStatusCondition(w.reconcile().Status.Conditions, crd.ConditionAutoscalingActive)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonKEDANotServed ||
		cond.Message != kedaUnservedNote+" (FailedGetPodsMetric); "+blindMessage {
		t.Fatalf("condition %+v", cond)
	}
	w.setHPAStatus(hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", "", 7000))
	cond = meta.FindStatusCondition(w.reconcile().Status.Conditions, crd.ConditionAutoscalingActive)
	if cur, target, ok := parseReading(cond.Message); cond.Status != metav1.ConditionTrue || cond.Reason != ReasonKEDANotServed ||
		!ok || cur != 7 || target != 5 || !strings.HasPrefix(cond.Message, kedaUnservedNote+" (ValidMetricFound)") {
		t.Fatalf("the HPA's status, and its reading readable after the note: %+v", cond)
	}
	// What the status-write policy sees: a reason of its own, so the note is written even
	// where the stored condition already carried the HPA's words.
	w.setHPAStatus(hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", blindMessage, "", -1))
	next := w.reconcile().Status
	stored := next.DeepCopy()
	c := meta.FindStatusCondition(stored.Conditions, crd.ConditionAutoscalingActive)
	c.Reason, c.Message = "FailedGetPodsMetric", blindMessage
	if sameButQueue(stored, &next) || !WorthWriting(stored, &next) {
		t.Fatalf("the fallback would never be written over %+v: %+v", stored.Conditions, next.Conditions)
	}
}

// TestScaledObjectScaleDownDelay: v1beta1's scale-down delay reaches KEDA's HPA, converges as
// stored, and a change of it is written.
func TestScaledObjectScaleDownDelay(t *testing.T) {
	w := newWorld(2)
	w.f = kedaOn
	w.ext = crd.SpecExtensions{Autoscaling: &crd.Autoscaling{MinReplicas: 2, MaxReplicas: 6, ScaleDownDelaySeconds: ptr.To[int32](120)}, ReplicasUnset: true}
	w.applyKEDA(t, w.reconcile().Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("converged: %s", verbs(out.Actions))
	}
	window := func() int64 {
		n, _, _ := unstructured.NestedInt64(w.obs.ScaledObject.Object, "spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", "scaleDown", "stabilizationWindowSeconds")
		return n
	}
	if window() != 120 {
		t.Fatalf("stored window %d, want 120", window())
	}
	w.ext.Autoscaling.ScaleDownDelaySeconds, w.isvc.Generation = ptr.To[int32](600), 2
	out := w.reconcile()
	if got := verbs(out.Actions); got != "update ScaledObject" {
		t.Fatalf("delay 120 -> 600: %s", got)
	}
	w.applyKEDA(t, out.Actions)
	if out := w.reconcile(); len(out.Actions) != 0 || window() != 600 {
		t.Fatalf("after the change: %s, window %d", verbs(out.Actions), window())
	}
	w.ext.Autoscaling.ScaleDownDelaySeconds = nil
	w.applyKEDA(t, w.reconcile().Actions)
	if _, found, _ := unstructured.NestedFieldNoCopy(w.obs.ScaledObject.Object, "spec", "advanced"); found {
		t.Fatal("the delay removed, advanced stays")
	}
}

// TestQueueQuerySelectsByTheModelsLabel: the trigger selects the model's series by its own
// label, as the model's ServiceMonitor carries it onto them (podTargetLabels, sanitized as
// prometheus-operator and pod discovery do), never by a pod-name pattern, which a sibling's
// LeaderWorkerSet leader (llama-70b-0 for llama) also matches.
func TestQueueQuerySelectsByTheModelsLabel(t *testing.T) {
	q := QueueQuery(engine.For(engine.VLLM), "team-a", "llama")
	if want := `sum(vllm:num_requests_waiting{namespace="team-a",ai_example_com_inferenceservice="llama"})`; q != want {
		t.Fatalf("query\n got %s\nwant %s", q, want)
	}
	sm := desiredServiceMonitor(newWorld(1).isvc)
	labels, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "podTargetLabels")
	if len(labels) != 1 || labels[0] != kinds.InstanceLabel {
		t.Fatalf("the ServiceMonitor's podTargetLabels %v, want [%s]", labels, kinds.InstanceLabel)
	}
}

// TestServiceMonitorScrapesTheCanary: the model's ServiceMonitor selects its Service alone,
// and its canary's too while a canary runs, so that a rollout judged from Prometheus
// (--rollout-prometheus-url) finds the canary's series under its own model label.
func TestServiceMonitorScrapesTheCanary(t *testing.T) {
	w := newWorld(1)
	sm := desiredServiceMonitor(w.isvc)
	if got, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels"); got[kinds.InstanceLabel] != w.isvc.Name || len(got) != 1 {
		t.Fatalf("without a canary the selector is %v", sm.Object["spec"])
	}
	exprs, _, _ := unstructured.NestedSlice(withCanaryService(sm, w.isvc.Name).Object, "spec", "selector", "matchExpressions")
	if len(exprs) != 1 {
		t.Fatalf("with a canary: %v, want one expression", exprs)
	}
	e := exprs[0].(map[string]interface{})
	values, _ := e["values"].([]interface{})
	if e["key"] != kinds.InstanceLabel || e["operator"] != "In" || len(values) != 2 || values[0] != w.isvc.Name || values[1] != CanaryInstance(w.isvc.Name) {
		t.Fatalf("selector expression %v, want %s In [%s %s]", e, kinds.InstanceLabel, w.isvc.Name, CanaryInstance(w.isvc.Name))
	}
	if got := desiredCanaryService(w.isvc).Labels[kinds.InstanceLabel]; got != CanaryInstance(w.isvc.Name) {
		t.Fatalf("the canary Service's model label %q", got)
	}
}
