// A queued model's position: Kueue tells it only through its visibility API, which has no
// watch. Each LocalQueue's pending Workloads are read in the background, at most once per
// queuePositionsPeriod and one read at a time per queue, for the models waiting in it, and
// only for models with pods Kueue has not reserved quota for (reconcile.WantsQueuePositions).
// A reconcile never waits for a read: it takes the queue's last answer, so a hung visibility
// API costs the queue its positions, never a worker; a read that moves the positions enqueues
// the models that asked, and the decision rechecks them while they wait.

package evidence

import (
	"context"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

const (
	queuePositionsPeriod = 5 * time.Second
	// queuePositionsTimeout bounds one read, so a hung visibility API holds one goroutine per
	// queue at most this long.
	queuePositionsTimeout = 5 * time.Second
	// queuePositionsForget drops the reads of queues nobody waits in any more.
	queuePositionsForget = time.Minute
)

// localQueue names a Kueue LocalQueue.
type localQueue struct{ namespace, name string }

// queueReads is one LocalQueue's reading state; its memo entry is stamped with when the latest
// read began.
type queueReads struct {
	positions map[string]kinds.QueuePosition // the last answer, by Workload name; nil when it failed
	answered  bool                           // an answer came
	reading   bool                           // a read is in flight: no second one starts
	asked     time.Time                      // when a model last asked, for forgetting the queue
	waiting   map[queue.Key]bool             // models that asked since the last answer, enqueued by the next
}

// queuePositions returns workloads with the position set of each Kueue has not reserved quota
// for and its visibility API last listed; the others keep none, so the status claims none.
func (r *Reader) queuePositions(isvc *crd.InferenceService, f reconcile.Features, workloads map[types.UID]kinds.Workload, now time.Time) map[types.UID]kinds.Workload {
	if !reconcile.WantsQueuePositions(isvc, f, workloads) {
		return workloads
	}
	positions := r.pendingWorkloads(queue.Key{Namespace: isvc.Namespace, Name: isvc.Name}, isvc.Spec.QueueName, now)
	out := maps.Clone(workloads) // the caller's stays as the caches gave it
	for uid, w := range out {
		if p, ok := positions[w.Name]; ok && w.ClusterQueue == "" {
			w.Position = &p
			out[uid] = w
		}
	}
	return out
}

// pendingWorkloads is the model's LocalQueue's pending Workloads' positions as last read (nil
// before the first answer, or when it failed); a read starts in the background when none is
// in flight and the last began queuePositionsPeriod ago.
func (r *Reader) pendingWorkloads(model queue.Key, name string, now time.Time) map[string]kinds.QueuePosition {
	r.queues.expire(func(s stamped[queueReads]) bool { return !s.v.reading && now.Sub(s.v.asked) > queuePositionsForget })
	lq, start := localQueue{model.Namespace, name}, false
	s := r.queues.update(lq, func(s stamped[queueReads], ok bool) stamped[queueReads] {
		if !ok {
			s.v.waiting = map[queue.Key]bool{}
		}
		s.v.asked = now
		s.v.waiting[model] = true
		if !s.v.reading && (s.at.IsZero() || now.Sub(s.at) >= queuePositionsPeriod) {
			s.v.reading, s.at, start = true, now, true
		}
		return s
	})
	if start {
		go r.readQueue(lq)
	}
	return s.v.positions
}

// readQueue reads one LocalQueue's pending Workloads, bounded by queuePositionsTimeout and not
// by any reconcile's context (none waits for it), keeps the answer, and enqueues the models
// that asked when the positions moved.
func (r *Reader) readQueue(lq localQueue) {
	ctx, cancel := context.WithTimeout(context.Background(), queuePositionsTimeout)
	defer cancel()
	summary, err := r.dyn.Resource(reconcile.KueueLocalQueueVisibilityGVR).Namespace(lq.namespace).Get(ctx, lq.name, metav1.GetOptions{}, "pendingworkloads")
	var positions map[string]kinds.QueuePosition
	if err != nil {
		klog.V(2).InfoS("Queue positions not read; a waiting model's status names none", "namespace", lq.namespace, "localQueue", lq.name, "err", err)
	} else {
		positions = positionsOf(summary)
	}
	var moved bool
	var waiting map[queue.Key]bool
	r.queues.update(lq, func(s stamped[queueReads], _ bool) stamped[queueReads] {
		moved = !s.v.answered || !maps.Equal(s.v.positions, positions)
		s.v.positions, s.v.answered, s.v.reading = positions, true, false
		waiting, s.v.waiting = s.v.waiting, map[queue.Key]bool{}
		return s
	})
	if moved {
		for k := range waiting {
			r.queue.Add(k)
		}
	}
}

// positionsOf reads a PendingWorkloadsSummary: each item's name and positions.
func positionsOf(summary *unstructured.Unstructured) map[string]kinds.QueuePosition {
	items, _, _ := unstructured.NestedSlice(summary.Object, "items")
	out := make(map[string]kinds.QueuePosition, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "metadata", "name")
		lq, _, _ := unstructured.NestedInt64(m, "positionInLocalQueue")
		cq, _, _ := unstructured.NestedInt64(m, "positionInClusterQueue")
		if name != "" {
			out[name] = kinds.QueuePosition{InLocalQueue: int32(lq), InClusterQueue: int32(cq)}
		}
	}
	return out
}
