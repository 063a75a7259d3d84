// The sync pipeline, the queue's handler: read the caches and, in one call, the evidence beyond
// them (package evidence), decide with reconcile.Reconcile, apply, then leave the status to the
// status-write policy (status.go).

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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/metrics"
	"github.com/example/inferenceservice-operator/queue"
)

// sync is the queue's handler: read from the caches and the evidence, decide with the pure
// Reconcile, apply, write status only when it changed. It returns what the queue should do next, or the error
// the queue retries with backoff.
func (c *Controller) sync(ctx context.Context, key queue.Key) (queue.Outcome, error) {
	obj, ok, err := c.caches.InferenceService(key.Namespace, key.Name)
	if err != nil {
		return queue.Done(), err
	}
	if !ok {
		c.forget(key)
		// Gone: if it was the namespace's last model through the activator, so is the grant.
		return queue.Done(), c.sweepActivatorGrant(ctx, key.Namespace)
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
	// Children just created that the caches have not shown: deciding now would create them
	// again and write the status of a model without them. Their events bring the key back.
	if wait, ok := c.memory.expected().unmet(key, c.now()); ok {
		return queue.After(wait), nil
	}
	ext, storedExt, extErr := crd.ExtensionsOf(isvc)
	if err := crd.ValidateDecoded(isvc, &ext, extErr); err != nil {
		return queue.Done(), c.failPermanently(ctx, isvc, now, reconcile.ReasonInvalidSpec, err)
	}
	if err := c.ensureFinalizer(ctx, isvc); err != nil {
		return queue.Done(), err
	}

	obs, err := c.observe(isvc)
	if err == nil {
		err = c.observeRoutes(&obs, isvc, &ext)
	}
	if err != nil {
		return queue.Done(), err
	}
	if obs.Weights, err = c.observeWeights(ctx, isvc, &ext); err != nil {
		return queue.Done(), err
	}
	obs.Nodes = c.caches.TroubledNodes()
	obs.MetricsAPI = c.caches.MetricsAPI()
	ev, evidenceWait := c.evidence.Read(ctx, key, reconcile.Input{ISVC: isvc, Ext: ext, Observed: obs, Now: now, Features: c.features})
	ev.AddTo(&obs)
	obs.StoredLastStart = storedExt.LastStart
	adapters := c.observeAdapters(ctx, key, isvc, &ext, &storedExt, obs)
	in := reconcile.Input{ISVC: isvc, Ext: ext, Observed: obs, Now: now, Features: c.features, Adapters: adapters}
	out := reconcile.Reconcile(in)

	conflicts, applyErr := c.applyAll(ctx, isvc, out.Actions)
	applyErr = errors.Join(applyErr, c.applyWeights(ctx, isvc, out.Weights))
	// A call made shows on the pods' next /v1/models; steps waiting for their back-off are
	// looked at again when it ends.
	called, failed, adapterWait := c.applyAdapterSteps(ctx, key, adapters, out.AdapterSteps)
	if called > 0 {
		adapterWait = recheckAfterActing
	}
	// A gate written changes the pod, whose event syncs again; a failed write is retried then.
	_, gateErr := c.applyAdapterGates(ctx, out.AdapterGates, now)
	applyErr = errors.Join(applyErr, gateErr)
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
		st = reconcile.WithCauses(reconcile.ObservedStatus(in), isvc, append(out.Causes, extra...), now)
	}
	switch {
	case c.gateway == nil:
		meta.RemoveStatusCondition(&st.Conditions, crd.ConditionGatewayRegistered)
	case regCond != nil:
		meta.SetStatusCondition(&st.Conditions, *regCond)
	}

	c.observeMetrics(isvc, &ext, &st, obs)
	settled := len(extra) == 0 && regCond == nil
	if (len(out.Actions) > 0 || called > 0 && failed == 0) && settled {
		// The children's own events reconcile again within moments and write the status the
		// actions led to; writing the intermediate one as well would double the writes per
		// change. The recheck covers an action whose event never comes, and observes the
		// adapter calls' effect, which no event announces.
		return withDiagnosisRecheck(queue.After(recheckAfterActing), out.Recheck), nil
	}
	// A registration's outcome is never held: it is stored only in status, and is read back to
	// register once per generation.
	if settled && reconcile.WorthWriting(&isvc.Status, &st) {
		if held, next := c.deferStatus(key, isvc, &st, reconcile.Unobserved(in)); held {
			return withDiagnosisRecheck(next, soonest(out.Recheck, adapterWait, evidenceWait)), nil
		}
	}
	c.memory.holds().release(key)
	echoWait, err := c.writeStatus(ctx, isvc, &st, &storedExt, &out.StatusExt)
	if err != nil {
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
	return withDiagnosisRecheck(queue.Done(), soonest(out.Recheck, adapterWait, evidenceWait, echoWait)), nil
}

const recheckAfterActing = 2 * time.Second

// forget drops all the controller keeps of a deleted isvc: its memory, the evidence read for
// it and its metrics' series.
func (c *Controller) forget(key queue.Key) {
	c.memory.forget(key)
	c.evidence.Forget(key)
	c.metrics.ForgetInferenceService(key.Namespace, key.Name)
}

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
	}{
		{c.features.ServiceMonitors, reconcile.ServiceMonitorGVR, &obs.ServiceMonitor},
		{c.features.HTTPRoutes, reconcile.HTTPRouteGVR, &obs.HTTPRoute},
		{c.features.ScaledObjects, reconcile.ScaledObjectGVR, &obs.ScaledObject},
		{c.features.LeaderWorkerSets, reconcile.LeaderWorkerSetGVR, &obs.LeaderWorkerSet},
		{c.features.PoolServed, reconcile.InferencePoolGVR, &obs.InferencePool},
	} {
		if !o.on {
			continue
		}
		if *o.into, ok, err = c.caches.Optional(o.gvr, ns, name); err != nil {
			return obs, err
		} else if !ok {
			*o.into = nil
		}
	}
	if c.features.NetworkPolicies {
		if obs.NetworkPolicy, ok, err = c.caches.Optional(reconcile.NetworkPolicyGVR, ns, name); err != nil {
			return obs, err
		} else if !ok {
			obs.NetworkPolicy = nil
		}
		if obs.PickerNetworkPolicy, ok, err = c.caches.Optional(reconcile.NetworkPolicyGVR, ns, reconcile.PickerName(name)); err != nil {
			return obs, err
		} else if !ok {
			obs.PickerNetworkPolicy = nil
		}
	}
	if f := c.features; f.ReferenceGrants && f.Activator.Name != "" {
		if obs.ActivatorGrant, ok, err = c.caches.Optional(reconcile.ReferenceGrantGVR, f.Activator.Namespace, reconcile.ActivatorGrantName(ns)); err != nil {
			return obs, err
		} else if !ok {
			obs.ActivatorGrant = nil
		}
	}
	if err := c.observePicker(&obs, ns, name); err != nil {
		return obs, err
	}
	if obs.ReplicaSets, err = c.caches.ReplicaSets(ns, name); err != nil {
		return obs, err
	}
	if obs.Pods, err = c.caches.Pods(ns, name); err != nil || !c.features.KueueWorkloads {
		return obs, err
	}
	// A queued model's Workloads, admitted ones too (their ClusterQueue); else the gated pods'.
	var uids []types.UID
	for _, p := range obs.Pods {
		if isvc.Spec.QueueName != "" {
			uids = append(uids, p.UID)
			continue
		}
		for _, g := range p.Spec.SchedulingGates {
			if g.Name == reconcile.KueueGate {
				uids = append(uids, p.UID)
			}
		}
	}
	if len(uids) > 0 {
		obs.Workloads = c.caches.Workloads(ns, uids)
	}
	if c.features.KueueClusterQueues {
		for _, w := range obs.Workloads {
			if cq, ok := c.caches.ClusterQueue(w.ClusterQueue); ok {
				if obs.ClusterQueues == nil {
					obs.ClusterQueues = map[string]kinds.ClusterQueue{}
				}
				obs.ClusterQueues[cq.Name] = cq
			}
		}
	}
	return obs, nil
}

