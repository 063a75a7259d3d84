package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/metrics"
	"github.com/example/inferenceservice-operator/queue"
)

// The I/O layer's unit tests, in the style of sample-controller's: fake clientsets, caches
// filled by hand, and the list of API calls expected. The e2e suite is the proof against a
// real API server; these pin down each path's calls, cheaply and exactly.

// fakeCaches is what the informers would hold.
type fakeCaches struct {
	isvc  *crd.InferenceService
	d     *appsv1.Deployment
	svc   *corev1.Service
	hpa   *autoscalingv2.HorizontalPodAutoscaler
	pods  []*corev1.Pod
	nodes map[string]*corev1.Node
	api   kinds.MetricsAPI
}

func (f *fakeCaches) MetricsAPI() kinds.MetricsAPI { return f.api }

func (f *fakeCaches) InferenceServicesByIndex(index, value string) ([]*crd.InferenceService, error) {
	return nil, nil
}

func (f *fakeCaches) TroubledNodes() map[string]*corev1.Node { return f.nodes }
func (f *fakeCaches) Nodes() []*corev1.Node {
	var out []*corev1.Node
	for _, n := range f.nodes {
		out = append(out, n)
	}
	return out
}
func (f *fakeCaches) PodsOnNode(node string, pending bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range f.pods {
		if p.Spec.NodeName == node || pending && p.Spec.NodeName == "" {
			out = append(out, p)
		}
	}
	return out
}

func (f *fakeCaches) InferenceService(ns, name string) (runtime.Object, bool, error) {
	if f.isvc == nil || f.isvc.Namespace != ns || f.isvc.Name != name {
		return nil, false, nil
	}
	return f.isvc, true, nil
}
func (f *fakeCaches) Deployment(string, string) (*appsv1.Deployment, bool, error) {
	return f.d, f.d != nil, nil
}
func (f *fakeCaches) Service(string, string) (*corev1.Service, bool, error) {
	return f.svc, f.svc != nil, nil
}
func (f *fakeCaches) HPA(string, string) (*autoscalingv2.HorizontalPodAutoscaler, bool, error) {
	return f.hpa, f.hpa != nil, nil
}
func (f *fakeCaches) ConfigMap(string, string) (*corev1.ConfigMap, bool, error) {
	return nil, false, nil
}
func (f *fakeCaches) PDB(string, string) (*policyv1.PodDisruptionBudget, bool, error) {
	return nil, false, nil
}
func (f *fakeCaches) Optional(schema.GroupVersionResource, string, string) (*unstructured.Unstructured, bool, error) {
	return nil, false, nil
}
func (f *fakeCaches) ReplicaSets(string, string) ([]*appsv1.ReplicaSet, error) { return nil, nil }
func (f *fakeCaches) Pods(string, string) ([]*corev1.Pod, error)               { return f.pods, nil }
func (f *fakeCaches) Pod(_, name string) (*corev1.Pod, bool, error) {
	for _, p := range f.pods {
		if p.Name == name {
			return p, true, nil
		}
	}
	return nil, false, nil
}
func (f *fakeCaches) Workloads(string, []types.UID) map[types.UID]kinds.Workload { return nil }
func (f *fakeCaches) ClusterQueue(string) (kinds.ClusterQueue, bool) {
	return kinds.ClusterQueue{}, false
}
func (f *fakeCaches) AdmittedBy(string) []metav1.Object { return nil }

// fakeMetrics counts what the controller reports.
type fakeMetrics struct {
	conflicts map[string]int
	abandoned int
	last      metrics.Snapshot // the last model snapshot observed
}

func (m *fakeMetrics) ConflictRetry(r string) {
	if m.conflicts == nil {
		m.conflicts = map[string]int{}
	}
	m.conflicts[r]++
}
func (m *fakeMetrics) RouteAbandoned()                            { m.abandoned++ }
func (m *fakeMetrics) APIError(string)                            {}
func (m *fakeMetrics) ObserveInferenceService(s metrics.Snapshot) { m.last = s }
func (m *fakeMetrics) ForgetInferenceService(string, string)      {}

// fakeGateway fails while err is set.
type fakeGateway struct {
	err          error
	deregistered int
}

func (g *fakeGateway) Register(context.Context, reconcile.Route) error { return g.err }
func (g *fakeGateway) Deregister(context.Context, reconcile.Route) error {
	if g.err != nil {
		return g.err
	}
	g.deregistered++
	return nil
}

