// The status-write policy in one place: whether a status is worth writing (reconcile decides),
// whether it waits (held while about to be stale), and the write itself with its Warning Event.

package controller

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

// writeStatus writes st through the status subresource when it differs from what is stored,
// and, once written, emits one Warning Event when a new blocking reason appears. v1beta1's
// additions (ext) are written only when the operator watches v1beta1: v1alpha1 cannot hold them.
// It returns a wait instead of writing when the cache has not yet shown this replica's last
// write of the same status (echoes): the caller looks again after it.
func (c *Controller) writeStatus(ctx context.Context, isvc *crd.InferenceService, st *crd.InferenceServiceStatus, stored, ext *crd.StatusExtensions) (time.Duration, error) {
	v1beta1 := c.version == crd.VersionV1beta1
	key := queue.Key{Namespace: isvc.Namespace, Name: isvc.Name}
	c.memory.echoes().settle(key, isvc, c.now())
	if !reconcile.WorthWriting(&isvc.Status, st) && (!v1beta1 || reconcile.ExtensionsEqual(stored, ext)) {
		return 0, nil
	}
	if wait, ok := c.memory.echoes().pending(key, isvc, st, ext, v1beta1, c.now()); ok {
		return wait, nil
	}
	// The Warnings are decided against the status the write replaced: a cache behind our own
	// last write conflicts, and the stored status read then already carries the reason.
	replaced, written := &isvc.Status, false
	var m map[string]interface{}
	var err error
	if v1beta1 {
		m, err = crd.StatusToUnstructuredV1beta1(st, ext)
	} else {
		m, err = crd.StatusToUnstructured(st)
	}
	if err != nil {
		return 0, err
	}
	// Only status is read by the server on this path; no need to copy the cached object.
	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": crd.Group + "/" + c.version, "kind": crd.Kind,
		"metadata": map[string]interface{}{
			"name": isvc.Name, "namespace": isvc.Namespace, "uid": string(isvc.UID), "resourceVersion": isvc.ResourceVersion,
		},
		"status": m,
	}}
	first := true
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			c.metrics.ConflictRetry("InferenceService/status")
			latest, err := c.isvcs.Namespace(isvc.Namespace).Get(ctx, isvc.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if latest.GetGeneration() != isvc.Generation || latest.GetUID() != isvc.UID {
				return nil // the spec moved on; its own event will reconcile and write status
			}
			if l, err := crd.FromUnstructured(latest); err == nil {
				replaced = &l.Status
				// The conflict is often our own last write, not yet in the cache: when it already
				// says this, rewriting it would change nothing.
				_, latestExt, _ := crd.ExtensionsOf(l)
				if !reconcile.WorthWriting(&l.Status, st) && (!v1beta1 || reconcile.ExtensionsEqual(&latestExt, ext)) {
					return nil
				}
			}
			_ = unstructured.SetNestedField(obj.Object, latest.GetResourceVersion(), "metadata", "resourceVersion")
		}
		first = false
		res, err := c.isvcs.Namespace(isvc.Namespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsNotFound(err) {
			return nil
		}
		written = err == nil
		if written {
			c.memory.echoes().record(key, isvc.UID, res.GetResourceVersion(), st, ext, c.now())
		}
		return err
	})
	if written {
		c.warnOnNewReason(isvc, replaced, st)
		if v1beta1 {
			c.warnOnSlowStart(isvc, stored, ext)
		}
	}
	return 0, err
}

// warnOnNewReason emits one Warning Event when a new blocking reason appears over replaced, and
// one when the autoscaler turns blind; a message that only changes (a restart count growing) is not a
// new cause.
func (c *Controller) warnOnNewReason(isvc *crd.InferenceService, replaced, st *crd.InferenceServiceStatus) {
	if reason, msg, ok := reconcile.NewWarning(replaced, st); ok {
		c.recorder.Eventf(isvc, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", msg)
	}
	if msg, ok := reconcile.AutoscalingWarning(isvc, replaced, st); ok {
		c.recorder.Eventf(isvc, nil, corev1.EventTypeWarning, EventAutoscalingInactive, "Autoscale", "%s", msg)
	}
}

// warnOnSlowStart emits one Warning Event for a new last start that was slow, naming its
// slowest phase.
func (c *Controller) warnOnSlowStart(isvc *crd.InferenceService, stored, ext *crd.StatusExtensions) {
	if ext.LastStart == nil || stored.LastStart != nil && ext.LastStart.ServingAt == stored.LastStart.ServingAt {
		return // the common case, decided before decoding the spec's extensions
	}
	spec, _, err := crd.ExtensionsOf(isvc)
	if err != nil {
		return
	}
	if msg, ok := reconcile.SlowStartWarning(stored, ext, &spec); ok {
		c.recorder.Eventf(isvc, nil, corev1.EventTypeWarning, EventSlowStart, "Start", "%s", msg)
	}
}

// failPermanently reports an error retrying cannot fix, in status and an Event, and tells the
// queue to stop retrying until the object changes.
func (c *Controller) failPermanently(ctx context.Context, isvc *crd.InferenceService, now metav1.Time, reason string, cause error) error {
	st := isvc.Status
	st.ObservedGeneration = isvc.Generation
	st = reconcile.WithCauses(st, isvc, []reconcile.Cause{{Rank: reconcile.RankSpec, Reason: reason, Message: cause.Error()}}, now)
	_, stored, _ := crd.ExtensionsOf(isvc)
	if _, err := c.writeStatus(ctx, isvc, &st, &stored, &stored); err != nil {
		return err
	}
	return queue.Permanent(cause)
}

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
	// contendedHold bounds how long a new isvc's first status waits while the request budget
	// is contended: a new model shows a status within a minute, however loaded the operator.
	contendedHold = time.Minute
	// contendedRecheck is how often a new isvc's first status is retried while the budget is
	// contended: by then its pods may be ready, and Ready is its first write.
	contendedRecheck = 2 * time.Second
	// countLag bounds how long a start whose pods the diagnosis finds ready keeps its last reason
	// while the Deployment has not counted them (ReplicasNotReady): the Deployment controller's
	// status write follows within moments and its event reconciles to Ready.
	countLag = 10 * time.Second
)

