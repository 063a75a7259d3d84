// A canary rollout's children (spec.rollout.strategy Canary): the facts the rollout package
// decides on, read from the spec and the caches, and its plan turned into children: the
// canary Deployment and Service (desired, drift and set), the stable held at its template,
// and the HTTPRoute's weights.

package reconcile

import (
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/rollout"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

const (
	// KindCanary and KindCanaryService are the canary's Deployment and Service, as actions name them.
	KindCanary        = "CanaryDeployment"
	KindCanaryService = "CanaryService"
	// RevisionAnnotation is the pod template revision (TemplateRevision) a Deployment runs,
	// on the stable's and the canary's metadata (never on the pods: it would roll them).
	RevisionAnnotation = "ai.example.com/revision"
	// RolloutLabel marks the canary's objects and pods (value "canary").
	RolloutLabel = "ai.example.com/rollout"
	canarySuffix = "-canary"
	// canaryInstance is the suffix of the canary pods' InstanceLabel: a dot, which no
	// InferenceService's name holds, so it names no other model.
	canaryInstance = ".canary"
)

// CanaryName is the canary Deployment's and Service's name.
func CanaryName(name string) string { return name + canarySuffix }

// CanaryInstance is the InstanceLabel of a model's canary pods: the stable Service, the HPA,
// the PDB and the metrics adapter select InstanceLabel=name and so never the canary's.
func CanaryInstance(name string) string { return name + canaryInstance }

// StableOfCanary is the model a canary pod's InstanceLabel names, and whether it is a canary's.
func StableOfCanary(instance string) (string, bool) {
	if n := len(instance) - len(canaryInstance); n > 0 && instance[n:] == canaryInstance {
		return instance[:n], true
	}
	return "", false
}

// IsCanary reports whether obj is a canary's Deployment, Service or pod.
func IsCanary(obj metav1.Object) bool { return obj.GetLabels()[RolloutLabel] == "canary" }

// TemplateRevision is a pod template's revision: a hash of the template as the operator
// renders it (replicas are not in it), so any change of the model server's version (image,
// weights, engine arguments, environment) is a new revision.
func TemplateRevision(t *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	h := fnv.New64a()
	_, _ = h.Write(b)
	return hex.EncodeToString(h.Sum(nil))[:10]
}

// canary is a rollout's decision and the children it asks for.
type canary struct {
	on         bool
	plan       rollout.Plan
	revision   string
	deployment *appsv1.Deployment
	service    *corev1.Service
}

// decideCanary reads the facts of a canary rollout and decides it; off (the zero canary,
// today's rolling update) without spec.rollout.strategy Canary or without a single-node
// Deployment of ours to be the stable.
func decideCanary(in *Input, want *Desired, liveD *appsv1.Deployment, poolRoute bool) canary {
	isvc, r := in.ISVC, in.Ext.Rollout
	stored := in.Observed.StoredRollout
	if want.Deployment == nil || (!r.IsCanary() && stored == nil) {
		return canary{}
	}
	wt := &want.Deployment.Spec.Template
	c := canary{on: true, revision: TemplateRevision(wt)}
	f := rollout.Facts{Spec: r, Stored: stored, Desired: c.revision, Now: in.Now.Time, Window: in.RolloutWindow, WindowWaiting: in.RolloutWaiting}
	if liveD == nil || !ControlledBy(liveD, isvc) {
		f.Stable = c.revision // nothing to roll from: the first pods start as the spec says
	} else {
		f.Stable = liveD.Annotations[RevisionAnnotation]
		f.Drifted = templateDrifted(&liveD.Spec.Template, wt, priorOf(liveD.Annotations))
		f.StableRolledOut = rolledOut(liveD)
	}
	switch {
	case poolRoute:
		f.Unsupported = "spec.rollout.strategy Canary cannot run with the pool route (the operator's --inference-pool): the pool's endpoint picker, not the HTTPRoute's weights, chooses each request's pod; the change waits. Set strategy RollingUpdate to roll it out, or run the operator without the pool route"
	case !in.Features.HTTPRoutes || in.Ext.Gateway == nil:
		f.Unsupported = "spec.rollout.strategy Canary needs the model's HTTPRoute (spec.gateway, on a cluster serving the Gateway API): the change waits. Set strategy RollingUpdate to roll it out"
	}
	d := desiredCanary(isvc, want.Deployment, r.Replicas(), c.revision)
	if live := in.Observed.CanaryDeployment; live != nil && ControlledBy(live, isvc) && live.Annotations[RevisionAnnotation] == c.revision {
		f.CanaryWant, f.CanaryReady = r.Replicas(), live.Status.ReadyReplicas
		f.CanarySince, f.ReadyWithin = live.CreationTimestamp.Time, canaryReadyWithin(&in.Ext)
		if live.Status.ObservedGeneration < live.Generation || live.Status.UpdatedReplicas < f.CanaryWant {
			f.CanaryReady = min(f.CanaryReady, live.Status.UpdatedReplicas)
		}
	} else {
		f.CanaryWant = r.Replicas()
	}
	c.plan = rollout.Decide(f)
	switch {
	case c.plan.Canary:
		c.deployment, c.service = d, desiredCanaryService(isvc)
	case canaryStillRouted(in):
		// The rollout is over (rolled back or promoted) and the route goes back to the stable,
		// but the gateway may still send the canary what it routed before: its pods serve until
		// the gateway has taken the route without it (a deleted Service would answer 503).
		c.deployment, c.service = ownedOrNil(in.Observed.CanaryDeployment, isvc), ownedOrNil(in.Observed.CanaryService, isvc)
	}
	return c
}

// canaryStillRouted reports whether the model's route, as the caches show it, may still send
// requests to its canary: the route names the canary's Service, or a gateway that reports on
// the route has not yet accepted its latest generation (a route without a gateway's report
// waits for nothing).
func canaryStillRouted(in *Input) bool {
	r := in.Observed.HTTPRoute
	if r == nil || in.Observed.CanaryDeployment == nil && in.Observed.CanaryService == nil {
		return false
	}
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	for _, rule := range rules {
		refs, _, _ := unstructured.NestedSlice(rule.(map[string]interface{}), "backendRefs")
		for _, ref := range refs {
			if m, ok := ref.(map[string]interface{}); ok && m["name"] == CanaryName(in.ISVC.Name) {
				return true
			}
		}
	}
	for _, conds := range parentConditions(r, in.Features.GatewayParent) {
		for _, cm := range conds {
			if gen, found, _ := unstructured.NestedInt64(cm, "observedGeneration"); cm["type"] == "Accepted" && found && gen < r.GetGeneration() {
				return true
			}
		}
	}
	return false
}

// ownedOrNil is obj when isvc controls it, else nil (a typed nil would not read as absent).
func ownedOrNil[T interface {
	*appsv1.Deployment | *corev1.Service
	metav1.Object
}](obj T, isvc *crd.InferenceService) T {
	if obj != nil && ControlledBy(obj, isvc) {
		return obj
	}
	return nil
}

// canaryReadyWithin is how long a canary's pods may take to serve: the model's startup budget
// and five minutes more for scheduling and the image pull, which the budget does not cover.
func canaryReadyWithin(ext *crd.SpecExtensions) time.Duration {
	return time.Duration(startupBudget(ext))*time.Second + 5*time.Minute
}

// rolledOut reports whether a Deployment runs its current template on all its pods.
func rolledOut(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas >= want && s.Replicas == s.UpdatedReplicas && s.AvailableReplicas >= want
}

// holdStable is want with the live stable's template (and the records of it), so the stable
// keeps serving its version while a canary runs the new one.
func holdStable(want, live *appsv1.Deployment) *appsv1.Deployment {
	out := want.DeepCopy()
	live.Spec.Template.DeepCopyInto(&out.Spec.Template)
	for _, k := range []string{EnvAnnotation, PlacementAnnotation, RevisionAnnotation} {
		if v, ok := live.Annotations[k]; ok {
			out.Annotations[k] = v
		} else {
			delete(out.Annotations, k)
		}
	}
	return out
}

// withRevision is want recording revision, the template it carries.
func withRevision(want *appsv1.Deployment, revision string) *appsv1.Deployment {
	out := *want
	out.Annotations = maps.Clone(want.Annotations)
	out.Annotations[RevisionAnnotation] = revision
	return &out
}

func canaryLabels(name string) map[string]string {
	l := childLabels(name)
	l[kinds.InstanceLabel] = CanaryInstance(name)
	l[RolloutLabel] = "canary"
	return l
}

// desiredCanary is the stable's desired Deployment as the canary: its own name, labels and
// selector (CanaryInstance), canaryReplicas pods, no record of the stable's replicas.
func desiredCanary(isvc *crd.InferenceService, stable *appsv1.Deployment, replicas int32, revision string) *appsv1.Deployment {
	d := stable.DeepCopy()
	d.Name = CanaryName(isvc.Name)
	d.Labels = canaryLabels(isvc.Name)
	if q := isvc.Spec.QueueName; q != "" {
		d.Labels[QueueLabel] = q
	}
	d.Spec.Replicas = ptr.To(replicas)
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{kinds.InstanceLabel: CanaryInstance(isvc.Name)}}
	d.Spec.Template.Labels = maps.Clone(d.Labels)
	delete(d.Annotations, ReplicasAnnotation)
	delete(d.Annotations, RaisedAnnotation)
	d.Annotations[RevisionAnnotation] = revision
	return d
}

