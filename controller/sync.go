package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/metrics"
	"github.com/example/inferenceservice-operator/queue"
)

// Event reasons for what the operator does to children.
const (
	EventCreated      = "Created"
	EventUpdated      = "Updated"
	EventDeleted      = "Deleted"
	EventFailed       = "Failed"
	EventReconciled   = "Reconciled"
	EventDeregistered = "Deregistered"
	EventRegistered   = "Registered"
	// EventRouteAbandoned: the finalizer was released although deregistration failed.
	EventRouteAbandoned = "RouteAbandoned"
)

// abandonRoute says why a deletion should stop waiting for the gateway, or "" to keep
// waiting: the namespace is being deleted, or the deletion is older than the deregistration
// timeout. The namespace is read only here, on a failed deregistration.
func (c *Controller) abandonRoute(ctx context.Context, isvc *crd.InferenceService, now time.Time) string {
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, isvc.Namespace, metav1.GetOptions{})
	switch {
	case err == nil && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating):
		return "namespace " + isvc.Namespace + " is being deleted"
	case err != nil:
		klog.InfoS("Cannot read the namespace of a deleted InferenceService", "isvc", klog.KObj(isvc), "err", err)
	}
	if t, del := c.deregisterTimeout, isvc.DeletionTimestamp; t > 0 && del != nil && now.Sub(del.Time) >= t {
		return fmt.Sprintf("deregistration has failed for %s (--gateway-deregister-timeout=%s)", now.Sub(del.Time).Round(time.Second), t)
	}
	return ""
}

// sync is the queue's handler: read from the caches, decide with the pure Reconcile, apply,
// write status only when it changed. It returns what the queue should do next, or the error
// the queue retries with backoff.
func (c *Controller) sync(ctx context.Context, key queue.Key) (queue.Outcome, error) {
	obj, ok, err := c.caches.InferenceService(key.Namespace, key.Name)
	if err != nil {
		return queue.Done(), err
	}
	if !ok {
		c.metrics.ForgetInferenceService(key.Namespace, key.Name)
		c.holds.forget(key)
		c.namesakes.forgetAll(key.Namespace, key.Name)
		return queue.Done(), nil
	}
	now := metav1.NewTime(c.now()).Rfc3339Copy() // the API server stores seconds
	cached, typed := obj.(*crd.InferenceService)
	if !typed {
		// Kept unstructured because it does not decode. The schema should make this
		// impossible; an object stored before it was is reported.
		u, isU := obj.(*unstructured.Unstructured)
		if !isU {
			return queue.Done(), queue.Permanent(fmt.Errorf("cache holds %T for %s", obj, key))
		}
		_, err := crd.FromUnstructured(u)
		// Its identity is all the status write and the Event need.
		identity := &crd.InferenceService{TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()},
			ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
				ResourceVersion: u.GetResourceVersion(), Generation: u.GetGeneration()}}
		return queue.Done(), c.failPermanently(ctx, identity, now, reconcile.ReasonInvalidSpec, err)
	}
	isvc := cached.DeepCopy() // the reconcile's own copy: status is edited in place below
	if isvc.DeletionTimestamp != nil {
		return queue.Done(), c.finalize(ctx, isvc, now)
	}
	ext, storedExt, extErr := crd.ExtensionsOf(isvc)
	if err := crd.ValidateDecoded(isvc, &ext, extErr); err != nil {
		return queue.Done(), c.failPermanently(ctx, isvc, now, reconcile.ReasonInvalidSpec, err)
	}
	if err := c.ensureFinalizer(ctx, isvc); err != nil {
		return queue.Done(), err
	}

	obs, err := c.observe(isvc)
	if err != nil {
		return queue.Done(), err
	}
	// Desired is rebuilt each time: a few microseconds, against kilobytes per isvc held for good.
	in := reconcile.Input{ISVC: isvc, Ext: ext, Observed: obs, Now: now, Features: c.features}
	out := reconcile.Reconcile(in)

	conflicts, applyErr := c.applyAll(ctx, isvc, out.Actions)
	var extra []reconcile.Cause
	for _, m := range conflicts {
		extra = append(extra, reconcile.Cause{Rank: reconcile.RankConflict, Reason: reconcile.ReasonChildConflict, Message: m})
	}
	if applyErr != nil {
		extra = append(extra, causeOf(applyErr))
	}
	regCond, regErr := c.register(ctx, isvc, &ext, now)
	if regErr != nil {
		extra = append(extra, reconcile.Cause{Rank: reconcile.RankAPI, Reason: reconcile.ReasonGatewayUnavailable, Message: regErr.Error()})
	}
	st := out.Status
	if len(extra) > 0 {
		st = reconcile.WithCauses(reconcile.BaseStatus(in), isvc, append(out.Causes, extra...), now)
	}
	switch {
	case c.gateway == nil:
		meta.RemoveStatusCondition(&st.Conditions, crd.ConditionGatewayRegistered)
	case regCond != nil:
		meta.SetStatusCondition(&st.Conditions, *regCond)
	}

	c.observeMetrics(isvc, &st, obs)
	settled := len(extra) == 0 && regCond == nil
	if len(out.Actions) > 0 && settled {
		// The children's own events reconcile again within moments and write the status the
		// actions led to; writing the intermediate one as well would double the writes per
		// change. The recheck covers an action whose event never comes.
		return withDiagnosisRecheck(queue.After(recheckAfterActing), out.Recheck), nil
	}
	// A registration's outcome is never held: it is stored only in status, and is read back to
	// register once per generation.
	if settled && reconcile.WorthWriting(&isvc.Status, &st) {
		if held, next := c.deferStatus(key, isvc, &st); held {
			return withDiagnosisRecheck(next, out.Recheck), nil
		}
	}
	c.holds.forget(key)
	if err := c.writeStatus(ctx, isvc, &st, &storedExt, &out.StatusExt); err != nil {
		return queue.Done(), errors.Join(applyErr, regErr, err)
	}
	if err := errors.Join(applyErr, regErr); err != nil {
		return queue.Done(), err
	}
	if len(out.Conflicts) > 0 || len(conflicts) > 0 {
		// Reported in status; nothing in the caches' view will change, but an unlabelled
		// namesake may go away: look again with backoff.
		return queue.Backoff(), nil
	}
	return withDiagnosisRecheck(queue.Done(), out.Recheck), nil
}

