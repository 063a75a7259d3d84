package evidence

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

// The nodes are listed only for a model kept off nodes by a taint or a selector, once a period
// for every model, keeping the taints that keep pods off and the labels; a refused list leaves
// the finding without names and is not retried within the period.
func TestPlacementSurvey(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0", Labels: map[string]string{"pool": "gpu"}}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}, {Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}}}
	kube := fake.NewSimpleClientset(node)
	r := New(Config{Kube: kube})
	isvc := &crd.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default"}, Spec: crd.InferenceServiceSpec{Model: "m", Replicas: 1}}
	pending := func(msg string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m-1", Namespace: "default"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}}}
	}
	tainted := pending("0/1 nodes are available: 1 node(s) had untolerated taint(s).")
	in := func(at time.Duration, p *corev1.Pod) reconcile.Input {
		return reconcile.Input{ISVC: isvc, Observed: reconcile.Observed{Pods: []*corev1.Pod{p}}, Now: metav1.NewTime(t0.Add(at))}
	}
	lists := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "nodes" {
				n++
			}
		}
		kube.ClearActions()
		return n
	}
	if got := r.placementSurvey(t.Context(), in(0, pending("0/1 nodes are available: 1 Insufficient nvidia.com/gpu."))); got != nil || lists() != 0 {
		t.Fatalf("a pod short of GPUs read the nodes: %v", got)
	}
	got := r.placementSurvey(t.Context(), in(0, tainted))
	if len(got) != 1 || got[0].Labels["pool"] != "gpu" || len(got[0].Taints) != 1 || got[0].Taints[0].Key != "nvidia.com/gpu" || lists() != 1 {
		t.Fatalf("survey %+v", got)
	}
	if got := r.placementSurvey(t.Context(), in(30*time.Second, tainted)); len(got) != 1 || lists() != 0 {
		t.Fatalf("listed again within the period: %v", got)
	}
	kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)
	})
	if got := r.placementSurvey(t.Context(), in(time.Minute, tainted)); got != nil || lists() != 1 {
		t.Fatalf("a refused list gave %v", got)
	}
	if got := r.placementSurvey(t.Context(), in(time.Minute+time.Second, tainted)); got != nil || lists() != 0 {
		t.Fatalf("a refused list was retried within the period: %v", got)
	}
}
