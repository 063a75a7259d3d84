// The Events of pods still being created, I/O before the decision: for the pods
// reconcile.CreatingPods names (a container not started long after the pod was scheduled), the
// pod's Events are read (a pull in progress, a volume that will not mount) and handed to
// Reconcile typed. Each pod is read at most once per Features.CreatingEvidenceAfter while it
// stays there, at most maxEventPods pods a model; a model whose pods start reads nothing.

package controller

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
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

// podEventCounter is the part of Metrics that counts Event reads (metrics.Metrics has it).
type podEventCounter interface {
	PodEventRead(result string)
}

// eventRead is one pod's Events as read at a time.
type eventRead struct {
	at     time.Time
	events []reconcile.PodEvent
}

// podEvents remembers, per InferenceService, the last read of each pod still being created;
// only the pods the latest sync wanted are kept.
type podEvents struct {
	mu sync.Mutex
	m  map[queue.Key]map[types.UID]eventRead
}

func (e *podEvents) get(k queue.Key, uid types.UID) (eventRead, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.m[k][uid]
	return r, ok
}

func (e *podEvents) keep(k queue.Key, reads map[types.UID]eventRead) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[queue.Key]map[types.UID]eventRead{}
	}
	e.m[k] = reads
}

func (e *podEvents) forget(k queue.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, k)
}

// observePodEvents returns the Events of the model's pods still being created past the
// threshold, reading those not read within it, and when to look again (0: nothing to watch).
func (c *Controller) observePodEvents(ctx context.Context, key queue.Key, isvc *crd.InferenceService, obs reconcile.Observed, now metav1.Time) (map[types.UID][]reconcile.PodEvent, time.Duration) {
	after := c.features.CreatingEvidenceAfter
	pods := reconcile.CreatingPods(reconcile.Input{ISVC: isvc, Observed: obs, Now: now, Features: c.features})
	if len(pods) == 0 {
		c.podEvents.forget(key)
		return nil, 0
	}
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	pods = pods[:min(len(pods), maxEventPods)]
	out := make(map[types.UID][]reconcile.PodEvent, len(pods))
	reads := make(map[types.UID]eventRead, len(pods))
	for _, p := range pods {
		r, ok := c.podEvents.get(key, p.UID)
		if !ok || now.Sub(r.at) >= after {
			r = eventRead{at: now.Time, events: c.readPodEvents(ctx, p)}
		}
		reads[p.UID], out[p.UID] = r, r.events
	}
	c.podEvents.keep(key, reads)
	return out, after
}

// readPodEvents lists the Events about one pod; nil when the read failed (the status then says
// Starting, as without the read).
func (c *Controller) readPodEvents(ctx context.Context, p *corev1.Pod) []reconcile.PodEvent {
	ctx, cancel := context.WithTimeout(ctx, eventReadTimeout)
	defer cancel()
	list, err := c.kube.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(p.UID)).String(), Limit: maxPodEvents})
	result := LogReadOK
	switch {
	case apierrors.IsForbidden(err):
		result = LogReadForbidden
	case err != nil:
		result = LogReadError
	}
	if m, ok := c.metrics.(podEventCounter); ok {
		m.PodEventRead(result)
	}
	if err != nil {
		klog.V(2).InfoS("Events of a pod still being created not read; its status says Starting", "pod", klog.KObj(p), "err", err)
		return nil
	}
	out := make([]reconcile.PodEvent, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, podEventOf(&list.Items[i]))
	}
	return out
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
	return reconcile.PodEvent{Type: e.Type, Reason: e.Reason, Message: e.Message, First: first, Last: last}
}