type fixture struct {
	t       *testing.T
	kube    *kubefake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	caches  *fakeCaches
	metrics *fakeMetrics
	events  *events.FakeRecorder
	ctrl    *Controller
	now     time.Time
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newISVCObject(replicas int32) *crd.InferenceService {
	i := &crd.InferenceService{
		TypeMeta: metav1.TypeMeta{APIVersion: crd.GroupVersion.String(), Kind: crd.Kind},
		Spec:     crd.InferenceServiceSpec{Model: "Qwen/Qwen3-0.6B", Replicas: replicas, GPUsPerReplica: ptr.To[int32](1)},
	}
	i.Name, i.Namespace, i.UID, i.Generation, i.ResourceVersion = "qwen3", "default", types.UID("isvc-uid"), 1, "10"
	return i
}

// newFixture serves isvc from the caches and the dynamic client, and objs from the typed one.
func newFixture(t *testing.T, isvc *crd.InferenceService, gw Registrar, objs ...runtime.Object) *fixture {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(isvc)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	f := &fixture{
		t:      t,
		kube:   kubefake.NewClientset(objs...),
		dyn:    dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{crd.Resource: crd.Kind + "List"}, &unstructured.Unstructured{Object: u}),
		caches: &fakeCaches{isvc: isvc}, metrics: &fakeMetrics{}, events: events.NewFakeRecorder(100), now: t0,
	}
	f.ctrl = New(Config{Kube: f.kube, Dynamic: f.dyn, Caches: f.caches, Queue: queue.New(queue.DefaultConfig("test"), nil),
		Recorder: f.events, Gateway: gw, Metrics: f.metrics, ProgressHold: time.Minute})
	f.ctrl.now = func() time.Time { return f.now }
	return f
}

func (f *fixture) sync() (queue.Outcome, error) {
	f.kube.ClearActions()
	f.dyn.ClearActions()
	return f.ctrl.sync(context.Background(), queue.Key{Namespace: "default", Name: "qwen3"})
}

// mustSync syncs and fails t unless the outcome is want, naming the step.
func (f *fixture) mustSync(t *testing.T, step string, want queue.Outcome) {
	t.Helper()
	if out, err := f.sync(); err != nil || out != want {
		t.Fatalf("%s: %+v %v, want %+v", step, out, err, want)
	}
}

// calls lists the API calls made, as "verb resource[/subresource]", typed then dynamic.
func (f *fixture) calls() string {
	var out []string
	for _, a := range append(f.kube.Actions(), f.dyn.Actions()...) {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			s += "/" + sub
		}
		if p, ok := a.(clienttesting.PatchAction); ok && p.GetPatchType() == types.StrategicMergePatchType {
			s += "(strategic)"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// desired is what the pure reconcile would create for isvc: the children as they would be
// stored, owned by it.
func desired(t *testing.T, isvc *crd.InferenceService) *reconcile.Desired {
	t.Helper()
	ext, _, err := crd.ExtensionsOf(isvc)
	if err != nil {
		t.Fatal(err)
	}
	return reconcile.DesiredChildren(isvc, &ext, reconcile.Features{})
}

func TestSyncNewInferenceService(t *testing.T) {
	f := newFixture(t, newISVCObject(2), nil)
	out, err := f.sync()
	if err != nil {
		t.Fatal(err)
	}
	// The Deployment first: what acts on it waits for its create. No status yet: the
	// children's events bring it.
	if got := f.calls(); got != "create deployments, create services, create horizontalpodautoscalers" &&
		got != "create deployments, create horizontalpodautoscalers, create services" {
		t.Fatalf("calls: %s", got)
	}
	if out != queue.After(recheckAfterActing) {
		t.Fatalf("outcome %+v: a reconcile that acted succeeds and rechecks", out)
	}
	if ev := f.drainEvents(); len(ev) != 1 || !strings.Contains(ev[0], "Normal Created") {
		t.Fatalf("events %v", ev)
	}
}

// A sync woken before the caches show the children just created (the isvc's own write, one
// child's event before the others') waits for them instead of creating them again; once the
// caches add them, it decides.
func TestSyncWaitsForItsCreatesToShow(t *testing.T) {
	f := newFixture(t, newISVCObject(2), nil)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	out, err := f.sync()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "" || out.RequeueAfter <= 0 || out.RequeueAfter > expectTTL {
		t.Fatalf("before the caches show the creates: calls %q, outcome %+v", got, out)
	}
	d := desired(t, f.caches.isvc)
	h := f.ctrl.Handlers().Child.(cache.ResourceEventHandlerFuncs)
	f.caches.d, f.caches.svc, f.caches.hpa = d.Deployment, d.Service, d.HPA
	for _, o := range []interface{}{d.Deployment, d.Service} {
		h.OnAdd(o, false)
	}
	if _, err := f.sync(); err != nil || f.calls() != "" {
		t.Fatalf("two of three shown: calls %q (%v)", f.calls(), err)
	}
	h.OnAdd(d.HPA, false)
	if _, err := f.sync(); err != nil || strings.Contains(f.calls(), "create") || !strings.Contains(f.calls(), "update inferenceservices/status") {
		t.Fatalf("all shown: calls %q (%v), want the status write and no create", f.calls(), err)
	}
}

func TestSyncForeignDeploymentCreatesNothingElse(t *testing.T) {
	foreign := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "default", UID: "other"}}
	f := newFixture(t, newISVCObject(2), nil, foreign)
	out, err := f.sync()
	if err != nil {
		t.Fatal(err)
	}
	// Outside the label-scoped cache, found by the create; nothing else is created.
	if got := f.calls(); got != "create deployments, get deployments, update inferenceservices/status" {
		t.Fatalf("calls: %s", got)
	}
	if !out.Requeue {
		t.Fatalf("outcome %+v: a reported conflict waits with backoff", out)
	}
	st := f.storedStatus()
	if st.Phase != crd.PhaseFailed || st.Reason != reconcile.ReasonChildConflict {
		t.Fatalf("status %+v", st)
	}
	// The next reconcile reads the namesake instead of failing another create.
	f.caches.isvc.Status = st
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "get deployments" {
		t.Fatalf("second reconcile: %s", got)
	}
	// Once it is gone, the create goes ahead.
	if err := f.kube.Tracker().Delete(appsv1.SchemeGroupVersion.WithResource("deployments"), "default", "qwen3"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); !strings.HasPrefix(got, "get deployments, create deployments, create") {
		t.Fatalf("after the namesake went: %s", got)
	}
}

