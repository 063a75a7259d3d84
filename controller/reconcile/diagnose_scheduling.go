// The scheduling layer of the diagnosis: why a pod has no node yet, from its scheduling gates and
// the scheduler's own message, which counts the nodes that failed each filter.

package reconcile

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// admissionMessage names the gates and, with spec.queueName, the LocalQueue the operator
// labelled the pods with, then what Kueue's Workload for the pod says, when there is one.
func admissionMessage(isvc *crd.InferenceService, p *corev1.Pod, workloads map[types.UID]kinds.Workload) string {
	gates := make([]string, len(p.Spec.SchedulingGates))
	for i, g := range p.Spec.SchedulingGates {
		gates[i] = g.Name
	}
	msg := fmt.Sprintf("Pod %s: waiting for admission: held by scheduling gates %s", p.Name, strings.Join(gates, ", "))
	if q := isvc.Spec.QueueName; q != "" {
		msg += fmt.Sprintf(" (LocalQueue %s)", q)
	}
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == KueueGate && workloads != nil {
			w, found := workloads[p.UID]
			msg += kueueSays(w, found)
		}
	}
	return msg
}

// schedulerFilters maps a phrase of the scheduler's per-node reasons to the status reason it
// stands for; the first match wins. The phrases are the scheduler plugins' own (1.27-1.37).
var schedulerFilters = []struct{ phrase, reason string }{
	{"untolerated taint", ReasonUntoleratedTaint},
	{"taints that the pod didn't tolerate", ReasonUntoleratedTaint},
	{"didn't match Pod's node affinity/selector", ReasonNodeSelectorMismatch},
}

// unschedulableReason reads the scheduler's message ("0/4 nodes are available: 2 Insufficient
// nvidia.com/gpu, 2 node(s) had untolerated taint(s). preemption: ...") and names the filter
// that excluded the most nodes; a tie goes to the GPUs, the resource this operator asks for.
func unschedulableReason(msg, gpu string) string {
	if strings.Contains(msg, "unbound immediate PersistentVolumeClaims") {
		return ReasonVolumeClaimUnbound
	}
	summary, _, _ := strings.Cut(msg, " preemption:")
	_, summary, found := strings.Cut(summary, "nodes are available:")
	if !found {
		if strings.Contains(msg, "Insufficient "+gpu) {
			return ReasonInsufficientGPU
		}
		return ReasonUnschedulable
	}
	counts := map[string]int{}
	for _, part := range strings.Split(strings.TrimSuffix(strings.TrimSpace(summary), "."), ", ") {
		n, text, _ := strings.Cut(strings.TrimSpace(part), " ")
		count, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		reason := ReasonUnschedulable
		if strings.HasPrefix(text, "Insufficient "+gpu) {
			reason = ReasonInsufficientGPU
		}
		for _, f := range schedulerFilters {
			if strings.Contains(text, f.phrase) {
				reason = f.reason
				break
			}
		}
		counts[reason] += count
	}
	best, most := ReasonUnschedulable, 0
	for _, r := range []string{ReasonInsufficientGPU, ReasonUntoleratedTaint, ReasonNodeSelectorMismatch, ReasonUnschedulable} {
		if counts[r] > most {
			best, most = r, counts[r]
		}
	}
	return best
}
