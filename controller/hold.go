package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

// Status writes a transition makes stale within moments are held back, so a change costs the
// write of its outcome rather than one per step. Held statuses are only ever Progressing with a
// reason that resolves by itself; the outcome (Ready, or any failing reason) is written at
// once, and a hold always ends, so status is right eventually.
const (
	// DefaultProgressHold bounds how long a serving model's rollout keeps its last Ready
	// status before Progressing is written: a rollout finishing sooner is reported by one
	// write. It is the Deployment's default progressDeadlineSeconds: a rollout that stops
	// progressing sooner is reported by the Deployment as ProgressDeadlineExceeded, a failing
	// reason written at once. Meanwhile observedGeneration < generation, which kstatus-aware
	// tools (Flux, Argo CD, kubectl wait --for=jsonpath) read as in progress.
	DefaultProgressHold = 10 * time.Minute
	// busyHold bounds how long a new isvc's first status waits while child writes are
	// contended: a new model shows a status within a minute, however busy the operator.
	busyHold = time.Minute
	// busyRecheck is how often a new isvc's first status is retried while the API budget is
	// contended: by then its pods may be ready, and Ready is its first write.
	busyRecheck = 2 * time.Second
)

// holds remembers since when each isvc's status for its generation has been held.
type holds struct {
	mu sync.Mutex
	m  map[queue.Key]holdEntry
}

type holdEntry struct {
	uid        types.UID
	generation int64
	since      time.Time
}

// since returns when the hold of this generation began, starting it at now.
func (h *holds) since(k queue.Key, isvc *crd.InferenceService, now time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.m[k]; ok && e.uid == isvc.UID && e.generation == isvc.Generation {
		return e.since
	}
	if h.m == nil {
		h.m = map[queue.Key]holdEntry{}
	}
	h.m[k] = holdEntry{uid: isvc.UID, generation: isvc.Generation, since: now}
	return now
}

func (h *holds) forget(k queue.Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, k)
}

// hold decides whether the transient status st, worth writing, waits; it returns the recheck
// delay.
func (c *Controller) hold(k queue.Key, isvc *crd.InferenceService, st *crd.InferenceServiceStatus, now time.Time) (time.Duration, bool) {
	stored := &isvc.Status
	switch {
	case stored.Phase == crd.PhaseReady && stored.ObservedGeneration < isvc.Generation && st.ReadyReplicas >= isvc.Spec.Replicas:
		// A spec change rolling out while every replica still serves.
		if left := c.progressHold - now.Sub(c.holds.since(k, isvc, now)); left > 0 {
			return left, true
		}
	case stored.Phase == "" && c.busy != nil && c.busy():
		// A new isvc while the operator is saturated creating children: its first status
		// would queue behind them and be stale when sent.
		if now.Sub(c.holds.since(k, isvc, now)) < min(c.progressHold, busyHold) {
			return busyRecheck, true
		}
	}
	return 0, false
}

// deferStatus reports whether st, worth writing, is not written now, and the outcome that
// ends the reconcile then (a recheck for a hold; done when the next event brings the write).
func (c *Controller) deferStatus(k queue.Key, isvc *crd.InferenceService, st *crd.InferenceServiceStatus) (bool, queue.Outcome) {
	if !reconcile.Transient(st) {
		return false, queue.Done()
	}
	if reconcile.SurgeOnly(&isvc.Status, st, isvc.Spec.Replicas) {
		return true, queue.Done() // the rollout's end writes the counts with its outcome
	}
	if d, ok := c.hold(k, isvc, st, c.now()); ok {
		return true, queue.After(d)
	}
	return false, queue.Done()
}

// withDiagnosisRecheck is o, rechecked sooner when the status changes with time alone within
// recheck (reconcile.Output.Recheck): a started pod's readiness window ends with no event to
// announce it, and the resync may be minutes away.
func withDiagnosisRecheck(o queue.Outcome, recheck time.Duration) queue.Outcome {
	if recheck <= 0 || o.Requeue || o.RequeueAfter > 0 && o.RequeueAfter <= recheck {
		return o
	}
	return queue.After(recheck)
}