const recheckAfterActing = 2 * time.Second

// observe reads this InferenceService's children from the caches.
func (c *Controller) observe(isvc *crd.InferenceService) (reconcile.Observed, error) {
	var obs reconcile.Observed
	var err error
	ns, name := isvc.Namespace, isvc.Name
	var ok bool
	if obs.Deployment, ok, err = c.caches.Deployment(ns, name); err != nil {
		return obs, err
	} else if !ok {
		obs.Deployment = nil
	}
	if obs.Service, ok, err = c.caches.Service(ns, name); err != nil {
		return obs, err
	} else if !ok {
		obs.Service = nil
	}
	if obs.HPA, ok, err = c.caches.HPA(ns, name); err != nil {
		return obs, err
	} else if !ok {
		obs.HPA = nil
	}
	if obs.ConfigMap, ok, err = c.caches.ConfigMap(ns, reconcile.AdaptersConfigMapName(name)); err != nil {
		return obs, err
	} else if !ok {
		obs.ConfigMap = nil
	}
	if obs.PDB, ok, err = c.caches.PDB(ns, name); err != nil {
		return obs, err
	} else if !ok {
		obs.PDB = nil
	}
	for _, o := range []struct {
		on   bool
		gvr  schema.GroupVersionResource
		into **unstructured.Unstructured
	}{{c.features.ServiceMonitors, reconcile.ServiceMonitorGVR, &obs.ServiceMonitor}, {c.features.HTTPRoutes, reconcile.HTTPRouteGVR, &obs.HTTPRoute}} {
		if !o.on {
			continue
		}
		if *o.into, ok, err = c.caches.Optional(o.gvr, ns, name); err != nil {
			return obs, err
		} else if !ok {
			*o.into = nil
		}
	}
	if obs.ReplicaSets, err = c.caches.ReplicaSets(ns, name); err != nil {
		return obs, err
	}
	obs.Pods, err = c.caches.Pods(ns, name)
	return obs, err
}

