package informers

import (
	"context"
	goruntime "runtime"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
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

// A packed child reads back as its stripped form, field for field; the store keys and indexes
// it as it would the typed object.
func TestPackReadsBackStripped(t *testing.T) {
	for k, mk := range modelKinds {
		if !mk.packed {
			continue
		}
		want, err := mk.strip(decodeModelObject(t, mk.file, modelJSON(t, mk.file, 3)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := cachedForm(k)(decodeModelObject(t, mk.file, modelJSON(t, mk.file, 3)))
		if err != nil {
			t.Fatal(err)
		}
		p, ok := got.(*packed)
		if !ok {
			t.Fatalf("%s cached as %T", mk.file, got)
		}
		var back metav1.Object
		switch want.(type) {
		case *appsv1.Deployment:
			back, err = unpack[appsv1.Deployment](p)
		case *appsv1.ReplicaSet:
			back, err = unpack[appsv1.ReplicaSet](p)
		case *corev1.Pod:
			back, err = unpack[corev1.Pod](p)
			if p.node != "fake-node-0" {
				t.Fatalf("pod's node %q", p.node)
			}
		case *corev1.Service:
			back, err = unpack[corev1.Service](p)
		default:
			back, err = unpack[autoscalingv2.HorizontalPodAutoscaler](p)
		}
		if err != nil || !equality.Semantic.DeepEqual(back, want) {
			t.Fatalf("%s read back %v:\n%+v\nwant\n%+v", mk.file, err, back, want)
		}
		key, err := cache.MetaNamespaceKeyFunc(p)
		if wm, _ := meta.Accessor(want); err != nil || key != wm.GetNamespace()+"/"+wm.GetName() {
			t.Fatalf("%s keyed %q %v", mk.file, key, err)
		}
		if idx, _ := instanceIndex(p); len(idx) != 1 || idx[0] != "bench/m-00003" {
			t.Fatalf("%s indexed under %v", mk.file, idx)
		}
		if again, _ := cachedForm(k)(p); again != p {
			t.Fatalf("%s packed twice", mk.file)
		}
	}
}

// The handlers hear typed objects: a resync's old and new are one decoded object, and a
// tombstone carries the decoded object.
func TestUnpackedHandler(t *testing.T) {
	pk := pack(kinds.StripService)
	obj, err := pk(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", ResourceVersion: "7"}})
	if err != nil {
		t.Fatal(err)
	}
	var heard []interface{}
	h := unpacked[corev1.Service](cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { heard = append(heard, o) },
		UpdateFunc: func(o, n interface{}) { heard = append(heard, o, n) },
		DeleteFunc: func(o interface{}) { heard = append(heard, o) },
	})
	h.OnAdd(obj, true)
	h.OnUpdate(obj, obj)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: obj})
	if len(heard) != 4 {
		t.Fatalf("heard %d", len(heard))
	}
	for _, o := range heard[:3] {
		if s, ok := o.(*corev1.Service); !ok || s.Name != "a" || s.ResourceVersion != "7" {
			t.Fatalf("heard %#v", o)
		}
	}
	if heard[1] != heard[2] {
		t.Fatal("a resync decoded twice")
	}
	if d, ok := heard[3].(cache.DeletedFinalStateUnknown); !ok || d.Obj.(*corev1.Service).Name != "a" {
		t.Fatalf("tombstone %#v", heard[3])
	}
}

// PodsOnNode decodes the pods on the node and the pending ones only.
func TestPodsOnNodePacked(t *testing.T) {
	s := newSet(t, nil)
	if pods := s.PodsOnNode("n1", false); len(pods) != 1 || pods[0].Name != "a-pod" {
		t.Fatalf("on n1: %v", pods)
	}
	if pods := s.PodsOnNode("n2", true); len(pods) != 0 {
		t.Fatalf("on n2: %v", pods)
	}
}

// The pod transform reads the packed pod it replaces: a container seen not started, then
// started and not ready, is stamped when it started (and the stamp is carried over).
func TestPodStartedStampThroughPackedCache(t *testing.T) {
	pod := func(started bool, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: rv,
			Labels: map[string]string{kinds.ManagedByLabel: kinds.ManagedByValue, kinds.InstanceLabel: "m"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: kinds.ContainerName, ReadinessProbe: &corev1.Probe{PeriodSeconds: 5}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: kinds.ContainerName, Started: &started,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(100, 0))}}}}}}
	}
	kube := fake.NewSimpleClientset(pod(false, "1"))
	s := New(kube, dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crd.Resource: crd.Kind + "List"}), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Start(ctx)
	if !s.WaitForCacheSync(ctx) {
		t.Fatal("no sync")
	}
	key := kinds.StartedSinceAnnotation + kinds.ContainerName
	stamped := func(rv string) string {
		t.Helper()
		var got *corev1.Pod
		if err := wait.PollUntilContextCancel(ctx, time.Millisecond, true, func(context.Context) (bool, error) {
			got, _, _ = s.Pod("ns", "p")
			return got != nil && got.ResourceVersion == rv, nil
		}); err != nil {
			t.Fatalf("pod at %s not cached: %v", rv, err)
		}
		return got.Annotations[key]
	}
	if got := stamped("1"); got != "" {
		t.Fatalf("stamped before it started: %q", got)
	}
	if _, err := kube.CoreV1().Pods("ns").UpdateStatus(ctx, pod(true, "2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := stamped("2")
	if first == "" {
		t.Fatal("started, not stamped")
	}
	if _, err := kube.CoreV1().Pods("ns").UpdateStatus(ctx, pod(true, "3"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := stamped("3"); got != first {
		t.Fatalf("stamp %q, want %q carried over", got, first)
	}
}

// An optional child (a model's NetworkPolicy, unstructured from its dynamic informer) is
// cached as its JSON: it reads back field for field, through Optional and to the handlers,
// and takes at most half the heap of its maps (issue 55: at 10,000 models the unstructured
// NetworkPolicies were the largest cache that grew with the models).
func TestOptionalChildCachedPacked(t *testing.T) {
	transform := packJSON(StripManagedFields)
	read := func(i int) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(modelJSON(t, "netpol.json", i)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	got, err := transform(read(3))
	if err != nil {
		t.Fatal(err)
	}
	back, err := unpackJSON(got)
	if err != nil {
		t.Fatal(err)
	}
	if want := read(3); !equality.Semantic.DeepEqual(back, want) {
		t.Fatalf("read back:\n%v\nwant\n%v", back.Object, want.Object)
	}
	if ns, inst, ok := instanceOf(got); !ok || ns != "bench" || inst != "m-00003" {
		t.Fatalf("instanceOf = %q %q %v", ns, inst, ok)
	}
	if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(got); err != nil || k != "bench/m-00003" {
		t.Fatalf("store key %q, %v", k, err)
	}

	heap := func(transform cache.TransformFunc) float64 {
		const n = 1000
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		st := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
		for i := range n {
			obj, err := transform(read(i))
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Add(obj); err != nil {
				t.Fatal(err)
			}
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		goruntime.KeepAlive(st)
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	maps, packedSize := heap(StripManagedFields), heap(transform)
	t.Logf("a NetworkPolicy cached: %.0f bytes unstructured, %.0f packed", maps, packedSize)
	if packedSize > maps/2 {
		t.Fatalf("packed %.0f bytes, over half of the unstructured %.0f", packedSize, maps)
	}
}
