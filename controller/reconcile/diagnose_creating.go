// ContainerCreating for long, in the diagnosis: a container the kubelet has not started a while
// after the pod was scheduled is explained from the pod's own Events, which the I/O layer reads
// only for such pods (CreatingPods): a pull in progress, or a volume that will not mount.

package reconcile

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultCreatingEvidenceAfter is how long after a pod is scheduled a container still being
// created has its pod's Events read; a healthy start is done by then and costs no read.
const DefaultCreatingEvidenceAfter = 2 * time.Minute

// PodEvent is what the diagnosis reads of one Event about a pod.
type PodEvent struct {
	Type, Reason, Message string
	// FieldPath is the part of the pod the event is about: spec.containers{vllm} for a container's.
	FieldPath string
	// First and Last are when the event was first and last seen (a series counts repeats).
	First, Last time.Time
}

// CreatingPods are the model's pods whose containers are still being created
// Features.CreatingEvidenceAfter after the pod was scheduled, with when that happened: the pods
// whose Events the I/O layer reads. None for a model whose pods all started, or with the
// feature off.
func CreatingPods(in Input) []*corev1.Pod {
	after := in.Features.CreatingEvidenceAfter
	if after <= 0 {
		return nil
	}
	var out []*corev1.Pod
	for _, p := range in.Observed.Pods {
		if at, ok := creatingSince(p); ok && p.DeletionTimestamp == nil && !in.Now.Time.Before(at.Add(after)) {
			out = append(out, p)
		}
	}
	return out
}

// creatingSince is when a pod whose container is waiting in ContainerCreating was scheduled.
func creatingSince(p *corev1.Pod) (time.Time, bool) {
	if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodPending {
		return time.Time{}, false
	}
	creating := slices.ContainsFunc(p.Status.ContainerStatuses, func(cs corev1.ContainerStatus) bool {
		return cs.State.Waiting != nil && (cs.State.Waiting.Reason == "ContainerCreating" || cs.State.Waiting.Reason == "PodInitializing")
	}) || len(p.Status.ContainerStatuses) == 0
	if !creating {
		return time.Time{}, false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, true
		}
	}
	return p.CreationTimestamp.Time, true
}

// creatingFinding explains a pod still being created from its events: a volume that will not
// mount (failing), or a pull still in progress; ok is false when the events say neither.
func creatingFinding(p *corev1.Pod, events map[types.UID][]PodEvent) (podFinding, bool) {
	evs := events[p.UID]
	var mount, pulling *PodEvent
	pulled := time.Time{}
	for i := range evs {
		e := &evs[i]
		switch e.Reason {
		case "FailedMount", "FailedAttachVolume":
			if e.Type == corev1.EventTypeWarning && (mount == nil || e.Last.After(mount.Last)) {
				mount = e
			}
		case "Pulling":
			if pulling == nil || e.First.Before(pulling.First) {
				pulling = e
			}
		case "Pulled":
			if e.Last.After(pulled) {
				pulled = e.Last
			}
		}
	}
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch {
	case mount != nil:
		return podFinding{rank: RankContainer, reason: ReasonVolumeMountFailed, message: fmt.Sprintf(
			"Pod %s on node %s: volumes not mounted since %s: %s: %s (kubectl describe pvc, and the PersistentVolume's source)",
			p.Name, p.Spec.NodeName, stamp(mount.First), mount.Reason, firstLine(mount.Message))}, true
	case pulling != nil && pulled.Before(pulling.First):
		return podFinding{rank: RankPulling, reason: ReasonPullingImage, message: fmt.Sprintf(
			"Pod %s on node %s: %s since %s (vLLM images are 10-20 GB; each node pulls once)",
			p.Name, p.Spec.NodeName, firstLine(pulling.Message), stamp(pulling.First))}, true
	}
	return podFinding{}, false
}