// echoWait bounds how long a status write this replica made is trusted while the cache has not
// shown it: the write's own watch event normally arrives within milliseconds.
const echoWait = 5 * time.Second

// echoes remembers each isvc's last status write until the cache shows it (its
// resourceVersion). A reconcile from a cache still behind that write decides the same status
// again; rewriting it only conflicts, a PUT answered 409 and a GET each time (the soak counted
// them among its writes at rest). A different status is written as ever, and the memory
// lapses after echoWait, so a status another writer changed meanwhile is rewritten then. A
// view of the controller's memory.
type echoes memory

type echo struct {
	uid types.UID
	rv  string
	st  crd.InferenceServiceStatus
	ext crd.StatusExtensions
	at  time.Time
}

// record remembers a successful write of st (and ext) that the server stored at rv.
func (e *echoes) record(k queue.Key, uid types.UID, rv string, st *crd.InferenceServiceStatus, ext *crd.StatusExtensions, now time.Time) {
	if rv == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	en := &echo{uid: uid, rv: rv, st: *st.DeepCopy(), at: now}
	if ext != nil {
		// Each reconcile builds its extensions anew and never edits them after the write.
		en.ext = *ext
		en.ext.LoadedAdapters = slices.Clone(ext.LoadedAdapters)
	}
	(*memory)(e).entry(k).echo = en
}

// settle forgets the last write once the cache shows it (or it lapsed, or the object is
// another): a model at rest keeps no copy of its status in the memory.
func (e *echoes) settle(k queue.Key, isvc *crd.InferenceService, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := (*memory)(e).lookup(k)
	if r == nil || r.echo == nil {
		return
	}
	if en := r.echo; en.uid != isvc.UID || en.rv == isvc.ResourceVersion || now.Sub(en.at) >= echoWait {
		r.echo = nil
		(*memory)(e).tidy(k)
	}
}

// pending says whether st is what this replica last wrote for isvc while the cached isvc is
// not yet that write, and how long to trust it still.
func (e *echoes) pending(k queue.Key, isvc *crd.InferenceService, st *crd.InferenceServiceStatus, ext *crd.StatusExtensions, v1beta1 bool, now time.Time) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := (*memory)(e).lookup(k)
	if r == nil || r.echo == nil {
		return 0, false
	}
	en := r.echo
	left := echoWait - now.Sub(en.at)
	if en.uid != isvc.UID || en.rv == isvc.ResourceVersion || left <= 0 {
		r.echo = nil // the cache shows it, the object is another, or the memory lapsed
		(*memory)(e).tidy(k)
		return 0, false
	}
	if reconcile.WorthWriting(&en.st, st) || v1beta1 && ext != nil && !reconcile.ExtensionsEqual(&en.ext, ext) {
		return 0, false
	}
	return left, true
}

// rollout is status.rollout as this replica last wrote it for isvc, while the cache has not
// shown that write yet: a rollout's moves are decided from its last state, and a cache behind
// it would judge a step again (a second rollback Event, a canary made anew after it was removed).
func (e *echoes) rollout(k queue.Key, isvc *crd.InferenceService, now time.Time) (*crd.RolloutStatus, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := (*memory)(e).lookup(k)
	if r == nil || r.echo == nil {
		return nil, false
	}
	en := r.echo
	if en.uid != isvc.UID || en.rv == isvc.ResourceVersion || now.Sub(en.at) >= echoWait {
		return nil, false
	}
	if en.ext.Rollout == nil {
		return nil, true
	}
	own := *en.ext.Rollout // no pointers in it
	return &own, true
}

// holds remembers since when each isvc's status for its generation has been held. A view of
// the controller's memory.
type holds memory

