// The sync pipeline, the queue's handler: admit, observe (the caches, observe.go, and in one
// call the evidence beyond them), decide with reconcile.Reconcile, act, then report, leaving the
// status to the status-write policy (status.go).

package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/controller/evidence"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

// sync is the queue's handler. It reads as the pipeline does: admit the key (or end here: the
// isvc is gone, undecodable, deleting, waiting for its creates, invalid), observe, decide with
// the pure Reconcile, act, report. It returns what the queue should do next, or the error the
// queue retries with backoff.
func (c *Controller) sync(ctx context.Context, key queue.Key) (queue.Outcome, error) {
	p, ended, err := c.admit(ctx, key)
	if p == nil {
		return ended, err
	}
	if err := c.observeAll(ctx, p); err != nil {
		return queue.Done(), err
	}
	p.out = reconcile.Reconcile(p.in)
	a := c.act(ctx, p)
	return c.report(ctx, p, a)
}

// pass is one sync of one admitted key: what it observed and what Reconcile decided.
type pass struct {
	key       queue.Key
	isvc      *crd.InferenceService // the sync's own copy: status is edited in place
	storedExt crd.StatusExtensions  // the status fields only v1beta1 holds, as stored
	now       metav1.Time
	in        reconcile.Input
	out       reconcile.Output
	// evidenceWait is when the evidence read has more to say (a pod's log not yet due).
	evidenceWait time.Duration
}

// acted is what act did: the causes it adds to the decision's (conflicts met, writes refused,
// the gateway's registration) and what it leaves for the report.
type acted struct {
	extra []reconcile.Cause
	// err is every write that failed (retried with backoff once the status is written).
	err error
	// conflicts are children someone else holds, met while writing.
	conflicts int
	// called and failed count the adapter calls made; adapterWait is when one is next due.
	called, failed int
	adapterWait    time.Duration
	// regCond is the gateway registration's condition to set; nil when unchanged.
	regCond *metav1.Condition
}

// admit reads the key's isvc and returns the pass to run, or nil and the outcome that ends the
// sync here: the isvc gone (its memory forgotten), undecodable or invalid (failed for good),
// deleting (finalized), or with creates the caches have not shown yet.
func (c *Controller) admit(ctx context.Context, key queue.Key) (*pass, queue.Outcome, error) {
	obj, ok, err := c.caches.InferenceService(key.Namespace, key.Name)
	if err != nil {
		return nil, queue.Done(), err
	}
	if !ok {
		c.forget(key)
		// Gone: if it was the namespace's last model through the activator, so is the grant.
		return nil, queue.Done(), c.sweepActivatorGrant(ctx, key.Namespace)
	}
	now := metav1.NewTime(c.now()).Rfc3339Copy() // the API server stores seconds
	cached, typed := obj.(*crd.InferenceService)
	if !typed {
		// Kept unstructured because it does not decode. The schema should make this
		// impossible; an object stored before it was is reported.
		u, isU := obj.(*unstructured.Unstructured)
		if !isU {
			return nil, queue.Done(), queue.Permanent(fmt.Errorf("cache holds %T for %s", obj, key))
		}
		_, err := crd.FromUnstructured(u)
		// Its identity is all the status write and the Event need.
		identity := &crd.InferenceService{TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()},
			ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
				ResourceVersion: u.GetResourceVersion(), Generation: u.GetGeneration()}}
		return nil, queue.Done(), c.failPermanently(ctx, identity, now, reconcile.ReasonInvalidSpec, err)
	}
	isvc := cached.DeepCopy() // the sync's own copy: status is edited in place below
	if isvc.DeletionTimestamp != nil {
		return nil, queue.Done(), c.finalize(ctx, isvc, now)
	}
	// Children just created that the caches have not shown: deciding now would create them
	// again and write the status of a model without them. Their events bring the key back.
	if wait, ok := c.memory.expected().unmet(key, c.now()); ok {
		return nil, queue.After(wait), nil
	}
	ext, storedExt, extErr := crd.ExtensionsOf(isvc)
	if err := crd.ValidateDecoded(isvc, &ext, extErr); err != nil {
		return nil, queue.Done(), c.failPermanently(ctx, isvc, now, reconcile.ReasonInvalidSpec, err)
	}
	if err := c.ensureFinalizer(ctx, isvc); err != nil {
		return nil, queue.Done(), err
	}
	return &pass{key: key, isvc: isvc, storedExt: storedExt, now: now,
		in: reconcile.Input{ISVC: isvc, Ext: ext, Now: now, Features: c.features}}, queue.Outcome{}, nil
}

