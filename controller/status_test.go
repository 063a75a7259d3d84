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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

// newISVC is a one-replica InferenceService, as stored at generation 1.
func newISVC() *crd.InferenceService {
	i := &crd.InferenceService{Spec: crd.InferenceServiceSpec{Model: "Qwen/Qwen3-0.6B", Replicas: 1, GPUsPerReplica: ptr.To[int32](1)}}
	i.Name, i.Namespace, i.UID, i.Generation = "qwen3", "default", types.UID("isvc-uid"), 1
	return i
}

func statusWith(isvc *crd.InferenceService, ready int32, causes ...reconcile.Cause) crd.InferenceServiceStatus {
	st := crd.InferenceServiceStatus{ObservedGeneration: isvc.Generation, ReadyReplicas: ready, Replicas: ready}
	return reconcile.WithCauses(st, isvc, causes, metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
}

func TestHold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	contended := false
	c := &Controller{progressHold: 30 * time.Second, budgetContended: func() bool { return contended }}
	k := queue.Key{Namespace: "default", Name: "qwen3"}
	rollout := reconcile.Cause{Rank: reconcile.RankRollout, Reason: reconcile.ReasonRolloutInProgress, Message: "Deployment qwen3: rolling out generation 2"}

	// A spec change rolling out while the replica serves: held, then written after the bound.
	isvc := newISVC()
	isvc.Status = statusWith(isvc, 1)
	isvc.Generation = 2
	next := statusWith(isvc, 1, rollout)
	if d, ok := c.hold(k, isvc, &next, t0, false); !ok || d != 30*time.Second {
		t.Fatalf("rollout of a serving model: held %v for %v, want true for 30s", ok, d)
	}
	if _, ok := c.hold(k, isvc, &next, t0.Add(31*time.Second), false); ok {
		t.Fatal("held past the bound")
	}
	if failing := statusWith(isvc, 1, reconcile.Cause{Rank: reconcile.RankPods, Reason: reconcile.ReasonCrashLoopBackOff, Message: "restarts"}); reconcile.Transient(&failing) {
		t.Fatal("a failing reason is transient")
	}
	if fewer := statusWith(isvc, 0, rollout); func() bool { _, ok := c.hold(k, isvc, &fewer, t0, false); return ok }() {
		t.Fatal("held while fewer replicas than asked serve")
	}

	// A new isvc: its first status is held only while the API budget is contended.
	c.memory.holds().release(k)
	fresh := newISVC()
	starting := statusWith(fresh, 0, reconcile.Cause{Rank: reconcile.RankStarting, Reason: reconcile.ReasonStarting, Message: "Deployment qwen3: creating pods"})
	if _, ok := c.hold(k, fresh, &starting, t0, false); ok {
		t.Fatal("held while idle")
	}
	contended = true
	if d, ok := c.hold(k, fresh, &starting, t0, false); !ok || d != contendedRecheck {
		t.Fatalf("contended: held %v for %v", ok, d)
	}
	if _, ok := c.hold(k, fresh, &starting, t0.Add(31*time.Second), false); ok {
		t.Fatal("held past the bound while contended")
	}
	// The default rollout hold is long; a new isvc's first status still shows within contendedHold.
	c.progressHold = DefaultProgressHold
	c.memory.holds().release(k)
	if _, ok := c.hold(k, fresh, &starting, t0, false); !ok {
		t.Fatal("contended: not held")
	}
	if _, ok := c.hold(k, fresh, &starting, t0.Add(contendedHold+time.Second), false); ok {
		t.Fatal("a new isvc's first status held past contendedHold")
	}
}

// A start whose pod turned ready before the Deployment counted it keeps its last reason for
// that moment: ReplicasNotReady would say less, and Ready follows.
func TestHoldWhileTheDeploymentCounts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &Controller{progressHold: DefaultProgressHold}
	k := queue.Key{Namespace: "default", Name: "qwen3"}
	isvc := newISVC()
	isvc.Status = statusWith(isvc, 0, reconcile.Cause{Rank: reconcile.RankStarting, Reason: reconcile.ReasonStarting, Message: "Pod qwen3-x: started, readiness probe not passed yet"})
	uncounted := statusWith(isvc, 0, reconcile.Cause{Rank: reconcile.RankPods, Reason: reconcile.ReasonReplicasNotReady, Message: "Deployment qwen3: 0/1 replicas ready"})
	if d, ok := c.hold(k, isvc, &uncounted, t0, false); !ok || d != countLag {
		t.Fatalf("Starting -> ReplicasNotReady: held %v for %v, want true for %v", ok, d, countLag)
	}
	if _, ok := c.hold(k, isvc, &uncounted, t0.Add(countLag+time.Second), false); ok {
		t.Fatal("held past countLag: a Deployment that never counts must be reported")
	}
	c.memory.holds().release(k)
	if ready := statusWith(isvc, 1); func() bool { _, ok := c.hold(k, isvc, &ready, t0, false); return ok }() {
		t.Fatal("Ready held")
	}
	// Stored ReplicasNotReady, or fewer ready than stored: not the count's lag.
	isvc.Status = uncounted
	if _, ok := c.hold(k, isvc, &uncounted, t0, false); ok {
		t.Fatal("held a ReplicasNotReady already stored")
	}
	isvc.Status = statusWith(isvc, 1, reconcile.Cause{Rank: reconcile.RankStarting, Reason: reconcile.ReasonStarting, Message: "Pod qwen3-y: starting"})
	if _, ok := c.hold(k, isvc, &uncounted, t0, false); ok {
		t.Fatal("held a drop in ready replicas")
	}
}