func TestSyncRecoversARelabelledChild(t *testing.T) {
	isvc := newISVCObject(2)
	d := desired(t, isvc).Deployment.DeepCopy()
	d.Labels["app.kubernetes.io/managed-by"] = "Helm" // out of the label-scoped cache
	d.Spec.Replicas = ptr.To[int32](0)
	f := newFixture(t, isvc, nil, d)
	f.caches.svc = desired(t, isvc).Service
	f.caches.hpa = desired(t, isvc).HPA
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "create deployments, get deployments, update deployments" {
		t.Fatalf("calls: %s", got)
	}
	live, err := f.kube.AppsV1().Deployments("default").Get(context.Background(), "qwen3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if live.Labels["app.kubernetes.io/managed-by"] != kinds.ManagedByValue || *live.Spec.Replicas != 2 {
		t.Fatalf("not restored: labels %v replicas %d", live.Labels, *live.Spec.Replicas)
	}
}

func TestUpdateRetriesOnConflict(t *testing.T) {
	isvc := newISVCObject(2)
	want := desired(t, isvc)
	cached := want.Deployment.DeepCopy()
	cached.ResourceVersion = "1"
	cached.Spec.Template.Spec.Containers[0].Image = "evil:latest"
	live := cached.DeepCopy()
	live.ResourceVersion = "2" // moved on since it was cached
	f := newFixture(t, isvc, nil, live)
	f.caches.d, f.caches.svc, f.caches.hpa = cached, want.Service, want.HPA
	conflicts := 0
	f.kube.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		conflicts++
		return true, nil, apierrors.NewConflict(appsv1.Resource("deployments"), "qwen3", errors.New("the object has been modified"))
	})
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "patch deployments(strategic), get deployments, update deployments" {
		t.Fatalf("calls: %s", got)
	}
	if conflicts != 1 || f.metrics.conflicts["Deployment"] != 1 {
		t.Fatalf("conflicts %d, counted %v", conflicts, f.metrics.conflicts)
	}
	got, _ := f.kube.AppsV1().Deployments("default").Get(context.Background(), "qwen3", metav1.GetOptions{})
	if got.Spec.Template.Spec.Containers[0].Image != crd.DefaultImage {
		t.Fatalf("image %q after the re-merge", got.Spec.Template.Spec.Containers[0].Image)
	}
}

func readyDeployment(t *testing.T, isvc *crd.InferenceService) *appsv1.Deployment {
	d := desired(t, isvc).Deployment.DeepCopy()
	n := *d.Spec.Replicas
	d.Generation = 1
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	return d
}

