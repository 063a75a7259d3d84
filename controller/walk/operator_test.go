package walk

import (
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestOperatorState: up only on evidence (a Lease renewed within its duration, or ready
// pods without election); down on evidence; unknown when nothing is where manifests/ puts it.
func TestOperatorState(t *testing.T) {
	lease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "inferenceservice-operator", Namespace: "inferenceservice-system"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: ptr.To(metav1.NewMicroTime(t0.Add(-renewed)))}}
	}
	notReady := readyPod("op-1")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	cases := []struct {
		name   string
		lease  *coordinationv1.Lease
		pods   []*corev1.Pod
		err    error
		state  string
		detail string
	}{
		{"renewed", lease("op-0", 2*time.Second), []*corev1.Pod{readyPod("op-0")}, nil, "up", "leader op-0, Lease inferenceservice-system/inferenceservice-operator renewed 2s ago"},
		{"expired", lease("op-0", time.Minute), nil, nil, "down", "leader op-0 stopped renewing Lease inferenceservice-system/inferenceservice-operator 60s ago (lease 15s), 0 ready operator pods"},
		{"released", lease("", time.Minute), []*corev1.Pod{notReady}, nil, "down", "no leader: Lease inferenceservice-system/inferenceservice-operator released, 0 ready operator pods"},
		{"no election", nil, []*corev1.Pod{readyPod("op-0")}, nil, "up", "1 ready operator pods"},
		{"none ready", nil, []*corev1.Pod{notReady}, nil, "down", "1 operator pods in inferenceservice-system, none ready"},
		{"nothing", nil, nil, nil, "unknown", "an operator run elsewhere is not seen"},
		{"denied", nil, nil, os.ErrPermission, "unknown", "cannot read"},
	}
	for _, c := range cases {
		got := OperatorState(c.lease, c.pods, "inferenceservice-system", c.err, t0)
		if got.State != c.state || !strings.Contains(got.Detail, c.detail) {
			t.Errorf("%s: %+v, want %s containing %q", c.name, got, c.state, c.detail)
		}
	}
}