// observePicker reads the pool route's picker objects: its Deployment and Service from the
// typed caches (which hold them whatever the features, so a switch back to the Service route
// finds them to delete), its ServiceAccount and RoleBinding where the route's kinds are watched.
func (c *Controller) observePicker(obs *reconcile.Observed, ns, name string) error {
	picker := reconcile.PickerName(name)
	var ok bool
	var err error
	if obs.Picker, ok, err = c.caches.Deployment(ns, picker); err != nil {
		return err
	} else if !ok || !reconcile.IsPicker(obs.Picker) {
		obs.Picker = nil // absent, or another model's Deployment of that name: not a picker
	}
	if obs.PickerService, ok, err = c.caches.Service(ns, picker); err != nil {
		return err
	} else if !ok || !reconcile.IsPicker(obs.PickerService) {
		obs.PickerService = nil
	}
	if !c.features.HTTPRoutes {
		return nil
	}
	if obs.PickerServiceAccount, ok, err = c.caches.Optional(reconcile.ServiceAccountGVR, ns, picker); err != nil {
		return err
	} else if !ok {
		obs.PickerServiceAccount = nil
	}
	if obs.PickerRoleBinding, ok, err = c.caches.Optional(reconcile.RoleBindingGVR, ns, picker); err != nil {
		return err
	} else if !ok {
		obs.PickerRoleBinding = nil
	}
	// The pool's gateway policies (gatewaypolicy.go): the DestinationRule is named as the
	// picker, the HealthCheckPolicy as the pool it targets.
	for _, o := range []struct {
		on   bool
		gvr  schema.GroupVersionResource
		name string
		into **unstructured.Unstructured
	}{
		{c.features.DestinationRules, reconcile.DestinationRuleGVR, picker, &obs.DestinationRule},
		{c.features.HealthCheckPolicies, reconcile.HealthCheckPolicyGVR, name, &obs.HealthCheckPolicy},
	} {
		if !o.on {
			continue
		}
		if *o.into, ok, err = c.caches.Optional(o.gvr, ns, o.name); err != nil {
			return err
		} else if !ok {
			*o.into = nil
		}
	}
	return nil
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

// observeMetrics hands the figures of one reconcile to metrics.
func (c *Controller) observeMetrics(isvc *crd.InferenceService, ext *crd.SpecExtensions, st *crd.InferenceServiceStatus, obs reconcile.Observed) {
	g := int64(reconcile.GPUsPerPod(isvc, ext))
	var bound, ready, gated, admitted int64
	for _, p := range obs.Pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName != "" {
			bound++
		}
		if len(p.Spec.SchedulingGates) > 0 {
			gated++
		} else {
			admitted++
		}
		if reconcile.PodReady(p) {
			ready++
		}
	}
	desired := reconcile.DesiredPods(isvc, ext, obs) // what the HPA chose; a group's every pod
	snap := metrics.Snapshot{
		Namespace: isvc.Namespace, Name: isvc.Name, Model: isvc.Spec.Model, Phase: string(st.Phase),
		DesiredReplicas: isvc.Spec.Replicas, ReadyReplicas: st.ReadyReplicas,
		GPUsRequested: desired * g, GPUsAllocated: bound * g, GPUsReady: ready * g,
		GPUsPending: max(0, desired-bound) * g, GPUsPendingAdmission: gated * g, GPUsAdmitted: admitted * g,
	}
	if a := meta.FindStatusCondition(st.Conditions, crd.ConditionAutoscalingActive); a != nil {
		snap.AutoscalingStatus, snap.AutoscalingReason = string(a.Status), a.Reason
	}
	c.metrics.ObserveInferenceService(snap)
}
