package activator

// The models the activator serves, from caches: an InferenceService informer (each object cut
// to its identity and whether it scales to zero) and the operator's Services (cut to their
// owners). A key is served only if both agree, so no request names, wakes or marks a model
// that is not at minReplicas 0, nor a Service the operator did not make for it.

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/crd"
)

// ModelEntry is what the activator caches of an InferenceService: its identity and whether it
// scales to zero (spec.autoscaling.minReplicas 0, in whichever version's form it was written).
type ModelEntry struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	ScalesToZero bool
}

// DeepCopyObject makes ModelEntry a runtime.Object, as a cache's objects are.
func (m *ModelEntry) DeepCopyObject() runtime.Object {
	c := *m
	m.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// StripModel is the InferenceService informer's transform: an object of kilobytes (spec,
// status, history) becomes its ModelEntry.
func StripModel(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone: its object was stripped on the way in
	}
	return &ModelEntry{
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()},
		// An object that does not decode is no model the operator serves either.
		ScalesToZero: scalesToZero(u),
	}, nil
}

func scalesToZero(u *unstructured.Unstructured) bool {
	isvc, err := crd.FromUnstructured(u)
	if err != nil {
		return false
	}
	ext, _, err := crd.ExtensionsOf(isvc)
	if err != nil {
		return false
	}
	_, on := ext.Autoscaling.Idle()
	return on
}

// StripService keeps of a Service what Serves reads: its identity and owners.
func StripService(obj interface{}) (interface{}, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		OwnerReferences: s.OwnerReferences,
	}}, nil
}

// Strip is the transform of the activator's pod and Service informers (one factory).
func Strip(obj interface{}) (interface{}, error) {
	switch obj.(type) {
	case *corev1.Pod:
		return StripPod(obj)
	case *corev1.Service:
		return StripService(obj)
	}
	return obj, nil
}

// Serves decides whether the activator serves a model from its cached InferenceService and
// Service (nil when not cached): the model scales to zero, and the Service of its name is
// controlled by that very InferenceService (by UID: not a namesake's, not a tenant's own), or
// none of that name exists yet (a model just created: the operator is making it, and Owns
// keeps every write off it until it does).
func Serves(m *ModelEntry, svc *corev1.Service) bool {
	if m == nil || !m.ScalesToZero {
		return false
	}
	return svc == nil || Owns(m, svc)
}

// Owns decides whether svc is the Service the operator made for m: the only Service the
// activator writes its annotations on.
func Owns(m *ModelEntry, svc *corev1.Service) bool {
	if m == nil || svc == nil {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(svc)
	return ref != nil && ref.UID == m.UID && ref.Kind == crd.Kind && ref.APIVersion != "" &&
		groupOf(ref.APIVersion) == crd.Group
}

func groupOf(apiVersion string) string {
	for i := range len(apiVersion) {
		if apiVersion[i] == '/' {
			return apiVersion[:i]
		}
	}
	return ""
}

// Models is the Catalog over the activator's caches: InferenceService and Service stores, one
// pair per watched namespace (or one for all).
type Models struct {
	isvcs, services []cache.Store
}

// NewModels returns an empty Models; Add each scope's stores before serving.
func NewModels() *Models { return &Models{} }

// Add adds one scope's InferenceService store (of StripModel's entries) and Service store.
func (m *Models) Add(isvcs, services cache.Store) {
	m.isvcs, m.services = append(m.isvcs, isvcs), append(m.services, services)
}

// Serves implements Catalog.
func (m *Models) Serves(k Key) bool { return Serves(m.lookup(k)) }

// Owned reports whether k's Service is the one the operator made for k's InferenceService:
// Activity writes only then (ActivityOptions.Owned).
func (m *Models) Owned(k Key) bool { return Owns(m.lookup(k)) }

func (m *Models) lookup(k Key) (*ModelEntry, *corev1.Service) {
	id := k.Namespace + "/" + k.Name
	var entry *ModelEntry
	var svc *corev1.Service
	for i := range m.isvcs {
		if o, ok, _ := m.isvcs[i].GetByKey(id); ok {
			entry, _ = o.(*ModelEntry)
		}
		if o, ok, _ := m.services[i].GetByKey(id); ok {
			svc, _ = o.(*corev1.Service)
		}
	}
	return entry, svc
}
