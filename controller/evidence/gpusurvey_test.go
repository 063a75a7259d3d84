package evidence

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

func gpuPod(name, node string, gpus int64) *corev1.Pod {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "other"}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": q, corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// The survey is read only for a model short of GPUs, once a period for every model, by one
// list of the cluster's bound unfinished pods; cordoned nodes do not count; a refused list
// leaves the model InsufficientGPU (nil) and is not retried within the period.
func TestGPUSurvey(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	kube := fake.NewSimpleClientset(gpuPod("a", "n0", 6), gpuPod("b", "n1", 5))
	node := func(name string, cordoned bool) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: cordoned},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}, Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}
	}
	r := New(Config{Kube: kube, Nodes: nodeList{node("n0", false), node("n1", false), node("n2", true)}})
	isvc := &crd.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default"}, Spec: crd.InferenceServiceSpec{Model: "m", Replicas: 1, GPUsPerReplica: ptr.To[int32](4)}}
	short := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m-1", Namespace: "default"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 2 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable."}}}}
	in := func(at time.Duration, pods ...*corev1.Pod) reconcile.Input {
		return reconcile.Input{ISVC: isvc, Observed: reconcile.Observed{Pods: pods}, Now: metav1.NewTime(t0.Add(at))}
	}
	lists := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "pods" {
				if f := l.GetListRestrictions().Fields.String(); f != fields.ParseSelectorOrDie(boundUnfinished).String() {
					t.Fatalf("listed pods with %q", f)
				}
				n++
			}
		}
		kube.ClearActions()
		return n
	}
	if got := r.gpuSurvey(context.Background(), in(0)); got != nil || lists() != 0 {
		t.Fatalf("surveyed for a model not short of GPUs: %v", got)
	}
	got := r.gpuSurvey(context.Background(), in(0, short))
	if fmt.Sprint(sortedSurvey(got)) != "[{n0 8 6} {n1 8 5}]" || lists() != 1 {
		t.Fatalf("survey %v", got)
	}
	r.gpuSurvey(context.Background(), in(30*time.Second, short))
	if n := lists(); n != 0 {
		t.Fatalf("%d lists within the period", n)
	}
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", fmt.Errorf("cluster-wide list denied"))
	})
	if got := r.gpuSurvey(context.Background(), in(2*time.Minute, short)); got != nil || lists() != 1 {
		t.Fatalf("refused: %v", got)
	}
	if got := r.gpuSurvey(context.Background(), in(2*time.Minute+time.Second, short)); got != nil || lists() != 0 {
		t.Fatalf("a refusal retried within the period: %v", got)
	}
}

func sortedSurvey(s []reconcile.NodeGPUs) []reconcile.NodeGPUs {
	slices.SortFunc(s, func(a, b reconcile.NodeGPUs) int { return strings.Compare(a.Node, b.Node) })
	return s
}

// nodeList is the node cache.
type nodeList []*corev1.Node

func (n nodeList) Nodes() []*corev1.Node { return n }
