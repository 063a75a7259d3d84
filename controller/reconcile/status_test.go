package reconcile

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
)

func statusWith(isvc *crd.InferenceService, ready int32, causes ...Cause) crd.InferenceServiceStatus {
	st := crd.InferenceServiceStatus{ObservedGeneration: isvc.Generation, ReadyReplicas: ready, Replicas: ready}
	return WithCauses(st, isvc, causes, metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
}

func TestSurgeOnly(t *testing.T) {
	isvc := newWorld(1).isvc
	rollout := Cause{RankRollout, ReasonRolloutInProgress, "Deployment qwen3: rolling out generation 2"}
	stored := statusWith(isvc, 1, rollout)
	if next := statusWith(isvc, 2, rollout); !SurgeOnly(&stored, &next, 1) {
		t.Error("a surge pod's count alone was worth a write")
	}
	if next := statusWith(isvc, 0, rollout); SurgeOnly(&stored, &next, 1) {
		t.Error("a drop below spec.replicas was skipped")
	}
	if next := statusWith(isvc, 2); SurgeOnly(&stored, &next, 1) {
		t.Error("Ready was skipped")
	}
}

func TestTransient(t *testing.T) {
	isvc := newWorld(1).isvc
	if failing := statusWith(isvc, 1, Cause{RankPods, ReasonCrashLoopBackOff, "restarts"}); Transient(&failing) {
		t.Fatal("a failing reason is transient")
	}
	if starting := statusWith(isvc, 0, Cause{RankStarting, ReasonStarting, "Deployment qwen3: creating pods"}); !Transient(&starting) {
		t.Fatal("starting pods are not transient")
	}
}

// While a start progresses, AutoscalingActive moving from one Unknown reason to another
// (the HPA not reported yet, then no ready pod yet) is not a write of its own; True or False is.
func TestWorthWritingUnknownAutoscaling(t *testing.T) {
	isvc := newWorld(1).isvc
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	starting := Cause{RankStarting, ReasonStarting, "Pod qwen3-x: startup probe not passed yet (loading weights)"}
	with := func(status metav1.ConditionStatus, reason string) crd.InferenceServiceStatus {
		st := statusWith(isvc, 0, starting)
		autoscaling{true, status, reason, "m"}.set(&st, isvc, now)
		return st
	}
	stored, next := with(metav1.ConditionUnknown, ReasonAutoscalerNotReported), with(metav1.ConditionUnknown, ReasonAwaitingReadyPod)
	if WorthWriting(&stored, &next) {
		t.Error("Unknown -> Unknown during a start was worth a write")
	}
	if f := with(metav1.ConditionFalse, "FailedGetPodsMetric"); !WorthWriting(&stored, &f) {
		t.Error("Unknown -> False was skipped")
	}
	if tr := with(metav1.ConditionTrue, "ValidMetricFound"); !WorthWriting(&stored, &tr) {
		t.Error("Unknown -> True was skipped")
	}
	// Ready is always written, with whatever the condition then says.
	ready := statusWith(isvc, 1)
	autoscaling{true, metav1.ConditionUnknown, ReasonAwaitingReadyPod, "m"}.set(&ready, isvc, now)
	if !WorthWriting(&stored, &ready) {
		t.Error("Ready was skipped")
	}
}
