// Nodes in the diagnosis: a pod's findings that a node's GPU trouble (kinds.NodeTrouble) explains,
// and the nodes a pod short of GPUs could not use.

package reconcile

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// onSickNode are the pod findings a node's GPU trouble explains: the process dies or never
// answers. An OOM kill is the memory limit's, whatever the node.
var onSickNode = map[string]bool{ReasonCrashLoopBackOff: true, ReasonReadinessProbeFailing: true, ReasonGPUError: true}

// notAllocatable names, for a pod short of GPUs, the nodes whose GPUs exist but are not
// allocatable (at most three, and how many more): the shortage may be theirs, not demand's.
func notAllocatable(nodes map[string]*corev1.Node, r corev1.ResourceName) string {
	var names []string
	for name, n := range nodes {
		capacity, ok := n.Status.Capacity[r]
		if alloc := n.Status.Allocatable[r]; ok && alloc.Cmp(capacity) < 0 {
			names = append(names, fmt.Sprintf("%s (%s of %s)", name, alloc.String(), capacity.String()))
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	more := ""
	if len(names) > 3 {
		more, names = fmt.Sprintf(" and %d more", len(names)-3), names[:3]
	}
	return fmt.Sprintf(" [%s GPUs not allocatable on %s%s: device plugin not ready or GPUs unhealthy]", r, strings.Join(names, ", "), more)
}
