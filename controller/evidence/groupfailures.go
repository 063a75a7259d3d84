// A multi-node model's refused pod creations: a StatefulSet whose pod a ResourceQuota or a
// LimitRange refuses says so only in FailedCreate Events (it has no ReplicaFailure condition,
// unlike a ReplicaSet). For a model with fewer pods than its groups need
// (reconcile.WantsGroupFailures), the namespace's FailedCreate Events of StatefulSets are
// listed at most once per groupFailuresPeriod, and the fresh ones of the model's StatefulSets
// handed to Reconcile; a model whose pods all exist reads nothing.

package evidence

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/queue"
)

const (
	groupFailuresPeriod = 10 * time.Second
	// groupFailureFresh is how recent a FailedCreate must be to count: the StatefulSet
	// controller retries a refused creation with a backoff of minutes, each retry a new one.
	groupFailureFresh = 10 * time.Minute
	maxGroupEvents    = 200
)

// groupFailures returns the latest fresh FailedCreate message of each of the model's
// StatefulSets; nil when not wanted or not read.
func (r *Reader) groupFailures(ctx context.Context, key queue.Key, in reconcile.Input) map[string]string {
	if !reconcile.WantsGroupFailures(in) {
		r.groups.forget(key)
		return nil
	}
	now := in.Now.Time
	if failures, ok := r.groups.fresh(key, now, groupFailuresPeriod); ok {
		return failures
	}
	failures := r.readGroupFailures(ctx, in.Observed.LeaderWorkerSet.GetNamespace(), in.Observed.LeaderWorkerSet.GetName(), now)
	r.groups.put(key, now, failures)
	return failures
}

// readGroupFailures lists the namespace's FailedCreate Events of StatefulSets and keeps, per
// StatefulSet of the LeaderWorkerSet lws, the message of the latest seen within
// groupFailureFresh; nil when the read failed (the status then says what the pods say).
func (r *Reader) readGroupFailures(ctx context.Context, namespace, lws string, now time.Time) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, eventReadTimeout)
	defer cancel()
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", "StatefulSet"), fields.OneTermEqualSelector("reason", "FailedCreate"))
	list, err := r.kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.String(), Limit: maxGroupEvents})
	if err != nil {
		klog.V(2).InfoS("FailedCreate Events of a multi-node model's StatefulSets not read", "namespace", namespace, "leaderWorkerSet", lws, "err", err)
		return nil
	}
	out := map[string]string{}
	latest := map[string]time.Time{}
	for i := range list.Items {
		e := &list.Items[i]
		name := e.InvolvedObject.Name
		// The selector asks for these; checked again for a server that ignores it.
		if e.InvolvedObject.Kind != "StatefulSet" || e.Reason != "FailedCreate" || !reconcile.IsGroupStatefulSet(lws, name) {
			continue
		}
		last := lastSeen(e)
		if now.Sub(last) > groupFailureFresh || !last.After(latest[name]) {
			continue
		}
		latest[name], out[name] = last, e.Message
	}
	return out
}

// lastSeen is when an Event last happened, from whichever of the two APIs' fields is set.
func lastSeen(e *corev1.Event) time.Time {
	last := e.LastTimestamp.Time
	if s := e.Series; s != nil && s.LastObservedTime.After(last) {
		last = s.LastObservedTime.Time
	}
	if last.IsZero() {
		last = e.EventTime.Time
	}
	if last.IsZero() {
		last = e.FirstTimestamp.Time
	}
	return last
}