func desiredCanaryService(isvc *crd.InferenceService) *corev1.Service {
	b := sharedOf(isvc)
	b.meta.Name = CanaryName(isvc.Name)
	b.meta.Labels = canaryLabels(isvc.Name)
	b.selector = map[string]string{kinds.InstanceLabel: CanaryInstance(isvc.Name)}
	return desiredService(b, false)
}

func canaryDrifted(live, want *appsv1.Deployment) bool {
	return !hasLabels(live.Labels, want.Labels) || ptr.Deref(live.Spec.Replicas, 1) != ptr.Deref(want.Spec.Replicas, 1) ||
		live.Annotations[RevisionAnnotation] != want.Annotations[RevisionAnnotation] ||
		templateDrifted(&live.Spec.Template, &want.Spec.Template, priorOf(live.Annotations))
}

func setCanary(out, want *appsv1.Deployment) {
	out.Spec.Replicas = ptr.To(ptr.Deref(want.Spec.Replicas, 1))
	out.Labels = mergeLabels(out.Labels, want.Labels)
	prev := priorOf(out.Annotations)
	out.Annotations = setOwnedAnnotations(out.Annotations, want.Annotations)
	out.Annotations[RevisionAnnotation] = want.Annotations[RevisionAnnotation]
	setTemplate(&out.Spec.Template, &want.Spec.Template, prev)
}