type holdEntry struct {
	uid        types.UID
	generation int64
	since      time.Time
}

// since returns when the hold of this generation began, starting it at now.
func (h *holds) since(k queue.Key, isvc *crd.InferenceService, now time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := (*memory)(h).entry(k)
	if e := r.hold; e != nil && e.uid == isvc.UID && e.generation == isvc.Generation {
		return e.since
	}
	r.hold = &holdEntry{uid: isvc.UID, generation: isvc.Generation, since: now}
	return now
}

// release ends k's hold: its status was written.
func (h *holds) release(k queue.Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := (*memory)(h).lookup(k); r != nil {
		r.hold = nil
		(*memory)(h).tidy(k)
	}
}

// hold decides whether the transient status st, worth writing, waits; it returns the recheck
// delay.
// unobserved: the workload's controller has not observed its latest generation
// (reconcile.Unobserved).
func (c *Controller) hold(k queue.Key, isvc *crd.InferenceService, st *crd.InferenceServiceStatus, now time.Time, unobserved bool) (time.Duration, bool) {
	stored := &isvc.Status
	switch {
	case stored.Phase == crd.PhaseReady && stored.ObservedGeneration < isvc.Generation && st.ReadyReplicas >= isvc.Spec.Replicas:
		// A spec change rolling out while every replica still serves.
		if left := c.progressHold - now.Sub(c.memory.holds().since(k, isvc, now)); left > 0 {
			return left, true
		}
	case stored.Phase == crd.PhaseProgressing && stored.Reason != reconcile.ReasonReplicasNotReady && st.Reason == reconcile.ReasonReplicasNotReady &&
		stored.ObservedGeneration == st.ObservedGeneration && stored.ReadyReplicas == st.ReadyReplicas:
		// The diagnosis found no pod still starting or failing, yet the Deployment counts no more ready
		// than before: it has not counted a pod that just turned ready. Writing that would say
		// less than the stored reason, for the moment until Ready is written.
		if left := countLag - now.Sub(c.memory.holds().since(k, isvc, now)); left > 0 {
			return left, true
		}
	case stored.Phase == crd.PhaseReady && unobserved && st.Reason == reconcile.ReasonRolloutInProgress && stored.ObservedGeneration == st.ObservedGeneration:
		// The model's own spec did not change, its Deployment's did (an HPA's scale, usually) and
		// the Deployment controller has not looked yet: its look decides whether anything rolls
		// out at all, and a scale has nothing to roll. Writing Progressing now would be followed
		// within moments by Ready again: two writes, and a false Progressing, per HPA step.
		if left := countLag - now.Sub(c.memory.holds().since(k, isvc, now)); left > 0 {
			return left, true
		}
	case stored.Phase == crd.PhaseProgressing && reconcile.AutoscalingOnly(stored, st):
		// A start's autoscaling verdict alone (the HPA's first report, an API not served): the
		// model does not serve yet, and its Ready write, usually within moments, carries it.
		if left := reconcile.HPASyncGrace - now.Sub(c.memory.holds().since(k, isvc, now)); left > 0 {
			return left, true
		}
	case stored.Phase == "" && c.budgetContended != nil && c.budgetContended():
		// A new isvc while the operator is saturated creating children: its first status
		// would queue behind them and be stale when sent.
		if now.Sub(c.memory.holds().since(k, isvc, now)) < min(c.progressHold, contendedHold) {
			return contendedRecheck, true
		}
	}
	return 0, false
}

// deferStatus reports whether st, worth writing, is not written now, and the outcome that
// ends the reconcile then (a recheck for a hold; done when the next event brings the write).
func (c *Controller) deferStatus(k queue.Key, isvc *crd.InferenceService, st *crd.InferenceServiceStatus, unobserved bool) (bool, queue.Outcome) {
	if !reconcile.Transient(st) {
		return false, queue.Done()
	}
	if reconcile.SurgeOnly(&isvc.Status, st, isvc.Spec.Replicas) {
		return true, queue.Done() // the rollout's end writes the counts with its outcome
	}
	if d, ok := c.hold(k, isvc, st, c.now(), unobserved); ok {
		return true, queue.After(d)
	}
	return false, queue.Done()
}

// withDiagnosisRecheck is o, rechecked sooner when the status changes with time alone within
// recheck (soonest of reconcile.Output.Recheck and the adapters' and evidence's waits): a
// started pod's readiness window ends with no event to announce it, and the resync may be
// minutes away.
func withDiagnosisRecheck(o queue.Outcome, recheck time.Duration) queue.Outcome {
	if recheck <= 0 || o.Requeue || o.RequeueAfter > 0 && o.RequeueAfter <= recheck {
		return o
	}
	return queue.After(recheck)
}

// soonest is the shortest positive wait of ds; 0 when none is positive.
func soonest(ds ...time.Duration) time.Duration {
	var out time.Duration
	for _, d := range ds {
		if d > 0 && (out == 0 || d < out) {
			out = d
		}
	}
	return out
}
