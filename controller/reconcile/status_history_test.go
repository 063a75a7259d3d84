package reconcile

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
)

// The history keeps failures, queueing and the recoveries after them, once each, bounded; a
// healthy start, a changing message and the operator's own work add nothing.
func TestDiagnosisHistory(t *testing.T) {
	isvc := &crd.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1}, Spec: crd.InferenceServiceSpec{Model: "m", Replicas: 2}}
	step := func(i int, causes ...Cause) []crd.DiagnosisRecord {
		t.Helper()
		now := metav1.NewTime(t0.Add(time.Duration(i) * time.Minute))
		st := WithCauses(crd.InferenceServiceStatus{ReadyReplicas: 2}, isvc, causes, now)
		isvc.Status = st
		return st.History
	}
	reasons := func(h []crd.DiagnosisRecord) string {
		s := ""
		for _, r := range h {
			s += fmt.Sprintf("%s/%s ", r.Phase, r.Reason)
		}
		return s
	}
	if h := step(0, Cause{RankActing, ReasonReconciling, "create Deployment m"}); h != nil {
		t.Fatalf("the operator's work recorded: %s", reasons(h))
	}
	if h := step(1, Cause{RankStarting, ReasonStarting, "Pod a: starting"}); h != nil {
		t.Fatalf("a start recorded: %s", reasons(h))
	}
	if h := step(2); h != nil {
		t.Fatalf("a first Ready recorded: %s", reasons(h))
	}
	step(3, Cause{RankCrash, ReasonCrashLoopBackOff, "Pod a: CrashLoopBackOff, 1 restarts"})
	h := step(4, Cause{RankCrash, ReasonCrashLoopBackOff, "Pod a: CrashLoopBackOff, 2 restarts"})
	if got := reasons(h); got != "Failed/CrashLoopBackOff " || h[0].Message != "Pod a: CrashLoopBackOff, 1 restarts" || !h[0].Time.Equal(&metav1.Time{Time: t0.Add(3 * time.Minute)}) {
		t.Fatalf("got %s %+v", got, h)
	}
	h = step(5)
	if got := reasons(h); got != "Failed/CrashLoopBackOff Ready/Available " {
		t.Fatalf("the recovery: %s", got)
	}
	step(6, Cause{RankAdmission, ReasonWaitingForAdmission, "Pod a: waiting for admission"})
	step(7, Cause{RankServing + RankCrash, ReasonCrashLoopBackOff, "rollout blocked"})
	for i := 8; i < 30; i++ {
		h = step(i, Cause{RankScheduling, []string{ReasonInsufficientGPU, ReasonQuotaExceeded}[i%2], "x"})
	}
	if len(h) != crd.MaxHistory || h[len(h)-1].Reason != ReasonQuotaExceeded {
		t.Fatalf("bounded to %d, newest last: %s", crd.MaxHistory, reasons(h))
	}
	long := make([]byte, 4*crd.MaxHistoryMessage)
	for i := range long {
		long[i] = 'x'
	}
	h = step(31, Cause{RankImage, ReasonImagePullFailed, string(long)})
	if n := len(h[len(h)-1].Message); n > crd.MaxHistoryMessage {
		t.Fatalf("message of %d bytes kept", n)
	}
}