// A start's autoscaling verdict alone waits for the start's next write (Ready) within
// HPASyncGrace; with anything else new, or past the grace, it is written.
func TestHoldTheAutoscalingVerdictOfAStart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &Controller{progressHold: DefaultProgressHold, now: func() time.Time { return t0 }}
	k := queue.Key{Namespace: "default", Name: "qwen3"}
	isvc := newISVC()
	starting := reconcile.Cause{Rank: reconcile.RankStarting, Reason: reconcile.ReasonStarting, Message: "Deployment qwen3: creating pods"}
	isvc.Status = statusWith(isvc, 0, starting)
	withAutoscaling := func(st crd.InferenceServiceStatus, status metav1.ConditionStatus, reason string) crd.InferenceServiceStatus {
		st.Conditions = append([]metav1.Condition(nil), st.Conditions...)
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: crd.ConditionAutoscalingActive, Status: status, Reason: reason, Message: reason, ObservedGeneration: 1})
		return st
	}
	isvc.Status = withAutoscaling(isvc.Status, metav1.ConditionUnknown, reconcile.ReasonAutoscalerNotReported)
	blind := withAutoscaling(statusWith(isvc, 0, starting), metav1.ConditionFalse, "FailedGetPodsMetric")
	if !reconcile.WorthWriting(&isvc.Status, &blind) {
		t.Fatal("the verdict is not worth writing at all")
	}
	if ok, d := c.deferStatus(k, isvc, &blind, false); !ok || d.RequeueAfter <= 0 || d.RequeueAfter > reconcile.HPASyncGrace {
		t.Fatalf("autoscaling verdict of a start: held %v (%+v), want held within %v", ok, d, reconcile.HPASyncGrace)
	}
	if _, ok := c.hold(k, isvc, &blind, t0.Add(reconcile.HPASyncGrace+time.Second), false); ok {
		t.Fatal("held past HPASyncGrace: a start that stays must show the verdict")
	}
	c.memory.holds().release(k)
	ready := withAutoscaling(statusWith(isvc, 1), metav1.ConditionFalse, "FailedGetPodsMetric")
	if ok, _ := c.deferStatus(k, isvc, &ready, false); ok {
		t.Fatal("the Ready write that carries the verdict held")
	}
	unschedulable := withAutoscaling(statusWith(isvc, 0, reconcile.Cause{Rank: reconcile.RankPods, Reason: reconcile.ReasonReplicasNotReady, Message: "Deployment qwen3: 0/1 replicas ready"}), metav1.ConditionFalse, "FailedGetPodsMetric")
	if reconcile.AutoscalingOnly(&isvc.Status, &unschedulable) {
		t.Fatal("a new reason beside the verdict taken for the verdict alone")
	}
}

// servingFixture is a two-replica isvc whose children the caches show as desired and ready.
func servingFixture(t *testing.T) *fixture {
	t.Helper()
	isvc := newISVCObject(2)
	want := desired(t, isvc)
	f := newFixture(t, isvc, nil)
	f.caches.d, f.caches.svc, f.caches.hpa = readyDeployment(t, isvc), want.Service, want.HPA
	return f
}

// A status conflict caused by our own last write, which the cache has not delivered yet, ends
// with the re-read: the stored status already says it.
func TestStatusConflictWithOurOwnWrite(t *testing.T) {
	f := servingFixture(t)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "update inferenceservices/status" {
		t.Fatalf("first write: %s", got)
	}
	// The fake's status write keeps only what was sent; the API server keeps the rest.
	u, err := f.dyn.Resource(crd.Resource).Namespace("default").Get(context.Background(), "qwen3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetGeneration(f.caches.isvc.Generation)
	if _, err := f.dyn.Resource(crd.Resource).Namespace("default").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The cache still holds the status before that write: the next reconcile decides the same
	// status again and its write conflicts.
	f.dyn.PrependReactor("update", "inferenceservices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			return true, nil, apierrors.NewConflict(crd.Resource.GroupResource(), "qwen3", errors.New("modified"))
		}
		return false, nil, nil
	})
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "update inferenceservices/status, get inferenceservices" {
		t.Fatalf("calls after the conflict: %s", got)
	}
}

