package controller

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

// indexedCaches are fakeCaches whose InferenceServices sit in a real indexer with the
// controller's indexes, and which hold one optional object (the grant).
type indexedCaches struct {
	*fakeCaches
	idx   cache.Indexer
	grant *unstructured.Unstructured
}

func (c *indexedCaches) InferenceServicesByIndex(index, value string) ([]*crd.InferenceService, error) {
	objs, err := c.idx.ByIndex(index, value)
	var out []*crd.InferenceService
	for _, o := range objs {
		out = append(out, o.(*crd.InferenceService))
	}
	return out, err
}

func (c *indexedCaches) Optional(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, bool, error) {
	if g := c.grant; g != nil && gvr == reconcile.ReferenceGrantGVR && g.GetNamespace() == ns && g.GetName() == name {
		return g, true, nil
	}
	return nil, false, nil
}

// gatewayISVC is a model with spec.gateway (as the annotation's JSON).
func gatewayISVC(ns, name, ext string) *crd.InferenceService {
	i := newISVCObject(1)
	i.Namespace, i.Name, i.UID = ns, name, types.UID(ns+"-"+name)
	i.Annotations = map[string]string{crd.AnnotationV1beta1Spec: ext}
	return i
}

var testActivator = types.NamespacedName{Namespace: "inferenceservice-system", Name: "inferenceservice-activator"}

func routeController(t *testing.T, dynObjs []runtime.Object, isvcs ...*crd.InferenceService) (*Controller, *indexedCaches, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, InferenceServiceIndexers())
	for _, i := range isvcs {
		if err := idx.Add(i); err != nil {
			t.Fatal(err)
		}
	}
	caches := &indexedCaches{fakeCaches: &fakeCaches{}, idx: idx}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crd.Resource: crd.Kind + "List", reconcile.ReferenceGrantGVR: "ReferenceGrantList"}, dynObjs...)
	c := New(Config{Kube: kubefake.NewClientset(), Dynamic: dyn, Caches: caches, Queue: queue.New(queue.DefaultConfig("test"), nil),
		Recorder: events.NewFakeRecorder(10), Metrics: &fakeMetrics{},
		Features: reconcile.Features{ReferenceGrants: true, Activator: testActivator, ActivatorPort: 80}})
	return c, caches, dyn
}

// TestRouteNeighbours: a model reads the overlapping routes of the others (not a sibling's,
// not its own), and a route's arrival wakes the models it overlaps.
func TestRouteNeighbours(t *testing.T) {
	victim := gatewayISVC("a", "llama", `{"gateway":{}}`)
	sibling := gatewayISVC("a", "llamas", `{"gateway":{}}`)
	evil := gatewayISVC("b", "evil", `{"gateway":{"route":"/a/llama/"}}`)
	c, _, _ := routeController(t, nil, victim, sibling, evil)
	var obs reconcile.Observed
	ext, _, _ := crd.ExtensionsOf(victim)
	if err := c.observeRoutes(&obs, victim, &ext); err != nil {
		t.Fatal(err)
	}
	if len(obs.RouteNeighbours) != 1 || obs.RouteNeighbours[0].Namespace != "b" || obs.RouteNeighbours[0].Path != "/a/llama/" {
		t.Fatalf("neighbours %+v", obs.RouteNeighbours)
	}
	c.isvcHandler().OnAdd(evil, false)
	if n := c.queue.Len(); n != 2 { // evil and llama, not llamas
		t.Fatalf("%d models woken by the route's arrival, want 2", n)
	}
	c.queue.Add(queue.Key{Namespace: "a", Name: "llama"})
	if n := c.queue.Len(); n != 2 {
		t.Fatalf("llama was not among the woken: %d queued", n)
	}
}

// TestSweepActivatorGrant: a namespace's last model through the activator gone, its grant is
// deleted with preconditions; kept while another model of it needs one, and a grant made by
// hand is never deleted.
func TestSweepActivatorGrant(t *testing.T) {
	grant := &unstructured.Unstructured{}
	grant.SetAPIVersion(reconcile.ReferenceGrantGVR.GroupVersion().String())
	grant.SetKind(reconcile.KindReferenceGrant)
	grant.SetNamespace(testActivator.Namespace)
	grant.SetName(reconcile.ActivatorGrantName("a"))
	grant.SetUID("grant-uid")
	grant.SetResourceVersion("5")
	grant.SetLabels(map[string]string{kinds.ManagedByLabel: kinds.ManagedByValue})
	atZero := `{"gateway":{},"autoscaling":{"minReplicas":0,"maxReplicas":1},"replicasUnset":true}`

	other := gatewayISVC("a", "other", atZero)
	other.Spec.Replicas = 0 // v1beta1's minReplicas 0, as v1alpha1 reads it
	c, caches, dyn := routeController(t, []runtime.Object{grant.DeepCopy()}, other)
	caches.grant = grant
	if _, err := c.sync(context.Background(), queue.Key{Namespace: "a", Name: "gone"}); err != nil {
		t.Fatal(err)
	}
	if n := len(dyn.Actions()); n != 0 {
		t.Fatalf("another model needs the grant, yet %d calls: %v", n, dyn.Actions())
	}

	c, caches, dyn = routeController(t, []runtime.Object{grant.DeepCopy()}, gatewayISVC("a", "awake", `{"gateway":{}}`))
	caches.grant = grant
	if _, err := c.sync(context.Background(), queue.Key{Namespace: "a", Name: "gone"}); err != nil {
		t.Fatal(err)
	}
	if a := dyn.Actions(); len(a) != 1 || a[0].GetVerb() != "delete" || a[0].GetResource() != reconcile.ReferenceGrantGVR {
		t.Fatalf("calls %v", a)
	}
	if _, err := dyn.Resource(reconcile.ReferenceGrantGVR).Namespace(testActivator.Namespace).Get(context.Background(), grant.GetName(), metav1.GetOptions{}); err == nil {
		t.Fatal("grant still there")
	}

	hand := grant.DeepCopy()
	hand.SetLabels(nil)
	c, caches, dyn = routeController(t, []runtime.Object{hand.DeepCopy()})
	caches.grant = hand
	if _, err := c.sync(context.Background(), queue.Key{Namespace: "a", Name: "gone"}); err != nil || len(dyn.Actions()) != 0 {
		t.Fatalf("a grant made by hand: %v, calls %v", err, dyn.Actions())
	}
}

// The watch event of a status write forgets its echo at once: a busy queue reaches the model's
// next reconcile minutes later, and 10,000 statuses held until then were 5.7 MB at the peak.
func TestEchoForgottenOnTheWriteWatchEvent(t *testing.T) {
	before := gatewayISVC("a", "llama", `{"gateway":{}}`)
	before.UID, before.ResourceVersion = "u", "6"
	c, _, _ := routeController(t, nil, before)
	k := queue.Key{Namespace: "a", Name: "llama"}
	c.memory.echoes().record(k, "u", "7", &crd.InferenceServiceStatus{}, nil, c.now())
	behind := before.DeepCopy()
	behind.Labels = map[string]string{"x": "y"}
	behind.ResourceVersion = "6"
	c.isvcHandler().OnUpdate(before, behind)
	if r := c.memory.keys[k]; r == nil || r.echo == nil {
		t.Fatal("forgotten by an event the write is not in")
	}
	shown := before.DeepCopy()
	shown.ResourceVersion = "7"
	c.isvcHandler().OnUpdate(before, shown)
	if r := c.memory.keys[k]; r != nil {
		t.Fatalf("kept after the cache showed the write: %+v", r)
	}
}