// causeOf turns an API error into the status cause users see.
func causeOf(err error) reconcile.Cause {
	switch {
	case apierrors.IsForbidden(err):
		return reconcile.Cause{Rank: reconcile.RankAPI, Reason: reconcile.ReasonForbidden, Message: err.Error()}
	default:
		return reconcile.Cause{Rank: reconcile.RankAPI, Reason: reconcile.ReasonReconcileError, Message: err.Error()}
	}
}

type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

// applyAll applies the actions concurrently (children are independent, and a new isvc's
// creates then cost one round trip, two when the Deployment is created: what acts on it waits
// for its create), records one Normal Event for what was written and one Warning Event per
// failure. Children found to be someone else's are returned as conflicts, not errors: the
// status reports them.
func (c *Controller) applyAll(ctx context.Context, isvc *crd.InferenceService, actions []reconcile.Action) (conflicts []string, err error) {
	done := make([]reconcile.Verb, len(actions))
	results := make([]error, len(actions))
	run := func(after bool) {
		var wg sync.WaitGroup
		for i := range actions {
			if actions[i].AfterDeployment != after {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				done[i], results[i] = c.apply(ctx, actions[i])
			}()
		}
		wg.Wait()
	}
	run(false)
	if deploymentApplied(actions, results) {
		run(true)
	}
	var errs []error
	var written []string
	var first *reconcile.Action
	reason := ""
	for i, a := range actions {
		var conflict *conflictError
		if errors.As(results[i], &conflict) {
			// Reported by the status (ChildConflict) and its one Warning Event, not per retry.
			conflicts = append(conflicts, conflict.Error())
			continue
		}
		if err := results[i]; err != nil {
			c.metrics.APIError(string(apierrors.ReasonForError(err)))
			c.recorder.Eventf(isvc, a.Object, corev1.EventTypeWarning, EventFailed, actionName(a.Verb),
				"%s %s %s failed: %v", a.Verb, a.Kind, a.Object.GetName(), err)
			errs = append(errs, fmt.Errorf("%s %s %s/%s: %w", a.Verb, a.Kind, a.Object.GetNamespace(), a.Object.GetName(), err))
			continue
		}
		if done[i] == "" {
			continue // nothing was written (the cache was behind, or the action waited), so nothing to tell
		}
		r := map[reconcile.Verb]string{reconcile.Create: EventCreated, reconcile.Update: EventUpdated, reconcile.Delete: EventDeleted}[done[i]]
		if first == nil {
			first, reason = &actions[i], r
		} else if r != reason {
			reason = EventReconciled
		}
		written = append(written, r+" "+a.Kind+" "+a.Object.GetName())
	}
	if first != nil {
		// The first child is the related object: events.k8s.io folds events with the same
		// (regarding, related, reason, action) into one series, which would hide a later one.
		c.recorder.Eventf(isvc, first.Object, corev1.EventTypeNormal, reason, actionName(first.Verb), "%s", strings.Join(written, "; "))
	}
	return conflicts, errors.Join(errs...)
}

// deploymentApplied reports whether the actions that wait for the Deployment may go: its
// action, if any, succeeded (a create that found our own Deployment succeeded too).
func deploymentApplied(actions []reconcile.Action, results []error) bool {
	for i, a := range actions {
		if a.Kind == "Deployment" && results[i] != nil {
			return false
		}
	}
	return true
}

func actionName(v reconcile.Verb) string {
	switch v {
	case reconcile.Create:
		return "Create"
	case reconcile.Update:
		return "Update"
	default:
		return "Delete"
	}
}