// observeAll fills p's input: the children from the caches, the routes, the weights cache,
// the nodes, then the evidence beyond the caches (one call) and the adapters the pods hold.
func (c *Controller) observeAll(ctx context.Context, p *pass) error {
	isvc, ext := p.isvc, &p.in.Ext
	obs, err := c.observe(isvc)
	if err == nil {
		err = c.observeRoutes(&obs, isvc, ext)
	}
	if err != nil {
		return err
	}
	if obs.Weights, err = c.observeWeights(ctx, isvc, ext); err != nil {
		return err
	}
	obs.Nodes = c.caches.TroubledNodes()
	obs.MetricsAPI = c.caches.MetricsAPI()
	p.in.Observed = obs
	var ev evidence.Evidence
	ev, p.evidenceWait = c.evidence.Read(ctx, p.key, p.in)
	ev.AddTo(&p.in.Observed)
	p.in.Observed.StoredLastStart = p.storedExt.LastStart
	if err := c.observeCanary(ctx, p); err != nil {
		return err
	}
	p.in.Adapters = c.observeAdapters(ctx, p.key, isvc, ext, &p.storedExt, p.in.Observed)
	return nil
}

// act performs the decision: the children's writes, the weights cache's, the adapter calls and
// gates, and the gateway's registration; what failed or was in conflict becomes a cause.
func (c *Controller) act(ctx context.Context, p *pass) acted {
	var a acted
	conflicts, err := c.applyAll(ctx, p.isvc, p.out.Actions)
	a.err = errors.Join(err, c.applyWeights(ctx, p.isvc, p.out.Weights))
	// A call made shows on the pods' next /v1/models; steps waiting for their back-off are
	// looked at again when it ends.
	a.called, a.failed, a.adapterWait = c.applyAdapterSteps(ctx, p.key, adapterAPI(&p.in.Ext), p.in.Adapters, p.out.AdapterSteps)
	// Pods whose server's adapters are not known yet (an engine whose /v1/models lists none)
	// are asked through loads: their answers are observed next time.
	learned, learnFailed := c.learnAdapters(ctx, p.key, adapterAPI(&p.in.Ext), &p.in.Ext, &p.storedExt, p.in.Adapters)
	a.called, a.failed = a.called+learned, a.failed+learnFailed
	if a.called > 0 {
		a.adapterWait = recheckAfterActing
	}
	// A gate written changes the pod, whose event syncs again; a failed write is retried then.
	_, gateErr := c.applyAdapterGates(ctx, p.out.AdapterGates, p.now)
	a.err = errors.Join(a.err, gateErr)
	a.conflicts = len(conflicts)
	for _, m := range conflicts {
		a.extra = append(a.extra, reconcile.Cause{Rank: reconcile.RankConflict, Reason: reconcile.ReasonChildConflict, Message: m})
	}
	if a.err != nil {
		a.extra = append(a.extra, causeOf(a.err))
	}
	regCond, regErr := c.register(ctx, p.isvc, &p.in.Ext, p.now)
	if regErr != nil {
		a.extra = append(a.extra, reconcile.Cause{Rank: reconcile.RankAPI, Reason: reconcile.ReasonGatewayUnavailable, Message: regErr.Error()})
		a.err = errors.Join(a.err, regErr)
	}
	a.regCond = regCond
	return a
}

