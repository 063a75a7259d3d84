// A queued model's position, I/O before the decision: Kueue tells it only through its
// visibility API, which has no watch. Each LocalQueue's pending Workloads are read in the
// background, at most once per queuePositionsPeriod and one read at a time per queue, for the
// models waiting in it, and only for models with pods Kueue has not reserved quota for
// (reconcile.WantsQueuePositions). A reconcile never waits for a read: it takes the queue's
// last answer, so a hung visibility API costs the queue its positions, never a worker; a read
// that moves the positions enqueues the models that asked, and the decision rechecks them
// while they wait.

package controller

import (
	"context"
	"maps"
	"sync"
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

// queuePositions are the LocalQueues' reads, by "namespace/localqueue". mu guards the map and
// the entries' fields, never a read.
type queuePositions struct {
	mu     sync.Mutex
	queues map[string]*queueReads
}

// queueReads is one LocalQueue's reading state.
type queueReads struct {
	last    queueRead          // the last answer (at zero: none yet)
	started time.Time          // when the latest read began
	reading bool               // a read is in flight: no second one starts
	asked   time.Time          // when a model last asked, for forgetting the queue
	waiting map[queue.Key]bool // models that asked since the last answer, enqueued by the next
}

// queueRead is one read of a LocalQueue's pending Workloads: positions by Workload name, nil
// when the read failed.
type queueRead struct {
	at        time.Time
	positions map[string]kinds.QueuePosition
}

// observeQueuePositions sets the position of each of workloads Kueue has not reserved quota
// for and its visibility API last listed; the others keep none, so the status claims none.
func (c *Controller) observeQueuePositions(ctx context.Context, isvc *crd.InferenceService, workloads map[types.UID]kinds.Workload, now time.Time) {
	if !reconcile.WantsQueuePositions(isvc, c.features, workloads) {
		return
	}
	positions := c.pendingWorkloads(queue.Key{Namespace: isvc.Namespace, Name: isvc.Name}, isvc.Spec.QueueName, now)
	for uid, w := range workloads {
		if p, ok := positions[w.Name]; ok && w.ClusterQueue == "" {
			w.Position = &p
			workloads[uid] = w
		}
	}
}

// pendingWorkloads is the model's LocalQueue's pending Workloads' positions as last read (nil
// before the first answer, or when it failed); a read starts in the background when none is
// in flight and the last began queuePositionsPeriod ago.
func (c *Controller) pendingWorkloads(model queue.Key, localQueue string, now time.Time) map[string]kinds.QueuePosition {
	s := &c.queuePositions
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, q := range s.queues {
		if !q.reading && now.Sub(q.asked) > queuePositionsForget {
			delete(s.queues, k)
		}
	}
	if s.queues == nil {
		s.queues = map[string]*queueReads{}
	}
	key := model.Namespace + "/" + localQueue
	q := s.queues[key]
	if q == nil {
		q = &queueReads{waiting: map[queue.Key]bool{}}
		s.queues[key] = q
	}
	q.asked = now
	q.waiting[model] = true
	if !q.reading && (q.started.IsZero() || now.Sub(q.started) >= queuePositionsPeriod) {
		q.reading, q.started = true, now
		go c.readQueue(q, model.Namespace, localQueue, now)
	}
	return q.last.positions
}

// readQueue reads one LocalQueue's pending Workloads, bounded by queuePositionsTimeout and not
// by any reconcile's context (none waits for it), keeps the answer, and enqueues the models
// that asked when the positions moved.
func (c *Controller) readQueue(q *queueReads, namespace, localQueue string, started time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), queuePositionsTimeout)
	defer cancel()
	summary, err := c.dyn.Resource(reconcile.KueueLocalQueueVisibilityGVR).Namespace(namespace).Get(ctx, localQueue, metav1.GetOptions{}, "pendingworkloads")
	var positions map[string]kinds.QueuePosition
	if err != nil {
		klog.V(2).InfoS("Queue positions not read; a waiting model's status names none", "namespace", namespace, "localQueue", localQueue, "err", err)
	} else {
		positions = positionsOf(summary)
	}
	s := &c.queuePositions
	s.mu.Lock()
	moved := q.last.at.IsZero() || !maps.Equal(q.last.positions, positions)
	q.last, q.reading = queueRead{at: started, positions: positions}, false
	waiting := q.waiting
	q.waiting = map[queue.Key]bool{}
	s.mu.Unlock()
	if moved {
		for k := range waiting {
			c.queue.Add(k)
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