func TestWithDiagnosisRecheck(t *testing.T) {
	for _, c := range []struct {
		o       queue.Outcome
		recheck time.Duration
		want    queue.Outcome
	}{
		{queue.Done(), 14 * time.Second, queue.After(14 * time.Second)},
		{queue.After(time.Minute), 14 * time.Second, queue.After(14 * time.Second)},
		{queue.After(2 * time.Second), 14 * time.Second, queue.After(2 * time.Second)},
		{queue.Backoff(), 14 * time.Second, queue.Backoff()},
		{queue.Done(), 0, queue.Done()},
	} {
		if got := withDiagnosisRecheck(c.o, c.recheck); got != c.want {
			t.Errorf("%+v with a recheck in %v: got %+v, want %+v", c.o, c.recheck, got, c.want)
		}
	}
}

// One recheck at the soonest of the waits is the three nested rechecks sync made before the
// evidence was one read: same outcome for every order of waits.
func TestSoonestRecheckIsTheNestedOnes(t *testing.T) {
	waits := []time.Duration{0, 2 * time.Second, 10 * time.Second, 2 * time.Minute}
	for _, o := range []queue.Outcome{queue.Done(), queue.After(time.Second), queue.After(10 * time.Second), queue.After(time.Minute), queue.Backoff()} {
		for _, a := range waits {
			for _, b := range waits {
				for _, c := range waits {
					nested := withDiagnosisRecheck(withDiagnosisRecheck(withDiagnosisRecheck(o, a), b), c)
					if got := withDiagnosisRecheck(o, soonest(a, b, c)); got != nested {
						t.Errorf("%+v with waits %v %v %v: got %+v, nested %+v", o, a, b, c, got, nested)
					}
				}
			}
		}
	}
}

// A 403 from an admission webhook or policy is the admission's refusal, named so; RBAC's stays
// Forbidden (the install to fix).
func TestCauseOfTellsAdmissionFromRBAC(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for _, c := range []struct {
		err  error
		want string
	}{
		{apierrors.NewForbidden(gr, "chat", errors.New(`admission webhook "vdeployment.kb.io" denied the request: metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "batch": field is immutable`)), reconcile.ReasonAdmissionDenied},
		{apierrors.NewForbidden(gr, "chat", errors.New(`ValidatingAdmissionPolicy 'no-latest' with binding 'b' denied request: image tag latest`)), reconcile.ReasonAdmissionDenied},
		{apierrors.NewForbidden(gr, "chat", errors.New(`User "system:serviceaccount:x:y" cannot patch resource "deployments"`)), reconcile.ReasonForbidden},
		{errors.New("connection refused"), reconcile.ReasonReconcileError},
		{terminatingErr(gr), reconcile.ReasonNamespaceTerminating},
	} {
		if got := causeOf(c.err).Reason; got != c.want {
			t.Errorf("%v: %s, want %s", c.err, got, c.want)
		}
	}
}

// terminatingErr is the API server's answer to a create in a namespace being deleted, as
// NamespaceLifecycle admission words it: a 403 with the NamespaceTerminating cause.
func terminatingErr(gr schema.GroupResource) error {
	err := apierrors.NewForbidden(gr, "chat", errors.New("unable to create new content in namespace ns because it is being terminated"))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"})
	return err
}

// The GPU metrics split what an admission queue holds (gated pods) from what it admitted.
func TestGPUMetricsSplitAdmission(t *testing.T) {
	m := &fakeMetrics{}
	c := &Controller{metrics: m}
	isvc := &crd.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"}, Spec: crd.InferenceServiceSpec{Model: "m", Replicas: 3, GPUsPerReplica: ptr.To[int32](2)}}
	gated := &corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	bound := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	pending := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	c.observeMetrics(isvc, &crd.SpecExtensions{}, &crd.InferenceServiceStatus{}, reconcile.Observed{Pods: []*corev1.Pod{gated, bound, pending}})
	if s := m.last; s.GPUsPendingAdmission != 2 || s.GPUsAdmitted != 4 || s.GPUsAllocated != 2 || s.GPUsPending != 4 || s.GPUsRequested != 6 {
		t.Fatalf("snapshot %+v", s)
	}
}