// children adds the canary's Deployment and Service actions to out.
func (c canary) children(out *Output, in *Input) {
	if !c.on && in.Observed.CanaryDeployment == nil && in.Observed.CanaryService == nil {
		return
	}
	isvc := in.ISVC
	if live := in.Observed.CanaryDeployment; decideChild(out, isvc, KindCanary, live, c.deployment, live == nil, c.deployment == nil) && canaryDrifted(live, c.deployment) {
		upd := live.DeepCopy()
		setCanary(upd, c.deployment)
		out.update(KindCanary, upd, live)
	}
	if live := in.Observed.CanaryService; decideChild(out, isvc, KindCanaryService, live, c.service, live == nil, c.service == nil) && serviceDrifted(live, c.service) {
		upd := live.DeepCopy()
		setService(upd, c.service)
		out.update(KindCanaryService, upd, live)
	}
}

// withCanaryBackend splits every rule of the model's route between the stable Service
// (100 - weight) and the canary's (weight).
func withCanaryBackend(r *unstructured.Unstructured, name string, weight int32) *unstructured.Unstructured {
	out := r.DeepCopy()
	rules, _, _ := unstructured.NestedSlice(out.Object, "spec", "rules")
	for _, rule := range rules {
		rule.(map[string]interface{})["backendRefs"] = []interface{}{
			map[string]interface{}{"group": "", "kind": "Service", "name": name, "port": int64(Port), "weight": int64(100 - weight)},
			map[string]interface{}{"group": "", "kind": "Service", "name": CanaryName(name), "port": int64(Port), "weight": int64(weight)},
		}
	}
	_ = unstructured.SetNestedSlice(out.Object, rules, "spec", "rules")
	return out
}

// setCondition writes the Rollout condition, or removes it without a rollout.
func (c canary) setCondition(st *crd.InferenceServiceStatus, isvc *crd.InferenceService, now metav1.Time) {
	if !c.on || c.plan.Reason == "" {
		meta.RemoveStatusCondition(&st.Conditions, crd.ConditionRollout)
		return
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: crd.ConditionRollout, Status: metav1.ConditionStatus(c.plan.ConditionStatus),
		Reason: c.plan.Reason, Message: c.plan.Message, ObservedGeneration: isvc.Generation, LastTransitionTime: now})
}
