// Which way a model's gateway traffic goes, and the Routed condition that says so: through the
// pool's endpoint picker once it serves, through the Service before that and where the cluster
// serves no InferencePool API.

package reconcile

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
)

// decidePool creates, corrects and deletes the pool route's children. A RoleBinding whose role
// changed is deleted (roleRef is immutable) and made anew on the next pass. The RoleBinding
// names its ServiceAccount by name, so it is made only while the ServiceAccount of that name
// is the one this model controls (by UID): a namesake someone made before the model, or after
// ours was deleted, is reported as a conflict and never bound (ours, if any, is deleted).
func decidePool(out *Output, in Input, want poolChildren) {
	isvc, obs := in.ISVC, in.Observed
	if sa := obs.PickerServiceAccount; sa == nil || !ControlledBy(sa, isvc) {
		want.RoleBinding = nil
	}
	if in.Features.InferencePools || obs.InferencePool != nil {
		if live := obs.InferencePool; decideChild(out, isvc, KindInferencePool, live, want.Pool, live == nil, want.Pool == nil) && poolDrifted(live, want.Pool) {
			upd := live.DeepCopy()
			setUnstructured(upd, want.Pool)
			out.add(Update, KindInferencePool, upd)
		}
	}
	if live := obs.Picker; decideChild(out, isvc, KindPicker, live, want.Picker, live == nil, want.Picker == nil) && pickerDrifted(live, want.Picker) {
		upd := live.DeepCopy()
		setPicker(upd, want.Picker)
		out.update(KindPicker, upd, live)
	}
	if live := obs.PickerService; decideChild(out, isvc, KindPickerService, live, want.PickerService, live == nil, want.PickerService == nil) && pickerServiceDrifted(live, want.PickerService) {
		upd := live.DeepCopy()
		setPickerService(upd, want.PickerService)
		out.update(KindPickerService, upd, live)
	}
	for _, o := range []struct {
		kind       string
		live, want *unstructured.Unstructured
	}{
		{KindPickerServiceAccess, obs.PickerServiceAccount, want.ServiceAccount},
		{KindPickerRoleBinding, obs.PickerRoleBinding, want.RoleBinding},
	} {
		if !decideChild(out, isvc, o.kind, o.live, o.want, o.live == nil, o.want == nil) {
			continue
		}
		if o.kind == KindPickerRoleBinding && roleRefChanged(o.live, o.want) {
			out.add(Delete, o.kind, o.live)
			continue
		}
		if identityDrifted(o.live, o.want) {
			upd := o.live.DeepCopy()
			setIdentity(upd, o.want)
			out.add(Update, o.kind, upd)
		}
	}
}

// pickerServes reports whether the model's picker can take requests: our pool, Service and
// Deployment exist and the Deployment has an available replica (its readiness probe is the
// picker's gRPC health, SERVING once it has read its pool).
func pickerServes(in Input) bool {
	isvc, obs := in.ISVC, in.Observed
	return obs.InferencePool != nil && ControlledBy(obs.InferencePool, isvc) &&
		obs.PickerService != nil && ControlledBy(obs.PickerService, isvc) &&
		obs.Picker != nil && ControlledBy(obs.Picker, isvc) && obs.Picker.Status.AvailableReplicas > 0
}

// withPoolBackend is the route with every rule's backend the model's InferencePool: the
// extension's HTTPRoute form (group and kind, no port: the pool's targetPorts say it).
func withPoolBackend(r *unstructured.Unstructured, pool string) *unstructured.Unstructured {
	out := r.DeepCopy()
	rules, _, _ := unstructured.NestedSlice(out.Object, "spec", "rules")
	for _, rule := range rules {
		rule.(map[string]interface{})["backendRefs"] = []interface{}{map[string]interface{}{
			"group": InferencePoolGVR.Group, "kind": KindInferencePool, "name": pool, "weight": int64(1),
		}}
	}
	_ = unstructured.SetNestedSlice(out.Object, rules, "spec", "rules")
	return out
}

// routed is the Routed condition: present while the model has an HTTPRoute.
type routed struct {
	present bool
	status  metav1.ConditionStatus
	reason  string
	message string
}

// withConflict says a route conflict on the condition: whatever the Gateway accepted, a
// request for the path may reach another model.
func (r routed) withConflict(c *Cause) routed {
	if !r.present || c == nil {
		return r
	}
	return routed{true, metav1.ConditionFalse, ReasonRouteConflict, c.Message}
}

func (r routed) set(st *crd.InferenceServiceStatus, isvc *crd.InferenceService, now metav1.Time) {
	setOptionalCondition(st, r.present, metav1.Condition{Type: crd.ConditionRouted, Status: r.status, Reason: r.reason, Message: r.message,
		ObservedGeneration: isvc.Generation, LastTransitionTime: now})
}