// apply performs one action and returns what it wrote ("" for nothing). Updates carry the
// resourceVersion read from the cache; on a conflict the live object is re-read from the API
// server and the owned fields re-applied.
func (c *Controller) apply(ctx context.Context, a reconcile.Action) (reconcile.Verb, error) {
	switch a.Verb {
	case reconcile.Create:
		if c.namesakes.seen(a) {
			// A create found someone else's namesake before: read it rather than fail
			// another create on every retry and resync; create once it is gone.
			if verb, err := c.update(ctx, a, true); !apierrors.IsNotFound(err) {
				return verb, err
			}
			c.namesakes.forget(a)
		}
		_, err := c.write(ctx, reconcile.Create, a.Object)
		if !apierrors.IsAlreadyExists(err) {
			return reconcile.Create, err
		}
		// Not in the label-scoped cache: someone else's namesake, or ours with its labels
		// changed (a relabel drops it from the cache). Ownership is the controller reference:
		// ours gets its owned fields, labels included, back, and so returns to the cache.
		return c.update(ctx, a, true)
	case reconcile.Delete:
		uid, rv := a.Object.GetUID(), a.Object.GetResourceVersion()
		err := c.delete(ctx, a.Object, &metav1.Preconditions{UID: &uid, ResourceVersion: &rv})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return reconcile.Delete, err
	}
	return c.update(ctx, a, false)
}

// update writes the action's owned fields. From the cache it sends a patch from the cached
// base; after a conflict, or when read says the cache does not hold the object, it reads the
// live object, checks it is ours and re-merges, and writes nothing when nothing differs.
func (c *Controller) update(ctx context.Context, a reconcile.Action, read bool) (reconcile.Verb, error) {
	obj, base := a.Object, a.Base
	wrote := reconcile.Verb("")
	attempt := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempt++; attempt > 1 {
			c.metrics.ConflictRetry(a.Kind)
			read = true
		}
		if read {
			live, err := c.get(ctx, a.Object)
			if err != nil {
				return err
			}
			if !reconcile.SameController(live, a.Object) {
				if a.Verb == reconcile.Create {
					c.namesakes.add(a)
				}
				return &conflictError{reconcile.ConflictMessage(a.Kind, live)}
			}
			c.namesakes.forget(a)
			var changed bool
			if obj, changed = reconcile.Remerge(live, a); !changed {
				return nil // someone (an earlier reconcile) already wrote it
			}
			base = nil // the object read back is whole
		}
		var err error
		if base != nil {
			err = c.patch(ctx, base, obj)
		} else {
			_, err = c.write(ctx, reconcile.Update, obj)
		}
		if err == nil {
			wrote = reconcile.Update
		}
		return err
	})
	return wrote, err
}

// patch sends the difference between base (a cached, partial copy of the live object) and obj
// (base with the owned fields set) as a strategic merge patch carrying obj's resourceVersion:
// a conflict, like an Update's, when the object changed since it was cached.
func (c *Controller) patch(ctx context.Context, base, obj reconcile.Child) error {
	data, err := reconcile.OwnedPatch(base, obj)
	if err != nil {
		return err
	}
	cl, err := c.clientFor(obj)
	if err != nil {
		return err
	}
	return cl.patch(ctx, obj.GetName(), data)
}

func (c *Controller) write(ctx context.Context, v reconcile.Verb, obj reconcile.Child) (reconcile.Child, error) {
	cl, err := c.clientFor(obj)
	if err != nil {
		return nil, err
	}
	if v == reconcile.Create {
		return cl.create(ctx, obj)
	}
	return cl.update(ctx, obj)
}

func (c *Controller) get(ctx context.Context, obj reconcile.Child) (reconcile.Child, error) {
	cl, err := c.clientFor(obj)
	if err != nil {
		return nil, err
	}
	return cl.get(ctx, obj.GetName())
}

func (c *Controller) delete(ctx context.Context, obj reconcile.Child, pre *metav1.Preconditions) error {
	cl, err := c.clientFor(obj)
	if err != nil {
		return err
	}
	return cl.delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: pre})
}

