// What the caches store: each object decoded or stripped on its way in (the children by
// package kinds' Strip transforms, wired here), and the strings the models share interned.

package informers

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// StripManagedFields drops managedFields, which the operator never reads, to halve the cache.
func StripManagedFields(obj interface{}) (interface{}, error) {
	if acc, err := meta.Accessor(obj); err == nil && acc.GetManagedFields() != nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}

// LastAppliedAnnotation is kubectl apply's copy of the whole object, as large as the rest of it.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// StripInferenceService drops managedFields and kubectl's last-applied copy: the controller
// never writes the cached object back (status and finalizers are written on their own).
func StripInferenceService(obj interface{}) (interface{}, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
		if a := u.GetAnnotations(); a != nil {
			if _, ok := a[LastAppliedAnnotation]; ok {
				delete(a, LastAppliedAnnotation)
				u.SetAnnotations(a)
			}
		}
		return u, nil
	}
	return StripManagedFields(obj)
}

// DecodeInferenceService stores an InferenceService typed, in the operator's internal form
// (v1alpha1, with v1beta1's additions in its annotation, crd.FromUnstructured): a third of
// the unstructured form's size, and a reconcile copies it instead of converting it. An object
// that does not decode is kept unstructured, for the controller to report why.
func DecodeInferenceService(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return StripManagedFields(obj)
	}
	if _, err := StripInferenceService(u); err != nil {
		return nil, err
	}
	isvc, err := crd.FromUnstructured(u)
	if err != nil {
		return u, nil
	}
	isvc.TypeMeta = metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()}
	shareStrings(isvc)
	return isvc, nil
}

// inferenceServiceDecoder is DecodeInferenceService with the models' spec.resources shared:
// decoded, each isvc holds its own two ResourceLists, maps of Quantities that take more than
// the rest of its spec (a third of a cached isvc at 10,000 models), though most models of a
// cluster ask for one of a few. Cached objects are read only (a reconcile DeepCopies first),
// so one copy serves every isvc asking the same.
type inferenceServiceDecoder struct {
	mu        sync.Mutex
	resources map[string]*crd.Resources // by resourcesKey; at most maxSharedResources
}

// maxSharedResources bounds the shared spec.resources: past it, a new one is kept per isvc.
const maxSharedResources = 1024

func newInferenceServiceDecoder() *inferenceServiceDecoder {
	return &inferenceServiceDecoder{resources: map[string]*crd.Resources{}}
}

// decode is the isvc informer's transform.
func (d *inferenceServiceDecoder) decode(obj interface{}) (interface{}, error) {
	obj, err := DecodeInferenceService(obj)
	if isvc, ok := obj.(*crd.InferenceService); ok && err == nil && isvc.Spec.Resources != nil {
		isvc.Spec.Resources = d.share(isvc.Spec.Resources)
	}
	return obj, err
}

// share returns the shared copy of r, making r the shared one when none is.
func (d *inferenceServiceDecoder) share(r *crd.Resources) *crd.Resources {
	key := resourcesKey(r)
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.resources[key]; ok {
		return s
	}
	if len(d.resources) < maxSharedResources {
		d.resources[key] = r
	}
	return r
}

// resourcesKey spells r out in full, in a fixed order (String also caches each Quantity's
// string, so a shared one is never written on a later read).
func resourcesKey(r *crd.Resources) string {
	var b strings.Builder
	b.WriteString(r.GPUResourceName)
	for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
		b.WriteByte('|')
		if l == nil {
			b.WriteByte('-') // nil and empty are told apart: DeepCopy keeps the difference
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(l)) {
			q := l[name]
			b.WriteString(string(name) + "=" + q.String() + ",")
			l[name] = q
		}
	}
	return b.String()
}

// shareStrings has every cached isvc share one copy of each string the models have in common
// (namespace, model, image, condition types, reasons and messages such as every HPA's same
// complaint): decoded, each model holds its own, a sixth of its cached size.
func shareStrings(isvc *crd.InferenceService) {
	isvc.Namespace = unique.Make(isvc.Namespace).Value()
	sp := &isvc.Spec
	sp.Model, sp.Image = unique.Make(sp.Model).Value(), unique.Make(sp.Image).Value()
	sp.PriorityClassName, sp.QueueName = unique.Make(sp.PriorityClassName).Value(), unique.Make(sp.QueueName).Value()
	st := &isvc.Status
	st.Phase = crd.Phase(unique.Make(string(st.Phase)).Value())
	st.Reason = unique.Make(st.Reason).Value()
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type, c.Reason, c.Message = unique.Make(c.Type).Value(), unique.Make(c.Reason).Value(), unique.Make(c.Message).Value()
		c.Status = metav1.ConditionStatus(unique.Make(string(c.Status)).Value())
	}
	for i := range st.History {
		h := &st.History[i]
		h.Phase, h.Reason, h.Message = crd.Phase(unique.Make(string(h.Phase)).Value()), unique.Make(h.Reason).Value(), unique.Make(h.Message).Value()
	}
}

// stripPodSeenIn is kinds.StripPodSeen as the transform of the pods informer: the version it
// caches (if any) says whether a container was seen not started yet.
func stripPodSeenIn(pods cache.SharedIndexInformer) cache.TransformFunc {
	return func(obj interface{}) (interface{}, error) {
		var prev *corev1.Pod
		if p, ok := obj.(*corev1.Pod); ok {
			if o, ok, _ := pods.GetIndexer().GetByKey(p.Namespace + "/" + p.Name); ok {
				prev, _ = unpack[corev1.Pod](o)
			}
		}
		return kinds.StripPodSeen(obj, prev, time.Now())
	}
}

// StripClusterQueue keeps of a ClusterQueue what kinds.ClusterQueueOf reads: its name and
// the resources it borrows, so its usage moving within its own quota is no event.
func StripClusterQueue(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	var flavors []any
	for _, b := range kinds.ClusterQueueOf(u).Borrowed {
		flavors = append(flavors, map[string]any{"name": b.Flavor, "resources": []any{map[string]any{"name": b.Resource, "borrowed": b.Amount}}})
	}
	if len(flavors) > 0 {
		_ = unstructured.SetNestedSlice(out.Object, flavors, "status", "flavorsUsage")
	}
	return out, nil
}

// StripWorkload keeps of a Workload what kinds.WorkloadOf reads: a Job's shrinks to its
// name, a pod's keeps its pod owner, its ClusterQueue and its QuotaReserved condition.
func StripWorkload(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	var owners []metav1.OwnerReference
	for _, r := range u.GetOwnerReferences() {
		if r.Kind == "Pod" && r.APIVersion == "v1" {
			owners = append(owners, metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID})
		}
	}
	if len(owners) == 0 {
		return out, nil
	}
	out.SetOwnerReferences(owners)
	if cq, ok, _ := unstructured.NestedString(u.Object, "status", "admission", "clusterQueue"); ok {
		_ = unstructured.SetNestedField(out.Object, cq, "status", "admission", "clusterQueue")
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "QuotaReserved" {
			keep := map[string]any{"type": m["type"], "status": m["status"], "message": m["message"]}
			_ = unstructured.SetNestedSlice(out.Object, []any{keep}, "status", "conditions")
		}
	}
	return out, nil
}
