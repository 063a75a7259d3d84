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