// clientFor picks the namespaced client of a child's kind.
func (c *Controller) clientFor(obj reconcile.Child) (childClient, error) {
	ns := obj.GetNamespace()
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return typed[*appsv1.Deployment]{c.kube.AppsV1().Deployments(ns)}, nil
	case *corev1.Service:
		return typed[*corev1.Service]{c.kube.CoreV1().Services(ns)}, nil
	case *autoscalingv2.HorizontalPodAutoscaler:
		return typed[*autoscalingv2.HorizontalPodAutoscaler]{c.kube.AutoscalingV2().HorizontalPodAutoscalers(ns)}, nil
	case *corev1.ConfigMap:
		return typed[*corev1.ConfigMap]{c.kube.CoreV1().ConfigMaps(ns)}, nil
	case *policyv1.PodDisruptionBudget:
		return typed[*policyv1.PodDisruptionBudget]{c.kube.PolicyV1().PodDisruptionBudgets(ns)}, nil
	case *unstructured.Unstructured:
		if gvr, ok := reconcile.GVROfKind(o.GetKind()); ok {
			return typed[*unstructured.Unstructured]{dynamicClient{c.dyn.Resource(gvr).Namespace(ns)}}, nil
		}
	}
	return nil, fmt.Errorf("unsupported child %T %s", obj, obj.GetObjectKind().GroupVersionKind().Kind)
}

// childClient is one kind's client, seen through Child.
type childClient interface {
	create(ctx context.Context, obj reconcile.Child) (reconcile.Child, error)
	update(ctx context.Context, obj reconcile.Child) (reconcile.Child, error)
	patch(ctx context.Context, name string, data []byte) error
	get(ctx context.Context, name string) (reconcile.Child, error)
	delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// typedClient is the method set client-go's typed clients share.
type typedClient[T reconcile.Child] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

type typed[T reconcile.Child] struct{ c typedClient[T] }

func (t typed[T]) create(ctx context.Context, obj reconcile.Child) (reconcile.Child, error) {
	return t.c.Create(ctx, obj.(T), metav1.CreateOptions{FieldManager: FieldManager})
}

func (t typed[T]) update(ctx context.Context, obj reconcile.Child) (reconcile.Child, error) {
	return t.c.Update(ctx, obj.(T), metav1.UpdateOptions{FieldManager: FieldManager})
}

// patch sends a strategic merge patch: only typed children carry an Action.Base (custom
// resources have no strategic merge and are updated whole), so no other type reaches it.
func (t typed[T]) patch(ctx context.Context, name string, data []byte) error {
	_, err := t.c.Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

func (t typed[T]) get(ctx context.Context, name string) (reconcile.Child, error) {
	return t.c.Get(ctx, name, metav1.GetOptions{})
}

func (t typed[T]) delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return t.c.Delete(ctx, name, opts)
}

// dynamicClient drops the dynamic client's subresource arguments to fit typedClient.
type dynamicClient struct{ r dynamic.ResourceInterface }

func (d dynamicClient) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error) {
	return d.r.Create(ctx, obj, opts)
}

func (d dynamicClient) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return d.r.Update(ctx, obj, opts)
}

func (d dynamicClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	return d.r.Patch(ctx, name, pt, data, opts, sub...)
}

func (d dynamicClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error) {
	return d.r.Get(ctx, name, opts)
}

func (d dynamicClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return d.r.Delete(ctx, name, opts)
}

