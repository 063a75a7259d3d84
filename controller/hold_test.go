package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

func statusWith(isvc *crd.InferenceService, ready int32, causes ...Cause) crd.InferenceServiceStatus {
	st := crd.InferenceServiceStatus{ObservedGeneration: isvc.Generation, ReadyReplicas: ready, Replicas: ready}
	return WithCauses(st, isvc, causes, metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
}

func TestSurgeOnly(t *testing.T) {
	isvc := newWorld(1).isvc
	rollout := Cause{RankRollout, ReasonRolloutInProgress, "Deployment qwen3: rolling out generation 2"}
	stored := statusWith(isvc, 1, rollout)
	if next := statusWith(isvc, 2, rollout); !surgeOnly(&stored, &next, 1) {
		t.Error("a surge pod's count alone was worth a write")
	}
	if next := statusWith(isvc, 0, rollout); surgeOnly(&stored, &next, 1) {
		t.Error("a drop below spec.replicas was skipped")
	}
	if next := statusWith(isvc, 2); surgeOnly(&stored, &next, 1) {
		t.Error("Ready was skipped")
	}
}

func TestHold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	busy := false
	c := &Controller{progressHold: 30 * time.Second, busy: func() bool { return busy }}
	k := queue.Key{Namespace: "default", Name: "qwen3"}
	rollout := Cause{RankRollout, ReasonRolloutInProgress, "Deployment qwen3: rolling out generation 2"}

	// A spec change rolling out while the replica serves: held, then written after the bound.
	isvc := newWorld(1).isvc
	isvc.Status = statusWith(isvc, 1)
	isvc.Generation = 2
	next := statusWith(isvc, 1, rollout)
	if d, ok := c.hold(k, isvc, &next, t0); !ok || d != 30*time.Second {
		t.Fatalf("rollout of a serving model: held %v for %v, want true for 30s", ok, d)
	}
	if _, ok := c.hold(k, isvc, &next, t0.Add(31*time.Second)); ok {
		t.Fatal("held past the bound")
	}
	if failing := statusWith(isvc, 1, Cause{RankPods, ReasonCrashLoopBackOff, "restarts"}); transient(&failing) {
		t.Fatal("a failing reason is transient")
	}
	if fewer := statusWith(isvc, 0, rollout); func() bool { _, ok := c.hold(k, isvc, &fewer, t0); return ok }() {
		t.Fatal("held while fewer replicas than asked serve")
	}

	// A new isvc: its first status is held only while the API budget is contended.
	c.holds.forget(k)
	fresh := newWorld(1).isvc
	starting := statusWith(fresh, 0, Cause{RankStarting, ReasonStarting, "Deployment qwen3: creating pods"})
	if _, ok := c.hold(k, fresh, &starting, t0); ok {
		t.Fatal("held while idle")
	}
	busy = true
	if d, ok := c.hold(k, fresh, &starting, t0); !ok || d != busyRecheck {
		t.Fatalf("busy: held %v for %v", ok, d)
	}
	if _, ok := c.hold(k, fresh, &starting, t0.Add(31*time.Second)); ok {
		t.Fatal("held past the bound while busy")
	}
	// The default rollout hold is long; a new isvc's first status still shows within busyHold.
	c.progressHold = DefaultProgressHold
	c.holds.forget(k)
	if _, ok := c.hold(k, fresh, &starting, t0); !ok {
		t.Fatal("busy: not held")
	}
	if _, ok := c.hold(k, fresh, &starting, t0.Add(busyHold+time.Second)); ok {
		t.Fatal("a new isvc's first status held past busyHold")
	}
}

func TestWithDiagnosisRecheck(t *testing.T) {
	w, _ := walkWorld(t, 1, 0)
	w.obs.Pods = []*corev1.Pod{startedPod(2*time.Second, 2*time.Second, opReadiness)} // window ends in 14s
	in := Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}
	for _, c := range []struct {
		o, want queue.Outcome
	}{
		{queue.Done(), queue.After(14 * time.Second)},
		{queue.After(time.Minute), queue.After(14 * time.Second)},
		{queue.After(2 * time.Second), queue.After(2 * time.Second)},
		{queue.Backoff(), queue.Backoff()},
	} {
		if got := withDiagnosisRecheck(c.o, in); got != c.want {
			t.Errorf("%+v: got %+v, want %+v", c.o, got, c.want)
		}
	}
	w.obs.Pods = nil
	if got := withDiagnosisRecheck(queue.Done(), Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}); got != queue.Done() {
		t.Errorf("nothing due: %+v", got)
	}
}
