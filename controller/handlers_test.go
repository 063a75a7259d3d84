package controller

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

func owned(name, uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: crd.GroupVersion.String(), Kind: crd.Kind, Name: name, UID: k8stypes.UID("isvc-" + uid), Controller: ptr.To(true)}}}
}

func TestHandlersMapEventsToKeys(t *testing.T) {
	f := newFixture(t, newISVCObject(1), nil)
	q := queue.New(queue.DefaultConfig("handlers"), nil)
	f.ctrl.queue = q
	h := f.ctrl.Handlers()
	d := &appsv1.Deployment{ObjectMeta: owned("qwen3", "1")}
	d.UID = "deploy-uid"
	f.caches.d = d
	for name, c := range map[string]struct {
		handler cache.ResourceEventHandler
		obj     interface{}
		want    int
	}{
		"a child":                                {h.Child, &corev1.Service{ObjectMeta: owned("qwen3", "1")}, 1},
		"a child of a deleted namesake wakes it": {h.Child, &corev1.Service{ObjectMeta: owned("qwen3", "old")}, 1},
		"a foreign child with our instance label": {h.Child, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "default",
			Labels: map[string]string{kinds.InstanceLabel: "qwen3"}}}, 1},
		"a foreign child without it":         {h.Child, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "default"}}, 0},
		"a tombstone":                        {h.Child, cache.DeletedFinalStateUnknown{Obj: &corev1.Service{ObjectMeta: owned("qwen3", "1")}}, 1},
		"a ReplicaSet of our Deployment":     {h.ReplicaSet, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "qwen3-1", Namespace: "default", OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "qwen3", UID: "deploy-uid", Controller: ptr.To(true)}}}}, 1},
		"a ReplicaSet of another Deployment": {h.ReplicaSet, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "qwen3-1", Namespace: "default", OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "qwen3", UID: "other", Controller: ptr.To(true)}}}}, 0},
		"a pod":                              {h.Pod, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{kinds.InstanceLabel: "qwen3"}}}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			obj := c.obj
			if ts, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				c.handler.OnDelete(ts)
			} else {
				c.handler.OnAdd(obj, false)
			}
			if got := q.Len(); got != c.want {
				t.Fatalf("queued %d, want %d", got, c.want)
			}
			if c.want > 0 {
				q.ShutDown()
				q = queue.New(queue.DefaultConfig("handlers"), nil)
				f.ctrl.queue = q
				h = f.ctrl.Handlers()
			}
		})
	}
	// A child's resync (same resourceVersion) says nothing new; an isvc's resync is its
	// periodic reconcile.
	svc := &corev1.Service{ObjectMeta: owned("qwen3", "1")}
	svc.ResourceVersion = "5"
	h.Child.OnUpdate(svc, svc)
	if q.Len() != 0 {
		t.Fatal("a child's resync enqueued")
	}
	u := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "default", ResourceVersion: "5"}}
	h.InferenceService.OnUpdate(u, u)
	if q.Len() != 1 {
		t.Fatal("an isvc's resync did not enqueue")
	}
}

func TestHTTPRegistrar(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		var route reconcile.Route
		_ = json.Unmarshal(b, &route)
		calls = append(calls, r.Method+" "+r.URL.Path+" "+route.Path)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	if _, err := NewHTTPRegistrar("gateway-admin:9000"); err == nil {
		t.Fatal("a relative gateway URL accepted")
	}
	g, err := NewHTTPRegistrar(srv.URL + "/admin")
	if err != nil {
		t.Fatal(err)
	}
	r := reconcile.Route{Namespace: "team-a", Name: "qwen3", Path: "/team-a/qwen3"}
	if err := g.Register(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	status = http.StatusNotFound
	if err := g.Deregister(context.Background(), r); err != nil {
		t.Fatalf("a route already gone counts as removed: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := g.Register(context.Background(), r); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err %v", err)
	}
	if got := strings.Join(calls, "; "); got != "PUT /admin/routes/team-a/qwen3 /team-a/qwen3; DELETE /admin/routes/team-a/qwen3 ; PUT /admin/routes/team-a/qwen3 /team-a/qwen3" {
		t.Fatalf("calls %s", got)
	}
}

func TestSheddingRecorder(t *testing.T) {
	fake := events.NewFakeRecorder(10)
	contended := true
	rec := sheddingRecorder{EventRecorder: fake, contended: func() bool { return contended }}
	pod := &corev1.Pod{}
	rec.Eventf(pod, nil, corev1.EventTypeNormal, "Created", "Create", "created")
	rec.Eventf(pod, nil, corev1.EventTypeWarning, "Failed", "Create", "failed")
	contended = false
	rec.Eventf(pod, nil, corev1.EventTypeNormal, "Created", "Create", "created")
	if len(fake.Events) != 2 || !strings.HasPrefix(<-fake.Events, "Warning") || !strings.HasPrefix(<-fake.Events, "Normal") {
		t.Fatal("a Normal Event went out while contended, or a Warning was shed")
	}
}

func TestScaleToZeroDeletesTheHPAWithPreconditions(t *testing.T) {
	isvc := newISVCObject(2)
	want := desired(t, isvc)
	hpa := want.HPA.DeepCopy()
	hpa.UID, hpa.ResourceVersion = "hpa-uid", "7"
	d := readyDeployment(t, newISVCObject(2))
	f := newFixture(t, isvc, nil, hpa, d)
	isvc.Spec.Replicas, isvc.Generation = 0, 2
	f.caches.d, f.caches.svc, f.caches.hpa = d, want.Service, hpa
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	var del clienttesting.DeleteAction
	for _, a := range f.kube.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok {
			del = d
		}
	}
	if del == nil || del.GetResource().Resource != "horizontalpodautoscalers" {
		t.Fatalf("calls %s", f.calls())
	}
	if p := del.GetDeleteOptions().Preconditions; p == nil || *p.UID != "hpa-uid" || *p.ResourceVersion != "7" {
		t.Fatalf("delete without the cached UID and resourceVersion as preconditions: %+v", p)
	}
}

func TestForbiddenIsReportedInStatus(t *testing.T) {
	f := newFixture(t, newISVCObject(1), nil)
	f.kube.PrependReactor("create", "horizontalpodautoscalers", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}, "qwen3", errors.New("RBAC"))
	})
	_, err := f.sync()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("err %v", err)
	}
	if st := f.storedStatus(); st.Reason != reconcile.ReasonForbidden || st.Phase != crd.PhaseFailed {
		t.Fatalf("status %+v", st)
	}
}

// A create refused because the namespace is being deleted is no RBAC problem: the status says
// the namespace goes (phase Terminating), and no Warning Event is raised (the recorder's
// retries would land it in a namespace made again under the same name).
func TestNamespaceTerminatingIsNotForbidden(t *testing.T) {
	f := newFixture(t, newISVCObject(1), nil)
	f.kube.PrependReactor("create", "horizontalpodautoscalers", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, terminatingErr(schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"})
	})
	if _, err := f.sync(); err == nil {
		t.Fatal("no error: the create failed")
	}
	if st := f.storedStatus(); st.Reason != reconcile.ReasonNamespaceTerminating || st.Phase != crd.PhaseTerminating {
		t.Fatalf("status phase %s reason %s", st.Phase, st.Reason)
	}
	close(f.events.Events)
	for e := range f.events.Events {
		if strings.HasPrefix(e, corev1.EventTypeWarning) {
			t.Errorf("Warning Event %q", e)
		}
	}
}