// report settles the status from the decision and what act met, writes it when the policy
// says so (status.go), and returns what the queue does next.
func (c *Controller) report(ctx context.Context, p *pass, a acted) (queue.Outcome, error) {
	isvc, out := p.isvc, p.out
	st := out.Status
	if len(a.extra) > 0 {
		st = reconcile.WithCauses(reconcile.ObservedStatus(p.in), isvc, append(out.Causes, a.extra...), p.now)
	}
	switch {
	case c.gateway == nil:
		meta.RemoveStatusCondition(&st.Conditions, crd.ConditionGatewayRegistered)
	case a.regCond != nil:
		meta.SetStatusCondition(&st.Conditions, *a.regCond)
	}

	c.observeMetrics(isvc, &p.in.Ext, &st, p.in.Observed)
	settled := len(a.extra) == 0 && a.regCond == nil
	// A rollout's move (a step passed, a rollback) is written with its actions: the next pass
	// decides from it, and the canary it removes takes its metrics with it.
	if (len(out.Actions) > 0 || a.called > 0 && a.failed == 0) && settled && !out.RolloutChanged {
		// The children's own events reconcile again within moments and write the status the
		// actions led to; writing the intermediate one as well would double the writes per
		// change. The recheck covers an action whose event never comes, and observes the
		// adapter calls' effect, which no event announces.
		return withDiagnosisRecheck(queue.After(recheckAfterActing), out.Recheck), nil
	}
	// A registration's outcome is never held: it is stored only in status, and is read back to
	// register once per generation.
	if settled && !out.RolloutChanged && reconcile.WorthWriting(&isvc.Status, &st) {
		if held, next := c.deferStatus(p.key, isvc, &st, reconcile.Unobserved(p.in)); held {
			return withDiagnosisRecheck(next, soonest(out.Recheck, a.adapterWait, p.evidenceWait)), nil
		}
	}
	c.memory.holds().release(p.key)
	echoWait, err := c.writeStatus(ctx, isvc, &st, &p.storedExt, &out.StatusExt)
	if err != nil {
		return queue.Done(), errors.Join(a.err, err)
	}
	if echoWait == 0 && c.version == crd.VersionV1beta1 {
		c.eventRollout(isvc, p.in.Observed.StoredRollout, out.StatusExt.Rollout)
	}
	if a.err != nil {
		return queue.Done(), a.err
	}
	if len(out.Conflicts) > 0 || a.conflicts > 0 {
		// Reported in status; nothing in the caches' view will change, but an unlabelled
		// namesake may go away: look again with backoff.
		return queue.Backoff(), nil
	}
	return withDiagnosisRecheck(queue.Done(), soonest(out.Recheck, a.adapterWait, p.evidenceWait, echoWait)), nil
}

const recheckAfterActing = 2 * time.Second

// forget drops all the controller keeps of a deleted isvc: its memory, the evidence read for
// it and its metrics' series.
func (c *Controller) forget(key queue.Key) {
	c.memory.forget(key)
	c.evidence.Forget(key)
	c.metrics.ForgetInferenceService(key.Namespace, key.Name)
}

// causeOf turns an API error into the status cause users see.
func causeOf(err error) reconcile.Cause {
	switch {
	case namespaceTerminating(err):
		return reconcile.Cause{Rank: reconcile.RankAPI, Reason: reconcile.ReasonNamespaceTerminating, Message: err.Error()}
	case deniedByAdmission(err):
		return reconcile.Cause{Rank: reconcile.RankAPI, Reason: reconcile.ReasonAdmissionDenied, Message: err.Error()}
	case apierrors.IsForbidden(err):
		return reconcile.Cause{Rank: reconcile.RankAPI, Reason: reconcile.ReasonForbidden, Message: err.Error()}
	default:
		return reconcile.Cause{Rank: reconcile.RankAPI, Reason: reconcile.ReasonReconcileError, Message: err.Error()}
	}
}

// namespaceTerminating: the API server's NamespaceLifecycle refused a create because the
// namespace is being deleted (a 403 that is not RBAC's).
func namespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// deniedByAdmission tells an admission webhook's or policy's refusal from RBAC's: both can
// answer 403, and only RBAC's is the operator's install to fix.
func deniedByAdmission(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "admission webhook") && strings.Contains(msg, "denied the request") ||
		strings.Contains(msg, "AdmissionPolicy") && strings.Contains(msg, "denied request")
}
