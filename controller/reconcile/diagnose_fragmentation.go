// GPU fragmentation in the diagnosis: the scheduler says no node has enough free GPUs; when the
// cluster's free GPUs add up to a replica's and none of its nodes holds them all, the GPUs are
// fragmented, and the remedy differs (pack or drain, not add GPUs).

package reconcile

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NodeGPUs is one schedulable node's GPUs of one resource: allocatable and requested by the
// pods bound to it.
type NodeGPUs struct {
	Node               string
	Allocatable, InUse int64
}

// Free is what the node has left.
func (n NodeGPUs) Free() int64 { return max(0, n.Allocatable-n.InUse) }

// WantsGPUSurvey reports whether the model has a pod the scheduler finds short of GPUs: the
// only case the cluster's free GPUs per node are read for (GPUSurvey in Observed).
func WantsGPUSurvey(in Input) bool {
	gpu := "Insufficient " + string(in.ISVC.Spec.GPUResourceName())
	for _, p := range in.Observed.Pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable && strings.Contains(c.Message, gpu) {
				return true
			}
		}
	}
	return false
}

// fragmentation says, for a replica of want GPUs, whether the free GPUs suffice in total but
// on no single node while some node could hold a replica, with the largest free counts as
// evidence.
func fragmentation(survey []NodeGPUs, want int64) (string, bool) {
	var total, most, largest int64
	nodes := slices.Clone(survey)
	for _, n := range nodes {
		total += n.Free()
		most = max(most, n.Free())
		largest = max(largest, n.Allocatable)
	}
	// A replica larger than any node is not fragmentation: no packing makes it fit.
	if want <= 0 || total < want || most >= want || largest < want {
		return "", false
	}
	slices.SortFunc(nodes, func(a, b NodeGPUs) int {
		if a.Free() != b.Free() {
			return int(b.Free() - a.Free())
		}
		return strings.Compare(a.Node, b.Node)
	})
	var parts []string
	for _, n := range nodes[:min(3, len(nodes))] {
		if n.Free() > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", n.Node, n.Free()))
		}
	}
	return fmt.Sprintf("%d GPUs free in the cluster but at most %d on one node (%s) and a replica needs %d on one node: pack or drain other workloads, or lower spec.gpusPerReplica",
		total, most, strings.Join(parts, ", "), want), true
}
