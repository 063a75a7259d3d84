// Scale to zero (spec.autoscaling.minReplicas 0): a pure decision, from the last request the
// activator wrote on the model's Service and the state the operator wrote on its Deployment,
// of whether the model sleeps (no pods, no HPA) or is awake (at least one pod, the HPA's).
// One owner of the count at a time: asleep, the operator holds it at 0 and no HPA exists;
// awake, the HPA scales between 1 and maxReplicas.

package reconcile

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// The Deployment of a model that scales to zero carries exactly one of these (RFC 3339, UTC):
// when it was last scaled to zero, or since when it is awake. The idle window runs from the
// later of AwakeSince and the last request, so a model just woken, created or switched to
// minReplicas 0 gets a full window before its first sleep.
const (
	AsleepSinceAnnotation = "ai.example.com/asleep-since"
	AwakeSinceAnnotation  = "ai.example.com/awake-since"
)

// idle is decideIdle's verdict; the zero value is a model that does not scale to zero.
type idle struct {
	on     bool
	asleep bool
	// since is when it went to sleep, or since when it is awake.
	since       time.Time
	lastRequest time.Time // zero: none seen
	window      time.Duration
	// recheck is how long until an awake model's window ends with no request.
	recheck time.Duration
}

// decideIdle reads the model's idle state. Asleep, a request the activator saw after the
// sleep's own reading (lastRequest later than since - window: the sleep saw none that late)
// wakes it. Awake, the window running out with no request puts it to sleep.
func decideIdle(in *Input) idle {
	window, on := in.Ext.Autoscaling.Idle()
	if !on || isMultiNode(&in.Ext) {
		return idle{}
	}
	now := in.Now.Time
	v := idle{on: true, window: window}
	if s := in.Observed.Service; s != nil && ControlledBy(s, in.ISVC) {
		v.lastRequest = parseTime(s.Annotations[kinds.LastRequestAnnotation])
	}
	var asleep, awake time.Time
	if d := in.Observed.Deployment; d != nil && ControlledBy(d, in.ISVC) {
		asleep, awake = parseTime(d.Annotations[AsleepSinceAnnotation]), parseTime(d.Annotations[AwakeSinceAnnotation])
	}
	if !asleep.IsZero() {
		if !v.lastRequest.After(asleep.Add(-window)) {
			v.asleep, v.since = true, asleep
			return v
		}
		awake = now // woken
	}
	if awake.IsZero() {
		awake = now
	}
	ref := awake
	if v.lastRequest.After(ref) {
		ref = v.lastRequest
	}
	if left := ref.Add(window).Sub(now); left > 0 {
		v.since, v.recheck = awake, left
		return v
	}
	v.asleep, v.since = true, now
	return v
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// view is the spec the rest of Reconcile decides from: asleep, a fixed count of 0 (no HPA, no
// PDB, the Deployment at 0); awake, the HPA's bounds with a floor of 1 (an HPA cannot hold 0,
// and a woken model must serve). isvc and ext are not modified: the copies share their maps.
func (v idle) view(isvc *crd.InferenceService, ext crd.SpecExtensions) (*crd.InferenceService, crd.SpecExtensions) {
	if !v.on {
		return isvc, ext
	}
	c := *isvc
	if v.asleep {
		c.Spec.Replicas = 0
		ext.Autoscaling = nil
		return &c, ext
	}
	a := *ext.Autoscaling
	a.MinReplicas = max(1, a.MinReplicas)
	a.MaxReplicas = max(a.MinReplicas, a.MaxReplicas)
	ext.Autoscaling = &a
	c.Spec.Replicas = a.MinReplicas
	return &c, ext
}

// annotate records the state on the wanted Deployment.
func (v idle) annotate(want *Desired) {
	if !v.on || want.Deployment == nil {
		return
	}
	key := AwakeSinceAnnotation
	if v.asleep {
		key = AsleepSinceAnnotation
	}
	want.Deployment.Annotations[key] = v.since.UTC().Format(time.RFC3339)
}

// message is the Ready condition's while asleep.
func (v idle) message(activator types.NamespacedName) string {
	last := "no request seen"
	if !v.lastRequest.IsZero() {
		last = "last request " + v.lastRequest.UTC().Format(time.RFC3339)
	}
	wake := "the next request through the activator " + activator.String() + " wakes it and is held until a pod serves"
	if activator.Name == "" {
		wake = "no activator is configured (--activator-service), so only a change of spec wakes it"
	}
	return fmt.Sprintf("scaled to zero at %s after %s without a request (%s): no pods run and no GPUs are held; %s",
		v.since.UTC().Format(time.RFC3339), v.window, last, wake)
}

// setStatus says the model sleeps: Ready True (a request is answered, after a cold start) with
// ScaledToZero and the idle time, and the reason column ScaledToZero, never "0/0 ready".
func (v idle) setStatus(st *crd.InferenceServiceStatus, isvc *crd.InferenceService, activator types.NamespacedName, now metav1.Time) {
	c := meta.FindStatusCondition(st.Conditions, crd.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonScaledToZero {
		return // still acting on the children: their cause says so
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: crd.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonScaledToZero,
		Message: v.message(activator), ObservedGeneration: isvc.Generation, LastTransitionTime: now,
	})
	st.Reason = ReasonScaledToZero
}

// withActivatorBackend sends every rule of the route to the activator's Service, with the
// model named in kinds.ActivatorModelHeader (the rule's rewrite strips the path prefix that
// named it). A Service in another namespace needs the activator's ReferenceGrant.
func withActivatorBackend(r *unstructured.Unstructured, isvc *crd.InferenceService, activator types.NamespacedName, port int32) *unstructured.Unstructured {
	out := r.DeepCopy()
	rules, _, _ := unstructured.NestedSlice(out.Object, "spec", "rules")
	for _, rule := range rules {
		m := rule.(map[string]interface{})
		filters, _ := m["filters"].([]interface{})
		m["filters"] = append(filters, map[string]interface{}{
			"type": "RequestHeaderModifier",
			"requestHeaderModifier": map[string]interface{}{
				"set": []interface{}{map[string]interface{}{"name": kinds.ActivatorModelHeader, "value": isvc.Namespace + "/" + isvc.Name}},
			},
		})
		m["backendRefs"] = []interface{}{map[string]interface{}{
			"group": "", "kind": "Service", "namespace": activator.Namespace, "name": activator.Name, "port": int64(port), "weight": int64(1),
		}}
	}
	_ = unstructured.SetNestedSlice(out.Object, rules, "spec", "rules")
	return out
}

// activatorURL is where in-cluster clients reach a model that scales to zero: the activator
// names the model by its path's first two segments.
func activatorURL(isvc *crd.InferenceService, activator types.NamespacedName, port int32) string {
	host := "http://" + activator.Name + "." + activator.Namespace + ".svc"
	if port != 80 {
		host += ":" + strconv.Itoa(int(port))
	}
	return host + "/" + isvc.Namespace + "/" + isvc.Name
}

// ActivatorGrantName is the ReferenceGrant, in the activator's namespace, that lets the
// HTTPRoutes of namespace ns send requests to the activator's Service. One per namespace,
// shared by its models that go through the activator, and deleted when none of them does
// (a grant lets every route of the namespace use it, so it lives no longer than a model needs).
func ActivatorGrantName(ns string) string { return "inferenceservice-routes-from-" + ns }

// desiredActivatorGrant is the grant for namespace ns: HTTPRoutes of ns to the activator's
// Service by name, the only reference a grant can narrow to (it names no port: the Service
// the operator routes to exposes the proxy's port alone, see manifests/activator). It
// carries the operator's label (its cache is label-scoped) and no owner: an owner in another
// namespace is no owner to the garbage collector, which would delete it.
func desiredActivatorGrant(ns string, activator types.NamespacedName) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": ReferenceGrantGVR.GroupVersion().String(),
		"kind":       KindReferenceGrant,
		"spec": map[string]interface{}{
			"from": []interface{}{map[string]interface{}{"group": HTTPRouteGVR.Group, "kind": KindHTTPRoute, "namespace": ns}},
			"to":   []interface{}{map[string]interface{}{"group": "", "kind": "Service", "name": activator.Name}},
		},
	}}
	u.SetName(ActivatorGrantName(ns))
	u.SetNamespace(activator.Namespace)
	u.SetLabels(map[string]string{kinds.ManagedByLabel: kinds.ManagedByValue})
	return u
}

