// A queued model's position, I/O before the decision: Kueue tells it only through its
// visibility API, which has no watch. A LocalQueue's pending Workloads are read at most once per
// queuePositionsPeriod for every model waiting in it, and only for models with pods Kueue has
// not reserved quota for (reconcile.WantsQueuePositions); the decision rechecks them while
// they wait.

package controller

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

const (
	queuePositionsPeriod  = 5 * time.Second
	queuePositionsTimeout = 5 * time.Second
	// queuePositionsForget drops the reads of queues nobody waits in any more.
	queuePositionsForget = time.Minute
)

// queuePositions are the last reads, by "namespace/localqueue".
type queuePositions struct {
	mu    sync.Mutex
	reads map[string]queueRead
}

// queueRead is one read of a LocalQueue's pending Workloads: positions by Workload name, nil
// when the read failed.
type queueRead struct {
	at        time.Time
	positions map[string]reconcile.QueuePosition
}

// observeQueuePositions sets the position of each of workloads Kueue has not reserved quota
// for and its visibility API lists; the others keep none, so the status claims none.
func (c *Controller) observeQueuePositions(ctx context.Context, isvc *crd.InferenceService, workloads map[types.UID]reconcile.Workload, now time.Time) {
	if !reconcile.WantsQueuePositions(isvc, c.features, workloads) {
		return
	}
	positions := c.pendingWorkloads(ctx, isvc.Namespace, isvc.Spec.QueueName, now)
	for uid, w := range workloads {
		if p, ok := positions[w.Name]; ok && w.ClusterQueue == "" {
			w.Position = &p
			workloads[uid] = w
		}
	}
}

// pendingWorkloads is the LocalQueue's pending Workloads' positions, read again once
// queuePositionsPeriod old; nil when the read failed.
func (c *Controller) pendingWorkloads(ctx context.Context, namespace, localQueue string, now time.Time) map[string]reconcile.QueuePosition {
	s := &c.queuePositions
	s.mu.Lock()
	defer s.mu.Unlock() // one read at a time: the other models of the queue wait for it
	key := namespace + "/" + localQueue
	if r, ok := s.reads[key]; ok && now.Sub(r.at) < queuePositionsPeriod {
		return r.positions
	}
	for k, r := range s.reads {
		if now.Sub(r.at) > queuePositionsForget {
			delete(s.reads, k)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, queuePositionsTimeout)
	defer cancel()
	summary, err := c.dyn.Resource(reconcile.KueueLocalQueueVisibilityGVR).Namespace(namespace).Get(ctx, localQueue, metav1.GetOptions{}, "pendingworkloads")
	var positions map[string]reconcile.QueuePosition
	if err != nil {
		klog.V(2).InfoS("Queue positions not read; a waiting model's status names none", "namespace", namespace, "localQueue", localQueue, "err", err)
	} else {
		positions = positionsOf(summary)
	}
	if s.reads == nil {
		s.reads = map[string]queueRead{}
	}
	s.reads[key] = queueRead{at: now, positions: positions}
	return positions
}

// positionsOf reads a PendingWorkloadsSummary: each item's name and positions.
func positionsOf(summary *unstructured.Unstructured) map[string]reconcile.QueuePosition {
	items, _, _ := unstructured.NestedSlice(summary.Object, "items")
	out := make(map[string]reconcile.QueuePosition, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "metadata", "name")
		lq, _, _ := unstructured.NestedInt64(m, "positionInLocalQueue")
		cq, _, _ := unstructured.NestedInt64(m, "positionInClusterQueue")
		if name != "" {
			out[name] = reconcile.QueuePosition{InLocalQueue: int32(lq), InClusterQueue: int32(cq)}
		}
	}
	return out
}
