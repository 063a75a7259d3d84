// Reading one InferenceService's world from the caches for its sync: its children (observe,
// the endpoint picker's), and the per-model metrics each sync reports (observeMetrics).

package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/metrics"
)

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