// An HPA's scale-down changes the Deployment, not the model: until the Deployment controller
// looks, nothing says a rollout is under way, so no Progressing is written; its look brings
// one write, the new count (the soak's writes at rest: Progressing, Ready 2/2, Ready 1/2).
func TestAnHPAScaleIsNotARollout(t *testing.T) {
	f := servingFixture(t)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.caches.isvc.Status = f.storedStatus()
	if f.caches.isvc.Status.Phase != crd.PhaseReady {
		t.Fatalf("before the scale: %s", f.caches.isvc.Status.Phase)
	}
	scaled := f.caches.d.DeepCopy()
	scaled.Spec.Replicas, scaled.Generation = ptr.To[int32](1), 2
	f.caches.d = scaled
	out, err := f.sync()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "" {
		t.Fatalf("the scale, not yet observed: %s (status now %s: %s)", got, f.storedStatus().Phase, f.storedStatus().Reason)
	}
	if out.RequeueAfter <= 0 || out.RequeueAfter > countLag {
		t.Fatalf("held without a bounded recheck: %+v", out)
	}
	observed := scaled.DeepCopy()
	observed.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	f.caches.d = observed
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "update inferenceservices/status" {
		t.Fatalf("the scale observed: %s", got)
	}
	if st := f.storedStatus(); st.Phase != crd.PhaseReady || st.ReadyReplicas != 1 {
		t.Fatalf("after the scale: %s %q, %d ready", st.Phase, st.Reason, st.ReadyReplicas)
	}
}

// A reconcile from a cache still behind this replica's last status write decides that status
// again: it is not rewritten (which would conflict: a PUT answered 409 and a GET) until the
// cache shows the write or echoWait passes; a different status is written at once.
func TestNoRewriteFromACacheBehindOurWrite(t *testing.T) {
	f := servingFixture(t)
	// The server answers each status write with a new resourceVersion; the cache keeps "10".
	rv := 10
	f.dyn.PrependReactor("update", "inferenceservices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		rv++
		obj := a.(clienttesting.UpdateAction).GetObject().DeepCopyObject().(*unstructured.Unstructured)
		obj.SetResourceVersion(fmt.Sprint(rv))
		return true, obj, nil
	})
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "update inferenceservices/status" {
		t.Fatalf("first write: %s", got)
	}
	out, err := f.sync()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "" {
		t.Fatalf("the same status from a cache behind the write: %s", got)
	}
	if out.RequeueAfter <= 0 || out.RequeueAfter > echoWait {
		t.Fatalf("no bounded look again: %+v", out)
	}
	// A different status (a pod fell out of readiness) is written though the cache is behind.
	d := f.caches.d.DeepCopy()
	d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1
	f.caches.d = d
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "update inferenceservices/status" {
		t.Fatalf("a new status: %s", got)
	}
	// Past echoWait the memory lapses: a cache still behind is written over, as before.
	f.ctrl.now = func() time.Time { return t0.Add(echoWait + time.Second) }
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); got != "update inferenceservices/status" {
		t.Fatalf("past echoWait: %s", got)
	}
}

// A model's way to Ready on a cluster without a metrics adapter costs one status write, not
// two: its Ready write says the HPA cannot read the queue, so the HPA's own report after it
// writes nothing (issue 55: at 1,000 models, a fifth of them paid a third status write).
func TestNoStatusWriteForTheHPAsForeseenReport(t *testing.T) {
	isvc := newISVCObject(2)
	want := desired(t, isvc)
	f := newFixture(t, isvc, nil)
	f.caches.api = kinds.MetricsAPI{Known: true, Why: "no APIService registers custom.metrics.k8s.io"}
	hpa := want.HPA.DeepCopy() // created, not reported yet
	f.caches.d, f.caches.svc, f.caches.hpa = readyDeployment(t, isvc), want.Service, hpa
	writes := 0
	sync := func() {
		t.Helper()
		if _, err := f.sync(); err != nil {
			t.Fatal(err)
		}
		writes += strings.Count(f.calls(), "update inferenceservices/status")
		f.caches.isvc.Status = f.storedStatus() // the status's own event updates the cache
	}
	sync()
	reported := hpa.DeepCopy()
	reported.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse,
		Reason: "FailedGetPodsMetric", Message: "the HPA was unable to compute the replica count: unable to get metric vllm:num_requests_waiting: no custom metrics API (custom.metrics.k8s.io) registered",
		LastTransitionTime: metav1.NewTime(f.now)}}
	f.caches.hpa = reported
	f.now = f.now.Add(15 * time.Second)
	sync()
	st := f.caches.isvc.Status
	if c := meta.FindStatusCondition(st.Conditions, crd.ConditionAutoscalingActive); st.Phase != crd.PhaseReady || c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("status %s, AutoscalingActive %+v: want Ready, False", st.Phase, c)
	}
	if writes != 1 {
		t.Fatalf("%d status writes on the way to Ready and the HPA's first report, want 1", writes)
	}
	if ev := f.drainEvents(); len(ev) != 1 || !strings.Contains(ev[0], "Warning") {
		t.Fatalf("events %v: want the one Warning", ev)
	}
}