// writeStatus writes st through the status subresource when it differs from what is stored,
// and emits one Warning Event when a new blocking reason appears. v1beta1's additions (ext)
// are written only when the operator watches v1beta1: v1alpha1 cannot hold them.
func (c *Controller) writeStatus(ctx context.Context, isvc *crd.InferenceService, st *crd.InferenceServiceStatus, stored, ext *crd.StatusExtensions) error {
	v1beta1 := c.version == crd.VersionV1beta1
	if !reconcile.WorthWriting(&isvc.Status, st) && (!v1beta1 || reconcile.ExtensionsEqual(stored, ext)) {
		return nil
	}
	c.warnOnNewReason(isvc, st)
	var m map[string]interface{}
	var err error
	if v1beta1 {
		m, err = crd.StatusToUnstructuredV1beta1(st, ext)
	} else {
		m, err = crd.StatusToUnstructured(st)
	}
	if err != nil {
		return err
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
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			c.metrics.ConflictRetry("InferenceService/status")
			latest, err := c.isvcs.Namespace(isvc.Namespace).Get(ctx, isvc.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if latest.GetGeneration() != isvc.Generation || latest.GetUID() != isvc.UID {
				return nil // the spec moved on; its own event will reconcile and write status
			}
			_ = unstructured.SetNestedField(obj.Object, latest.GetResourceVersion(), "metadata", "resourceVersion")
		}
		first = false
		_, err := c.isvcs.Namespace(isvc.Namespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// warnOnNewReason emits one Warning Event when a new blocking reason appears; a message that
// only changes (a restart count growing) is not a new cause.
func (c *Controller) warnOnNewReason(isvc *crd.InferenceService, st *crd.InferenceServiceStatus) {
	nc := meta.FindStatusCondition(st.Conditions, crd.ConditionReady)
	if nc == nil || nc.Status == metav1.ConditionTrue || !reconcile.IsWarning(nc.Reason) {
		return
	}
	if oc := meta.FindStatusCondition(isvc.Status.Conditions, crd.ConditionReady); oc != nil && oc.Reason == nc.Reason {
		return
	}
	c.recorder.Eventf(isvc, nil, corev1.EventTypeWarning, nc.Reason, "Reconcile", "%s", nc.Message)
}

// failPermanently reports an error retrying cannot fix, in status and an Event, and tells the
// queue to stop retrying until the object changes.
func (c *Controller) failPermanently(ctx context.Context, isvc *crd.InferenceService, now metav1.Time, reason string, cause error) error {
	st := isvc.Status
	st.ObservedGeneration = isvc.Generation
	st = reconcile.WithCauses(st, isvc, []reconcile.Cause{{Rank: reconcile.RankSpec, Reason: reason, Message: cause.Error()}}, now)
	_, stored, _ := crd.ExtensionsOf(isvc)
	if err := c.writeStatus(ctx, isvc, &st, &stored, &stored); err != nil {
		return err
	}
	return queue.Permanent(cause)
}

func hasFinalizer(u metav1.Object) bool { return slices.Contains(u.GetFinalizers(), Finalizer) }

// patchFinalizers sets the finalizer list with the resourceVersion as a precondition, so a
// concurrent change is never overwritten.
func (c *Controller) patchFinalizers(ctx context.Context, u metav1.Object, finalizers []string) error {
	patch, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"finalizers": finalizers, "resourceVersion": u.GetResourceVersion()},
	})
	if err != nil {
		return err
	}
	_, err = c.isvcs.Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

func (c *Controller) ensureFinalizer(ctx context.Context, isvc *crd.InferenceService) error {
	if c.gateway == nil || hasFinalizer(isvc) {
		return nil
	}
	return c.patchFinalizers(ctx, isvc, append(slices.Clone(isvc.Finalizers), Finalizer))
}

// register registers the route once per generation; it returns the new GatewayRegistered
// condition, or nil when nothing changed.
func (c *Controller) register(ctx context.Context, isvc *crd.InferenceService, ext *crd.SpecExtensions, now metav1.Time) (*metav1.Condition, error) {
	if c.gateway == nil {
		return nil, nil
	}
	if cond := meta.FindStatusCondition(isvc.Status.Conditions, crd.ConditionGatewayRegistered); cond != nil &&
		cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == isvc.Generation {
		return nil, nil
	}
	r := reconcile.RouteOf(isvc, ext)
	cond := &metav1.Condition{Type: crd.ConditionGatewayRegistered, ObservedGeneration: isvc.Generation, LastTransitionTime: now}
	if err := c.gateway.Register(ctx, r); err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reconcile.ReasonGatewayUnavailable, err.Error()
		return cond, fmt.Errorf("registering route: %w", err)
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, reconcile.ReasonRegistered
	cond.Message = fmt.Sprintf("route %s (%s/%s) -> Service %s port %d registered", r.Path, r.Namespace, r.Name, r.Service, r.Port)
	c.recorder.Eventf(isvc, nil, corev1.EventTypeNormal, EventRegistered, "Register", "%s", cond.Message)
	return cond, nil
}

// finalize deregisters the route, then removes the finalizer; children go with the garbage
// collector through their ownerReferences. A deregistration that keeps failing holds the
// isvc, except when its namespace is being deleted (the finalizer would hold the namespace
// forever) or after --gateway-deregister-timeout: the route is then abandoned, counted and
// reported, and the finalizer released.
func (c *Controller) finalize(ctx context.Context, isvc *crd.InferenceService, now metav1.Time) error {
	if !hasFinalizer(isvc) {
		return nil
	}
	abandoned := ""
	if c.gateway != nil {
		ext, stored, _ := crd.ExtensionsOf(isvc)
		r := reconcile.RouteOf(isvc, &ext)
		if err := c.gateway.Deregister(ctx, r); err != nil {
			why := c.abandonRoute(ctx, isvc, now.Time)
			if why == "" {
				err = fmt.Errorf("deleting: deregistering the gateway route failed, retrying: %w", err)
				st := reconcile.WithCauses(isvc.Status, isvc, []reconcile.Cause{{Rank: reconcile.RankAPI, Reason: reconcile.ReasonGatewayUnavailable, Message: err.Error()}}, now)
				st.Phase = crd.PhaseTerminating
				return errors.Join(err, c.writeStatus(ctx, isvc, &st, &stored, &stored))
			}
			abandoned = fmt.Sprintf("route %s may be left on the gateway: %s; deregistration failed: %v", r.Path, why, err)
		} else {
			c.recorder.Eventf(isvc, nil, corev1.EventTypeNormal, EventDeregistered, "Deregister", "route %s/%s deregistered", isvc.Namespace, isvc.Name)
		}
	}
	// Remove the finalizer even if the cached object is stale, re-reading on a conflict, so
	// the gateway is not called twice for one deletion. Only the reconcile that removed it
	// reports an abandoned route: a stale cache may run this more than once.
	var latest metav1.Object = isvc
	removed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !hasFinalizer(latest) {
			return nil // an earlier reconcile removed it
		}
		remaining := slices.DeleteFunc(slices.Clone(latest.GetFinalizers()), func(f string) bool { return f == Finalizer })
		err := c.patchFinalizers(ctx, latest, remaining)
		if apierrors.IsConflict(err) {
			c.metrics.ConflictRetry("InferenceService/finalizers")
			fresh, gerr := c.isvcs.Namespace(isvc.Namespace).Get(ctx, isvc.Name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			latest = fresh
		}
		removed = err == nil
		return err
	})
	if removed && abandoned != "" {
		c.metrics.RouteAbandoned()
		// In a terminating namespace the API server refuses the Event: the log line and the
		// metric are what remains.
		klog.InfoS("Released the finalizer without deregistering the gateway route", "isvc", klog.KObj(isvc), "reason", abandoned)
		c.recorder.Eventf(isvc, nil, corev1.EventTypeWarning, EventRouteAbandoned, "Deregister", "%s", abandoned)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// observeMetrics hands the figures of one reconcile to metrics.
func (c *Controller) observeMetrics(isvc *crd.InferenceService, st *crd.InferenceServiceStatus, obs reconcile.Observed) {
	g := int64(isvc.Spec.GPUs())
	var bound, ready int64
	for _, p := range obs.Pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName != "" {
			bound++
		}
		if podReady(p) {
			ready++
		}
	}
	desired := int64(isvc.Spec.Replicas)
	if d := obs.Deployment; d != nil && reconcile.ControlledBy(d, isvc) {
		desired = int64(ptr.Deref(d.Spec.Replicas, isvc.Spec.Replicas)) // what the HPA chose
	}
	c.metrics.ObserveInferenceService(metrics.Snapshot{
		Namespace: isvc.Namespace, Name: isvc.Name, Model: isvc.Spec.Model, Phase: string(st.Phase),
		DesiredReplicas: isvc.Spec.Replicas, ReadyReplicas: st.ReadyReplicas,
		GPUsRequested: desired * g, GPUsAllocated: bound * g, GPUsReady: ready * g,
		GPUsPending: max(0, desired-bound) * g,
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
