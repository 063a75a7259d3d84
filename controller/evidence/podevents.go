// The Events of pods still being created: for the pods reconcile.CreatingPods names (a
// container not started long after the pod was scheduled), the pod's Events are read (a pull
// in progress, a volume that will not mount) and handed to Reconcile typed. Each pod is read
// at most once per Features.CreatingEvidenceAfter while it stays there, at most maxEventPods
// pods a model; a model whose pods start reads nothing.

package evidence

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/queue"
)

const (
	// maxEventPods bounds the pods read per model per period: the message names the first by
	// name and counts the rest.
	maxEventPods = 3
	// maxPodEvents bounds one read; a pod stuck in creation has a handful (a series each).
	maxPodEvents     = 100
	eventReadTimeout = 5 * time.Second
)

// podEvents returns the Events of the model's pods still being created past the threshold,
// reading those not read within it, and when to look again (0: nothing to watch). Only the
// pods this sync wanted stay remembered.
func (r *Reader) podEvents(ctx context.Context, key queue.Key, in reconcile.Input) (map[types.UID][]reconcile.PodEvent, time.Duration) {
	after, now := in.Features.CreatingEvidenceAfter, in.Now
	pods := reconcile.CreatingPods(in)
	if len(pods) == 0 {
		r.events.forget(key)
		return nil, 0
	}
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	pods = pods[:min(len(pods), maxEventPods)]
	out := make(map[types.UID][]reconcile.PodEvent, len(pods))
	reads := make(map[types.UID]stamped[[]reconcile.PodEvent], len(pods))
	last, _ := r.events.get(key)
	for _, p := range pods {
		e, ok := last.v[p.UID]
		if !ok || now.Sub(e.at) >= after {
			e = stamped[[]reconcile.PodEvent]{at: now.Time, v: r.readPodEvents(ctx, p)}
		}
		reads[p.UID], out[p.UID] = e, e.v
	}
	r.events.put(key, now.Time, reads)
	return out, after
}

// readPodEvents lists the Events about one pod; nil when the read failed (the status then says
// Starting, as without the read).
func (r *Reader) readPodEvents(ctx context.Context, p *corev1.Pod) []reconcile.PodEvent {
	out, err := r.listPodEvents(ctx, p.Namespace, p.UID)
	if err != nil {
		klog.V(2).InfoS("Events of a pod still being created not read; its status says Starting", "pod", klog.KObj(p), "err", err)
	}
	return out
}

// listPodEvents lists the Events about the pod with uid, at most maxPodEvents; nil on an error.
func (r *Reader) listPodEvents(ctx context.Context, ns string, uid types.UID) ([]reconcile.PodEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, eventReadTimeout)
	defer cancel()
	list, err := r.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(uid)).String(), Limit: maxPodEvents})
	r.countEventRead(resultOf(err))
	if err != nil {
		return nil, err
	}
	out := make([]reconcile.PodEvent, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, podEventOf(&list.Items[i]))
	}
	return out, nil
}

// resultOf is a read's result as counted.
func resultOf(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return ReadForbidden
	case err != nil:
		return ReadError
	}
	return ReadOK
}

// podEventOf is an Event as the diagnosis reads it, from whichever of the two APIs' time
// fields the reporter set.
func podEventOf(e *corev1.Event) reconcile.PodEvent {
	first, last := e.FirstTimestamp.Time, e.LastTimestamp.Time
	if first.IsZero() {
		first = e.EventTime.Time
	}
	if s := e.Series; s != nil && s.LastObservedTime.After(last) {
		last = s.LastObservedTime.Time
	}
	if last.IsZero() {
		last = first
	}
	return reconcile.PodEvent{Type: e.Type, Reason: e.Reason, Message: e.Message, FieldPath: e.InvolvedObject.FieldPath, First: first, Last: last}
}
