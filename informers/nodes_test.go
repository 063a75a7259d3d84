package informers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/example/inferenceservice-operator/crd"
)

func node(name, alloc string, heartbeat time.Time) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(alloc)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(heartbeat)}},
		}}
}

// Nodes are watched only when asked; the troubled index holds the nodes whose GPUs fail; the
// handler hears a trouble begin and end, never a heartbeat nor a healthy node's change.
func TestNodeTrouble(t *testing.T) {
	kube := fake.NewSimpleClientset(node("n0", "8", time.Now()), node("n1", "6", time.Now()))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{crd.Resource: crd.Kind + "List"})
	if s := New(kube, dyn, Options{}); s.TroubledNodes() != nil {
		t.Fatal("nodes read without Options.Nodes")
	}
	s := New(kube, dyn, Options{Nodes: true})
	heard := make(chan string, 16)
	if err := s.AddEventHandlers(Handlers{Node: func(n *corev1.Node) { heard <- n.Name }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Start(ctx)
	if !s.WaitForCacheSync(ctx) {
		t.Fatal("no sync")
	}
	if got := s.TroubledNodes(); len(got) != 1 || got["n1"] == nil || !got["n1"].Status.Conditions[0].LastHeartbeatTime.IsZero() {
		t.Fatalf("troubled: %v", got)
	}
	update := func(n *corev1.Node) {
		t.Helper()
		if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(node("n0", "8", time.Now().Add(time.Minute))) // a heartbeat of a healthy node
	update(node("n1", "6", time.Now().Add(time.Minute))) // a heartbeat of a troubled one
	update(node("n0", "0", time.Now()))                  // trouble begins
	update(node("n1", "8", time.Now()))                  // trouble ends
	var got []string
	for len(got) < 3 {
		select {
		case n := <-heard:
			got = append(got, n)
		case <-ctx.Done():
			t.Fatalf("heard %v", got)
		}
	}
	if got[0] != "n1" || got[1] != "n0" || got[2] != "n1" || len(heard) != 0 {
		t.Fatalf("heard %v (+%d), want n1 (its add), then n0 and n1 once each", got, len(heard))
	}
	if got := s.TroubledNodes(); len(got) != 1 || got["n0"] == nil {
		t.Fatalf("troubled after: %v", got)
	}
}