func (f *fixture) storedStatus() crd.InferenceServiceStatus {
	f.t.Helper()
	u, err := f.dyn.Resource(crd.Resource).Namespace("default").Get(context.Background(), "qwen3", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	i, err := crd.FromUnstructured(u)
	if err != nil {
		f.t.Fatal(err)
	}
	return i.Status
}

func TestStatusWrittenOnceThenSkipped(t *testing.T) {
	isvc := newISVCObject(2)
	want := desired(t, isvc)
	f := newFixture(t, isvc, nil)
	f.caches.d, f.caches.svc, f.caches.hpa = readyDeployment(t, isvc), want.Service, want.HPA
	out, err := f.sync()
	if err != nil || out != queue.Done() {
		t.Fatalf("outcome %+v %v", out, err)
	}
	if got := f.calls(); got != "update inferenceservices/status" {
		t.Fatalf("first converged reconcile: %s", got)
	}
	st := f.storedStatus()
	if st.Phase != crd.PhaseReady || st.ReadyReplicas != 2 {
		t.Fatalf("status %+v", st)
	}
	f.caches.isvc.Status = st // the status's own event updates the cache
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "" {
		t.Fatalf("a converged resync wrote: %s", got)
	}
}

func TestStatusConflictRereadsOnce(t *testing.T) {
	isvc := newISVCObject(2)
	want := desired(t, isvc)
	f := newFixture(t, isvc, nil)
	f.caches.d, f.caches.svc, f.caches.hpa = readyDeployment(t, isvc), want.Service, want.HPA
	first := true
	f.dyn.PrependReactor("update", "inferenceservices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && first {
			first = false
			return true, nil, apierrors.NewConflict(crd.Resource.GroupResource(), "qwen3", errors.New("modified"))
		}
		return false, nil, nil
	})
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "update inferenceservices/status, get inferenceservices, update inferenceservices/status" {
		t.Fatalf("calls: %s", got)
	}
	if f.metrics.conflicts["InferenceService/status"] != 1 {
		t.Fatalf("conflicts %v", f.metrics.conflicts)
	}
}

func deleting(isvc *crd.InferenceService) *crd.InferenceService {
	isvc.Finalizers = []string{Finalizer}
	isvc.DeletionTimestamp = &metav1.Time{Time: t0}
	return isvc
}

func TestFinalizerWaitsForTheGateway(t *testing.T) {
	gw := &fakeGateway{err: errors.New("503 Service Unavailable")}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	f := newFixture(t, deleting(newISVCObject(1)), gw, ns)
	_, err := f.sync()
	if err == nil || !strings.Contains(err.Error(), "deregistering the gateway route failed") {
		t.Fatalf("err %v: a failed deregistration is retried with backoff", err)
	}
	if got := f.calls(); got != "get namespaces, update inferenceservices/status" {
		t.Fatalf("calls: %s", got)
	}
	if st := f.storedStatus(); st.Phase != crd.PhaseTerminating || st.Reason != reconcile.ReasonGatewayUnavailable {
		t.Fatalf("status %+v", st)
	}
	// After the deregistration timeout, the finalizer goes and the route is counted.
	f.ctrl.deregisterTimeout = time.Hour
	f.now = t0.Add(2 * time.Hour)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "get namespaces, patch inferenceservices" || f.metrics.abandoned != 1 {
		t.Fatalf("calls %s, abandoned %d", got, f.metrics.abandoned)
	}
	if ev := f.drainEvents(); len(ev) == 0 || !strings.Contains(ev[len(ev)-1], "Warning RouteAbandoned") {
		t.Fatalf("events %v", ev)
	}
}

func TestFinalizerReleasedInATerminatingNamespace(t *testing.T) {
	gw := &fakeGateway{err: errors.New("503 Service Unavailable")}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	f := newFixture(t, deleting(newISVCObject(1)), gw, ns)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "get namespaces, patch inferenceservices" || f.metrics.abandoned != 1 {
		t.Fatalf("calls %s, abandoned %d", got, f.metrics.abandoned)
	}
	u, _ := f.dyn.Resource(crd.Resource).Namespace("default").Get(context.Background(), "qwen3", metav1.GetOptions{})
	if len(u.GetFinalizers()) != 0 {
		t.Fatalf("finalizers %v", u.GetFinalizers())
	}
}

func TestFinalizerDeregistersOnce(t *testing.T) {
	gw := &fakeGateway{}
	f := newFixture(t, deleting(newISVCObject(1)), gw)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "patch inferenceservices" || gw.deregistered != 1 || f.metrics.abandoned != 0 {
		t.Fatalf("calls %s, deregistered %d, abandoned %d", got, gw.deregistered, f.metrics.abandoned)
	}
}

func TestSyncOfAGoneInferenceService(t *testing.T) {
	f := newFixture(t, newISVCObject(1), nil)
	f.caches.isvc = nil
	out, err := f.sync()
	if err != nil || out != queue.Done() || f.calls() != "" {
		t.Fatalf("outcome %+v %v, calls %q", out, err, f.calls())
	}
}

func TestInvalidStoredObjectIsPermanent(t *testing.T) {
	isvc := newISVCObject(1)
	isvc.Spec.Model = "-rm -rf"
	f := newFixture(t, isvc, nil)
	_, err := f.sync()
	var perm *queue.PermanentError
	if !errors.As(err, &perm) {
		t.Fatalf("err %v: an invalid spec is not retried", err)
	}
	if st := f.storedStatus(); st.Reason != reconcile.ReasonInvalidSpec {
		t.Fatalf("status %+v", st)
	}
	if got := fmt.Sprint(f.drainEvents()); !strings.Contains(got, "Warning InvalidSpec") {
		t.Fatalf("events %s", got)
	}
}
