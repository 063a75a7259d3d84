package reconcile

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// KueueGate is the scheduling gate Kueue's pod webhook sets and its admission removes.
const KueueGate = "kueue.x-k8s.io/admission"

// kueueSays is Kueue's own account of a gated pod's wait, for the admission message.
func kueueSays(w kinds.Workload, found bool) string {
	switch {
	case !found:
		return "; no Kueue Workload for it yet"
	case w.Pending != "":
		return "; Kueue Workload " + w.Name + ": " + strings.TrimSuffix(firstLine(w.Pending), ".") + positionSays(w.Position)
	case w.ClusterQueue != "":
		return "; Kueue Workload " + w.Name + ": quota reserved in ClusterQueue " + w.ClusterQueue + ", the gate about to be removed"
	}
	return "; Kueue Workload " + w.Name + ": not yet considered" + positionSays(w.Position)
}

func positionSays(p *kinds.QueuePosition) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(" (%s ahead of it in its LocalQueue, %s in its ClusterQueue)", workloadsCount(p.InLocalQueue), workloadsCount(p.InClusterQueue))
}

// KueueLocalQueueVisibilityGVR is Kueue's visibility API (an aggregated API server inside
// Kueue's manager): its localqueues/pendingworkloads subresource lists a LocalQueue's pending
// Workloads with their positions, the only place Kueue tells them.
var KueueLocalQueueVisibilityGVR = schema.GroupVersionResource{Group: "visibility.kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}

// queuePositionsRecheck is how often a model waiting in a queue reads its position again:
// the visibility API has no watch, and positions move when others are admitted.
const queuePositionsRecheck = 10 * time.Second

// WantsQueuePositions reports whether a model has pods Kueue has not reserved quota for, so
// the I/O layer reads their positions (QueuePosition) from the visibility API.
func WantsQueuePositions(isvc *crd.InferenceService, f Features, workloads map[types.UID]kinds.Workload) bool {
	if !f.KueueVisibility || isvc.Spec.QueueName == "" {
		return false
	}
	for _, w := range workloads {
		if w.ClusterQueue == "" {
			return true
		}
	}
	return false
}

// admission is the Admitted condition: what Kueue did with the model's pods; absent where
// Kueue's Workloads are not watched or the model is not queued (no spec.queueName and no
// Kueue gate or Workload on its pods).
type admission struct {
	present bool
	status  metav1.ConditionStatus
	reason  string
	message string
	recheck time.Duration
}

func decideAdmission(in Input) admission {
	if !in.Features.KueueWorkloads {
		return admission{}
	}
	isvc, obs := in.ISVC, &in.Observed
	queued := isvc.Spec.QueueName != "" || len(obs.Workloads) > 0
	var live, gated []*corev1.Pod
	for _, p := range obs.Pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		live = append(live, p)
		for _, g := range p.Spec.SchedulingGates {
			if g.Name == KueueGate {
				gated = append(gated, p)
				queued = true
			}
		}
	}
	if !queued {
		return admission{}
	}
	if len(live) == 0 {
		return admission{true, metav1.ConditionUnknown, ReasonNoPods, "no pods to admit", 0}
	}
	if len(gated) > 0 {
		a := admission{present: true, status: metav1.ConditionFalse, reason: ReasonWaitingForAdmission}
		a.message = fmt.Sprintf("%d of %d pods wait for admission", len(gated), len(live))
		if q := isvc.Spec.QueueName; q != "" {
			a.message += " in LocalQueue " + q
		}
		var nearest *kinds.QueuePosition
		for _, p := range gated {
			w := obs.Workloads[p.UID]
			if strings.Contains(w.Pending, "Pending the preemption") {
				a.reason = ReasonPreempting
			}
			if w.Position != nil && (nearest == nil || w.Position.InClusterQueue < nearest.InClusterQueue) {
				nearest = w.Position
			}
		}
		if nearest != nil {
			a.message += fmt.Sprintf("; the nearest has %s ahead of it in its LocalQueue, %s in its ClusterQueue",
				workloadsCount(nearest.InLocalQueue), workloadsCount(nearest.InClusterQueue))
		}
		if a.reason == ReasonPreempting {
			a.message += "; Kueue is preempting other workloads to make room"
		}
		if in.Features.KueueVisibility && isvc.Spec.QueueName != "" {
			a.recheck = queuePositionsRecheck
		}
		return a
	}
	cqs := map[string]bool{}
	for _, p := range live {
		if w, ok := obs.Workloads[p.UID]; ok && w.ClusterQueue != "" {
			cqs[w.ClusterQueue] = true
		}
	}
	a := admission{present: true, status: metav1.ConditionTrue, reason: ReasonAdmitted}
	a.message = countOf(int32(len(live)), "pod") + " admitted"
	names := make([]string, 0, len(cqs))
	for n := range cqs {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 0 {
		a.message += " by ClusterQueue " + strings.Join(names, ", ")
	}
	for _, n := range names {
		cq, ok := obs.ClusterQueues[n]
		if !ok || len(cq.Borrowed) == 0 {
			continue
		}
		a.reason = ReasonBorrowingQuota
		parts := make([]string, len(cq.Borrowed))
		for i, b := range cq.Borrowed {
			parts[i] = fmt.Sprintf("%s %s (flavor %s)", b.Amount, b.Resource, b.Flavor)
		}
		a.message += fmt.Sprintf("; ClusterQueue %s borrows %s from its cohort, which may reclaim it by preemption", n, strings.Join(parts, ", "))
	}
	return a
}

func workloadsCount(n int32) string { return countOf(n, "workload") }

// countOf is n things, "1 pod" or "3 pods".
func countOf(n int32, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// set writes the condition on st, or removes it.
func (a admission) set(st *crd.InferenceServiceStatus, isvc *crd.InferenceService, now metav1.Time) {
	setOptionalCondition(st, a.present, metav1.Condition{Type: crd.ConditionAdmitted, Status: a.status, Reason: a.reason, Message: a.message,
		ObservedGeneration: isvc.Generation, LastTransitionTime: now})
}
