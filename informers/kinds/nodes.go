// Nodes as cached: the few facts of a Node that say its GPUs cannot serve (the device plugin
// reporting fewer allocatable than installed, a GPU health check's taint, the node not Ready),
// kept compactly, and read only for nodes with such trouble.

package kinds

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// gpuLike is an extended resource a device plugin serves GPUs as (nvidia.com/gpu, amd.com/gpu,
// nvidia.com/mig-1g.10gb...).
func gpuLike(r corev1.ResourceName) bool {
	s := string(r)
	return strings.Contains(s, "/") && (strings.Contains(s, "gpu") || strings.Contains(s, "mig-"))
}

// healthTaint is a taint a GPU health check sets (NVIDIA's and DCGM-based checkers use keys or
// values naming the GPU and its health); a plain GPU pool taint (nvidia.com/gpu=present) is not.
// HealthTaint reports whether a taint is a GPU health check's (a key with gpu, and health, xid,
// ecc, fault or fail in its key or value): a node to heal, never a taint to tolerate.
func HealthTaint(t corev1.Taint) bool { return healthTaint(t) }

func healthTaint(t corev1.Taint) bool {
	if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
		return false
	}
	k, v := strings.ToLower(t.Key), strings.ToLower(t.Value)
	if !strings.Contains(k, "gpu") {
		return false
	}
	for _, w := range []string{"health", "xid", "ecc", "fault", "fail", "unhealthy"} {
		if strings.Contains(k, w) || strings.Contains(v, w) {
			return true
		}
	}
	return false
}

// StripNode keeps what the GPU diagnosis reads of a Node: its name, whether it is cordoned, its
// health taints, its GPU-like resources' capacity and allocatable, and its Ready condition without times (a
// heartbeat then changes nothing the cache holds, and wakes no one).
func StripNode(obj interface{}) (interface{}, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return stripManagedFields(obj)
	}
	out := &corev1.Node{}
	out.Name, out.UID, out.ResourceVersion = n.Name, n.UID, n.ResourceVersion
	out.Spec.Unschedulable = n.Spec.Unschedulable // a cordoned node's free GPUs are no one's
	for _, t := range n.Spec.Taints {
		if healthTaint(t) {
			out.Spec.Taints = append(out.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	pick := func(rl corev1.ResourceList) corev1.ResourceList {
		var out corev1.ResourceList
		for r, q := range rl {
			if gpuLike(r) {
				if out == nil {
					out = corev1.ResourceList{}
				}
				out[r] = q
			}
		}
		return out
	}
	out.Status.Capacity, out.Status.Allocatable = pick(n.Status.Capacity), pick(n.Status.Allocatable)
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
		}
	}
	return out, nil
}

// NodeTroubled reports whether a (stripped) node has GPU trouble for any GPU-like resource:
// the nodes the operator hands the diagnosis, from an index of its cache.
func NodeTroubled(n *corev1.Node) bool {
	if !nodeReady(n) || slices.ContainsFunc(n.Spec.Taints, healthTaint) {
		return true
	}
	for r := range n.Status.Capacity {
		if NodeTrouble(n, r) != "" {
			return true
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return true // a node that never reported is the scheduler's problem, not a GPU fault
}

// NodeTrouble says why node n cannot run work on resource r now; "" when nothing does.
func NodeTrouble(n *corev1.Node, r corev1.ResourceName) string {
	var parts []string
	if !nodeReady(n) {
		parts = append(parts, "node not Ready")
	}
	capacity, hasCap := n.Status.Capacity[r]
	alloc := n.Status.Allocatable[r]
	if hasCap && alloc.Cmp(capacity) < 0 {
		parts = append(parts, fmt.Sprintf("%s allocatable %s of %s: the device plugin reports the rest unhealthy or not ready", r, alloc.String(), capacity.String()))
	}
	for _, t := range n.Spec.Taints {
		if healthTaint(t) {
			parts = append(parts, fmt.Sprintf("taint %s=%s:%s", t.Key, t.Value, t.Effect))
		}
	}
	return strings.Join(parts, "; ")
}

// Schedulable reports whether new pods can land on a (stripped) node: not cordoned, no GPU
// trouble.
func Schedulable(n *corev1.Node) bool { return !n.Spec.Unschedulable && !NodeTroubled(n) }