// NeedsActivatorGrant reports whether a model's route goes through the activator, as the
// reconcile decides it (spec.gateway, minReplicas 0, single-node), where an activator serves.
func NeedsActivatorGrant(ext *crd.SpecExtensions) bool {
	_, idle := ext.Autoscaling.Idle()
	return ext.Gateway != nil && idle && !isMultiNode(ext)
}

// decideActivatorGrant creates the namespace's grant while a route of it goes through the
// activator in another namespace and none is seen (another model of the namespace may have
// made it: the create's AlreadyExists is success), and deletes the operator's grant when
// neither this model nor another of the namespace needs it any more. A grant without the
// operator's label (made by hand) is the editor's.
func decideActivatorGrant(out *Output, in *Input, route *unstructured.Unstructured, activated bool) {
	f, live := in.Features, in.Observed.ActivatorGrant
	if !f.ReferenceGrants || f.Activator.Name == "" || f.Activator.Namespace == in.ISVC.Namespace {
		return
	}
	switch need := route != nil && activated; {
	case need && live == nil:
		out.add(Create, KindReferenceGrant, desiredActivatorGrant(in.ISVC.Namespace, f.Activator))
	case !need && live != nil && !in.Observed.GrantNeededElsewhere && live.GetLabels()[kinds.ManagedByLabel] == kinds.ManagedByValue:
		out.add(Delete, KindReferenceGrant, live)
	}
}

// GrantUnneeded is the namespace's grant to delete once its last model is gone: the
// operator's grant while no model of the namespace needs one; nil otherwise.
func GrantUnneeded(live *unstructured.Unstructured, neededElsewhere bool) *unstructured.Unstructured {
	if live == nil || neededElsewhere || live.GetLabels()[kinds.ManagedByLabel] != kinds.ManagedByValue {
		return nil
	}
	return live
}

// coldStartOf reads the last cold start the activator wrote on the model's Service; nil when
// none (or unreadable: the status never shows what it cannot read).
func coldStartOf(s *corev1.Service) *crd.ColdStart {
	v := s.Annotations[kinds.ColdStartAnnotation]
	if v == "" {
		return nil
	}
	var c kinds.ColdStart
	if err := json.Unmarshal([]byte(v), &c); err != nil || c.FirstByteSeconds <= 0 || parseTime(c.Arrived).IsZero() {
		return nil
	}
	return &crd.ColdStart{Arrived: c.Arrived, FirstByteSeconds: c.FirstByteSeconds}
}
