// The operator's state as the plugin sees it: its leader Lease and its pods.

package walk

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// Operator is what the plugin could see of the operator: its leader Lease and its pods.
type Operator struct {
	// State is "up", "down" or "unknown" (nothing found where the manifests put it: an operator
	// run elsewhere is not seen, so it is not called down).
	State  string `json:"state"`
	Detail string `json:"detail"`
}

// OperatorState reads the leader Lease (nil if absent) and the operator's pods; err is why they
// could not be read (RBAC), which makes the state unknown rather than down.
func OperatorState(lease *coordinationv1.Lease, pods []*corev1.Pod, where string, err error, now time.Time) Operator {
	if err != nil {
		return Operator{"unknown", fmt.Sprintf("cannot read the operator's Lease or pods in %s: %v", where, err)}
	}
	ready := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil && reconcile.PodReady(p) {
			ready++
		}
	}
	if lease != nil {
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		dur := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 15)) * time.Second
		var renewed time.Time
		if lease.Spec.RenewTime != nil {
			renewed = lease.Spec.RenewTime.Time
		}
		switch {
		case holder == "":
			return Operator{"down", fmt.Sprintf("no leader: Lease %s/%s released, %d ready operator pods", lease.Namespace, lease.Name, ready)}
		case renewed.IsZero() || now.Sub(renewed) > dur:
			return Operator{"down", fmt.Sprintf("leader %s stopped renewing Lease %s/%s %s ago (lease %s), %d ready operator pods",
				holder, lease.Namespace, lease.Name, age(now, renewed), dur, ready)}
		}
		return Operator{"up", fmt.Sprintf("leader %s, Lease %s/%s renewed %s ago", holder, lease.Namespace, lease.Name, age(now, renewed))}
	}
	switch {
	case ready > 0:
		return Operator{"up", fmt.Sprintf("%d ready operator pods in %s (no leader Lease: leader election off)", ready, where)}
	case len(pods) > 0:
		return Operator{"down", fmt.Sprintf("%d operator pods in %s, none ready", len(pods), where)}
	}
	return Operator{"unknown", fmt.Sprintf("no operator pod and no leader Lease in %s (an operator run elsewhere is not seen: --operator-namespace)", where)}
}