// decideRouted reads the route layer from the caches: the HTTPRoute accepted by its Gateway,
// and with the pool route the pool accepted, its picker ready and its ready pods. It says only
// what the objects' statuses say: which pod a request reaches is the picker's choice.
func decideRouted(in Input, wantRoute *unstructured.Unstructured, pool poolChildren, activated bool) routed {
	isvc, obs, f := in.ISVC, in.Observed, in.Features
	if wantRoute == nil {
		return routed{}
	}
	parent := f.GatewayParent.Namespace + "/" + f.GatewayParent.Name
	key := isvc.Namespace + "/" + isvc.Name
	r := obs.HTTPRoute
	if r == nil || !ControlledBy(r, isvc) || !routeAccepted(r, f.GatewayParent) {
		return routed{true, metav1.ConditionFalse, ReasonRouteNotAccepted,
			fmt.Sprintf("Gateway %s has not accepted HTTPRoute %s (no Accepted condition for its generation): no request reaches the model through it", parent, key)}
	}
	if ok, msg := routeRefsResolved(r, f.GatewayParent); !ok {
		return routed{true, metav1.ConditionFalse, ReasonRouteRefsUnresolved, "HTTPRoute " + key + ": " + msg}
	}
	if activated {
		return routed{true, metav1.ConditionTrue, ReasonActivatorRoute, "HTTPRoute " + key + " on Gateway " + parent + " sends requests to the activator " + f.Activator.String() +
			", which holds them while the model is at zero and forwards them to its ready pods (spec.autoscaling.minReplicas 0)"}
	}
	if pool.Pool == nil && pool.NoPicker != "" {
		return routed{true, metav1.ConditionTrue, ReasonServiceRoute, "HTTPRoute " + key + " on Gateway " + parent + " sends requests to Service " + key +
			": " + pool.NoPicker}
	}
	if pool.Pool == nil {
		why := "this cluster serves no InferencePool API (" + InferencePoolGVR.GroupVersion().String() + ")"
		if !f.PoolServed {
			return routed{true, metav1.ConditionTrue, ReasonServiceRoute, "HTTPRoute " + key + " on Gateway " + parent + " sends requests to Service " + key +
				": " + why + ", so requests are spread by the Service, not by each server's queue, KV cache, prefix cache or adapters"}
		}
		return routed{true, metav1.ConditionTrue, ReasonServiceRoute, "HTTPRoute " + key + " on Gateway " + parent + " sends requests to Service " + key +
			" (--inference-pool=off)"}
	}
	picker := isvc.Namespace + "/" + PickerName(isvc.Name)
	if !pickerServes(in) {
		return routed{true, metav1.ConditionFalse, ReasonPickerUnavailable, "endpoint picker " + picker + " " + pickerState(obs.Picker, isvc) +
			"; HTTPRoute " + key + " sends requests to Service " + key + " until it is"}
	}
	if ok, msg := poolAccepted(obs.InferencePool, f.GatewayParent); !ok {
		return routed{true, metav1.ConditionFalse, ReasonPoolNotAccepted, "InferencePool " + key + ": " + msg}
	}
	if ok, msg := gatewayPoliciesInPlace(in); !ok {
		return routed{true, metav1.ConditionFalse, ReasonGatewayPolicyPending, msg}
	}
	ready, total := poolPods(obs.Pods, poolSelector(isvc, &in.Ext))
	if ready == 0 {
		return routed{true, metav1.ConditionFalse, ReasonNoPoolEndpoints, fmt.Sprintf("InferencePool %s selects no ready pod (%d selected): its picker has no endpoint to choose, and the gateway answers 503 (failureMode FailClose)", key, total)}
	}
	return routed{true, metav1.ConditionTrue, ReasonPoolRoute, fmt.Sprintf("HTTPRoute %s on Gateway %s sends requests to InferencePool %s; endpoint picker %s ready; %d of %d pods ready in the pool",
		key, parent, key, picker, ready, total)}
}

func pickerState(d *appsv1.Deployment, isvc *crd.InferenceService) string {
	switch {
	case d == nil:
		return "is not created yet"
	case !ControlledBy(d, isvc):
		return "is someone else's Deployment"
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return "has " + strconv.Itoa(int(d.Status.AvailableReplicas)) + " of " + strconv.Itoa(int(want)) + " replicas available (its readiness is the picker's gRPC health, SERVING once it has read its pool)"
}

// poolAccepted reads the pool's status as the Gateway wrote it: the parent's Accepted and
// ResolvedRefs conditions (the latter False when the picker's Service cannot be resolved).
func poolAccepted(pool *unstructured.Unstructured, parent types.NamespacedName) (bool, string) {
	for _, conds := range parentConditions(pool, parent) {
		accepted := false
		for _, cm := range conds {
			status, _ := cm["status"].(string)
			reason, _ := cm["reason"].(string)
			msg, _ := cm["message"].(string)
			switch cm["type"] {
			case "Accepted":
				if status != "True" {
					return false, "Gateway " + parent.String() + " did not accept it: " + reason + ": " + msg
				}
				accepted = true
			case "ResolvedRefs":
				if status != "True" {
					return false, "Gateway " + parent.String() + " cannot resolve its picker: " + reason + ": " + msg
				}
			}
		}
		if accepted {
			return true, ""
		}
	}
	return false, "Gateway " + parent.String() + " has not accepted it yet (no Accepted condition in its status)"
}

// routeRefsResolved reads the route's ResolvedRefs condition from parent for the route's
// generation: False says which backend cannot be used; absent, the gateway has not said yet.
func routeRefsResolved(r *unstructured.Unstructured, parent types.NamespacedName) (bool, string) {
	for _, conds := range parentConditions(r, parent) {
		for _, cm := range conds {
			if cm["type"] != "ResolvedRefs" {
				continue
			}
			if gen, found, _ := unstructured.NestedInt64(cm, "observedGeneration"); found && gen != r.GetGeneration() {
				continue
			}
			reason, _ := cm["reason"].(string)
			msg, _ := cm["message"].(string)
			if cm["status"] != "True" {
				return false, "Gateway " + parent.String() + " cannot resolve its backends: " + reason + ": " + msg
			}
			return true, ""
		}
	}
	return false, "Gateway " + parent.String() + " has not said it resolved its backends (no ResolvedRefs condition for its generation)"
}

// poolPods counts the pods the pool's selector matches, and the ready ones among them.
func poolPods(pods []*corev1.Pod, sel map[string]string) (ready, total int) {
	s := labels.SelectorFromSet(sel)
	for _, p := range pods {
		if p.DeletionTimestamp != nil || !s.Matches(labels.Set(p.Labels)) {
			continue
		}
		total++
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready, total
}
