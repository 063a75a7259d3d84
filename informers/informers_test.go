package informers

import (
	"context"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

func managed(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{kinds.ManagedByLabel: kinds.ManagedByValue, "ai.example.com/inferenceservice": name},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
}

func isvc(name, ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"spec":     map[string]any{"model": "m", "replicas": int64(1)},
	}}
	return u
}

// newSet builds caches over fake clients (unit scope only: the e2e suite runs them against a
// real API server) and waits for them to sync.
func newSet(t *testing.T, namespaces []string) *Set {
	t.Helper()
	return newSetWith(t, Options{Namespaces: namespaces}, Handlers{})
}

// newSetWith is newSet with opts, h heard from the start.
func newSetWith(t *testing.T, opts Options, h Handlers) *Set {
	t.Helper()
	kube := fake.NewSimpleClientset(
		&appsv1.Deployment{ObjectMeta: managed("a", "ns1")},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "unmanaged", Namespace: "ns1"}},
		&appsv1.Deployment{ObjectMeta: managed("b", "ns2")},
		&corev1.Pod{ObjectMeta: managed("a-pod", "ns1"), Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "vllm", Image: "x", Env: []corev1.EnvVar{{Name: "A", Value: "B"}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", ContainerStatuses: []corev1.ContainerStatus{{
				Name: "vllm", Image: "x", ImageID: "sha256:x", RestartCount: 3,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}},
		&appsv1.ReplicaSet{ObjectMeta: managed("a-rs", "ns1"), Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm"}}}}}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns1"}},
	)
	scheme := runtime.NewScheme()
	bad := isvc("bad", "ns1")
	bad.Object["spec"].(map[string]any)["replicas"] = "three"
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{crd.Resource: crd.Kind + "List"}, isvc("a", "ns1"), isvc("b", "ns2"), bad)
	s := New(kube, dyn, opts)
	if err := s.AddEventHandlers(h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	s.Start(ctx)
	if !s.WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
	return s
}

func TestScopedAndStripped(t *testing.T) {
	s := newSet(t, nil)
	d, ok, err := s.Deployment("ns1", "a")
	if err != nil || !ok {
		t.Fatalf("managed deployment not cached: %v %v", ok, err)
	}
	if d.ManagedFields != nil {
		t.Fatal("managedFields kept in the cache")
	}
	if _, ok, _ := s.Deployment("ns1", "unmanaged"); ok {
		t.Fatal("a Deployment without the managed-by label was cached")
	}
	obj, ok, err := s.InferenceService("ns2", "b")
	if err != nil || !ok {
		t.Fatalf("isvc cached %v, err %v", ok, err)
	}
	if isvc, typed := obj.(*crd.InferenceService); !typed || isvc.ManagedFields != nil || isvc.Spec.Model != "m" ||
		isvc.Spec.Replicas != 1 || isvc.APIVersion != crd.GroupVersion.String() || isvc.Kind != crd.Kind {
		t.Fatalf("isvc not cached typed without managedFields: %#v", obj)
	}
	// One that does not decode stays unstructured, for the controller to report.
	if obj, ok, _ := s.InferenceService("ns1", "bad"); !ok {
		t.Fatal("undecodable isvc not cached")
	} else if _, raw := obj.(*unstructured.Unstructured); !raw {
		t.Fatalf("undecodable isvc cached as %T", obj)
	}
	pods, err := s.Pods("ns1", "a-pod")
	if err != nil || len(pods) != 1 {
		t.Fatalf("pods %d %v", len(pods), err)
	}
	if p := pods[0]; p.Spec.NodeName != "n1" || len(p.Spec.Containers) != 0 || p.ManagedFields != nil {
		t.Fatalf("pod not reduced to what is read: %+v", p.Spec)
	}
	if l := pods[0].Labels; len(l) != 1 || l["ai.example.com/inferenceservice"] != "a-pod" {
		t.Fatalf("pod labels %v, want only the instance label", l)
	}
	if st := pods[0].Status; st.Phase != corev1.PodRunning || st.PodIP != "10.0.0.1" || len(st.ContainerStatuses) != 1 ||
		st.ContainerStatuses[0].Image != "" || st.ContainerStatuses[0].RestartCount != 3 ||
		st.ContainerStatuses[0].State.Waiting == nil || st.ContainerStatuses[0].State.Waiting.Reason != "CrashLoopBackOff" {
		t.Fatalf("pod status not reduced to what the diagnosis and the adapter calls read: %+v", st)
	}
	rss, err := s.ReplicaSets("ns1", "a-rs")
	if err != nil || len(rss) != 1 || len(rss[0].Spec.Template.Spec.Containers) != 0 {
		t.Fatalf("replicasets %v %v", rss, err)
	}
	if other, _ := s.Pods("ns1", "a"); len(other) != 0 {
		t.Fatalf("pods of another instance: %v", other)
	}
	if _, ok, _ := s.InferenceService("ns1", "a"); !ok || !s.Watches("anything") {
		t.Fatal("cluster-wide scope should see both isvcs and every namespace")
	}
}

func TestNamespaceScope(t *testing.T) {
	s := newSet(t, []string{"ns1"})
	if _, ok, _ := s.Deployment("ns2", "b"); ok {
		t.Fatal("a namespace outside the scope was cached")
	}
	if !s.Watches("ns1") || s.Watches("ns2") {
		t.Fatal("Watches disagrees with the scope")
	}
	if _, ok, _ := s.InferenceService("ns1", "a"); !ok {
		t.Fatal("isvc in scope not cached")
	}
}

// The isvcs are re-delivered every Options.Resync; the children never are (a resync of one
// would be decoded for nothing).
func TestOnlyInferenceServicesResync(t *testing.T) {
	var mu sync.Mutex
	isvcResyncs, childResyncs := 0, 0
	count := func(n *int) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n2 interface{}) {
			if equality.Semantic.DeepEqual(o, n2) {
				mu.Lock()
				*n++
				mu.Unlock()
			}
		}}
	}
	newSetWith(t, Options{Resync: time.Second}, Handlers{InferenceService: count(&isvcResyncs),
		Child: count(&childResyncs), ReplicaSet: count(&childResyncs), Pod: count(&childResyncs)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Two periods of each of the three isvcs: the children would have resynced meanwhile.
	if err := wait.PollUntilContextCancel(ctx, time.Millisecond, false, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return isvcResyncs >= 6, nil
	}); err != nil {
		t.Fatalf("isvcs resynced %d times: %v", isvcResyncs, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if childResyncs != 0 {
		t.Fatalf("children re-delivered %d times", childResyncs)
	}
}

// TestInferenceServicesByIndex: the controller's indexes are read across the scopes, decoded;
// an undecodable object is not handed out, and an index not configured holds nothing.
func TestInferenceServicesByIndex(t *testing.T) {
	byNS := cache.Indexers{"ns": func(obj interface{}) ([]string, error) {
		if m, ok := obj.(metav1.Object); ok {
			return []string{m.GetNamespace()}, nil
		}
		return nil, nil
	}}
	s := newSetWith(t, Options{Namespaces: []string{"ns1", "ns2"}, InferenceServiceIndexers: byNS}, Handlers{})
	got, err := s.InferenceServicesByIndex("ns", "ns1")
	if err != nil || len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("ns1: %v %v (the undecodable one left out)", got, err)
	}
	if got, _ := s.InferenceServicesByIndex("ns", "ns2"); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("ns2: %v", got)
	}
	if got, err := s.InferenceServicesByIndex("missing", "ns1"); err != nil || got != nil {
		t.Fatalf("an index not configured: %v %v", got, err)
	}
}
