// The user's raise of spec.replicas, held against the HPA until the pods it started serve:
// a pure decision read from the anchor's annotations and the pods.

package reconcile

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RaisedAnnotation on the Deployment (or LeaderWorkerSet) holds the count of a raise of
// spec.replicas while the HPA's minimum is kept at it. Without the hold, an HPA reading an
// empty queue cuts a raise from 3 to 6 back to 3 within a sync or two, while the new pods
// still load their weights: its stabilization window remembers only its own recommendations.
const RaisedAnnotation = "ai.example.com/raised-to"

// DefaultRaiseHold is how long raised pods serve before the HPA decides again when the spec
// sets no scale-down window: the HPA controller's default window.
const DefaultRaiseHold = 5 * time.Minute

// raise is a hold's decision: held is the HPA minimum it keeps (0: none), until when it ends
// (zero while the raised pods are not all ready yet).
type raise struct {
	held  int32
	until time.Time
}

// decideRaise holds a raise of spec.replicas (sc.Fixed: the user's count) as the HPA's
// minimum until held pods (leaders for multi-node models) have each been ready for window.
// liveAnn are the anchor's annotations, nil before it exists; a raise is spec.replicas above
// the count last applied. A lower spec.replicas ends the hold, as does its end.
func decideRaise(liveAnn map[string]string, sc Scale, pods []*corev1.Pod, window time.Duration, now time.Time) raise {
	if !sc.Fixed || liveAnn == nil {
		return raise{}
	}
	held := int32(0)
	if n, err := strconv.Atoi(liveAnn[RaisedAnnotation]); err == nil && n > 0 {
		held = int32(n)
	}
	if applied, err := strconv.Atoi(liveAnn[ReplicasAnnotation]); err == nil && sc.Replicas > int32(applied) {
		held = sc.Replicas // a new raise
	}
	held = min(held, sc.Max)
	if held <= sc.Min || sc.Replicas < held {
		return raise{}
	}
	var since []time.Time
	for _, p := range pods {
		if p.DeletionTimestamp != nil || !IsLeaderOrSingle(p) {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				since = append(since, c.LastTransitionTime.Time)
			}
		}
	}
	if int32(len(since)) < held {
		return raise{held: held}
	}
	sort.Slice(since, func(i, j int) bool { return since[i].Before(since[j]) })
	until := since[held-1].Add(window) // the held-th pod to turn ready has served a window
	if !now.Before(until) {
		return raise{}
	}
	return raise{held: held, until: until}
}

// note is what AutoscalingActive's message adds while the hold lasts.
func (r raise) note() string {
	switch {
	case r.held == 0:
		return ""
	case r.until.IsZero():
		return fmt.Sprintf("holding the HPA's minimum at %d (spec.replicas raised) until those pods are ready and have served a scale-down window", r.held)
	}
	return fmt.Sprintf("holding the HPA's minimum at %d (spec.replicas raised) until %s, then the autoscaler decides", r.held, r.until.UTC().Format(time.RFC3339))
}

// anchorAnnotations are the live Deployment's annotations, else the LeaderWorkerSet's.
func anchorAnnotations(d *appsv1.Deployment, l *unstructured.Unstructured) map[string]string {
	switch {
	case d != nil:
		return d.Annotations
	case l != nil:
		return l.GetAnnotations()
	}
	return nil
}

// apply records the hold on the wanted anchor and keeps the HPA's minimum at it.
func (r raise) apply(want *Desired) {
	if r.held == 0 {
		return
	}
	v := strconv.Itoa(int(r.held))
	if d := want.Deployment; d != nil {
		d.Annotations[RaisedAnnotation] = v
	}
	if l := want.LeaderWorkerSet; l != nil {
		a := l.GetAnnotations()
		a[RaisedAnnotation] = v
		l.SetAnnotations(a)
	}
	if h := want.HPA; h != nil && (h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < r.held) {
		h.Spec.MinReplicas = &r.held
	}
}
