// Evictions in the diagnosis: one eviction is replaced by its ReplicaSet and only mentioned; the
// current revision's pods evicted again and again are a cause someone must act on (the node's
// pressure, or the pods' QoS), with the node and its condition named.

package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// FrequentEvictions evictions within EvictionWindow make a cause: a single one is the
	// ReplicaSet's to replace, a repeated one is a node or a QoS problem.
	FrequentEvictions = 3
	EvictionWindow    = time.Hour
)

// evictedAt is when the kubelet evicted p: its Ready condition turned False then (the pod's
// creation when the condition is missing).
func evictedAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return p.CreationTimestamp.Time
}

// nodePressure names the node condition a kubelet eviction message stands for.
func nodePressure(msg string) string {
	switch {
	case strings.Contains(msg, "low on resource: memory"):
		return string(corev1.NodeMemoryPressure)
	case strings.Contains(msg, "low on resource: ephemeral-storage"), strings.Contains(msg, "nodefs"), strings.Contains(msg, "imagefs"):
		return string(corev1.NodeDiskPressure)
	case strings.Contains(msg, "low on resource: pids"):
		return string(corev1.NodePIDPressure)
	}
	return "node pressure"
}

// frequentEviction is the cause for the current revision's pods evicted within EvictionWindow,
// when there are enough of them, and when the oldest leaves the window (the count may then
// fall below the threshold).
func frequentEviction(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*corev1.Pod, now time.Time) (Cause, time.Time, bool) {
	var evicted []*corev1.Pod
	var current map[string]bool
	for _, p := range pods {
		if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Evicted" || !now.Before(evictedAt(p).Add(EvictionWindow)) {
			continue
		}
		if current == nil {
			_, current = currentReplicaSets(d, rss)
		}
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && current[string(ref.UID)] {
			evicted = append(evicted, p)
		}
	}
	if len(evicted) < FrequentEvictions {
		return Cause{}, time.Time{}, false
	}
	slices.SortFunc(evicted, func(a, b *corev1.Pod) int { return evictedAt(b).Compare(evictedAt(a)) })
	last, oldest := evicted[0], evicted[len(evicted)-1]
	nodes := map[string]bool{}
	for _, p := range evicted {
		nodes[p.Spec.NodeName] = true
	}
	advice := "relieve the node's pressure or move the model to other nodes"
	if qos := last.Status.QOSClass; qos != "" && qos != corev1.PodQOSGuaranteed {
		advice = fmt.Sprintf("QoS %s: set spec.resources.limits equal to requests (Guaranteed QoS is evicted last), or relieve the node's pressure", qos)
	}
	msg := fmt.Sprintf("%d pods of the current revision evicted in the last %s, on %d node(s); the last: Pod %s on node %s (%s): %s; %s",
		len(evicted), EvictionWindow, len(nodes), last.Name, last.Spec.NodeName, nodePressure(last.Status.Message), firstLine(last.Status.Message), advice)
	return Cause{RankEviction, ReasonFrequentEviction, msg}, evictedAt(oldest).Add(EvictionWindow), true
}
