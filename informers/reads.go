// What the caches hand out: one object by name, a model's objects by index, and the
// cluster-wide reads; packed children decoded for the caller, the rest not to be modified.

package informers

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

func (s *Set) scopeFor(namespace string) (*scope, bool) {
	if sc, ok := s.scopes[metav1.NamespaceAll]; ok {
		return sc, true
	}
	sc, ok := s.scopes[namespace]
	return sc, ok
}

// Watches reports whether namespace is in the operator's scope.
func (s *Set) Watches(namespace string) bool {
	_, ok := s.scopeFor(namespace)
	return ok
}

// cast reads an object a cache holds as it is (not packed).
func cast[T any](obj interface{}) (T, error) {
	t, ok := obj.(T)
	if !ok {
		return t, fmt.Errorf("cache holds %T", obj)
	}
	return t, nil
}

// get reads one cached object through read: cast, or unpack for the packed children.
func get[T any](s *Set, pick func(*scope) cache.SharedIndexInformer, read func(interface{}) (T, error), namespace, name string) (T, bool, error) {
	var zero T
	sc, ok := s.scopeFor(namespace)
	if !ok {
		return zero, false, nil
	}
	obj, exists, err := pick(sc).GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return zero, false, err
	}
	t, err := read(obj)
	if err != nil {
		return zero, false, fmt.Errorf("cache for %s/%s: %w", namespace, name, err)
	}
	return t, true, nil
}

// InferenceService returns the cached object, a *crd.InferenceService, or the
// *unstructured.Unstructured that did not decode; callers must not modify it.
func (s *Set) InferenceService(namespace, name string) (runtime.Object, bool, error) {
	return get(s, func(sc *scope) cache.SharedIndexInformer { return sc.isvcInf }, cast[runtime.Object], namespace, name)
}

// InferenceServicesByIndex returns the decoded InferenceServices under value in the named
// index (Options.InferenceServiceIndexers) across the watched namespaces; callers must not
// modify them. An index not configured holds nothing.
func (s *Set) InferenceServicesByIndex(index, value string) ([]*crd.InferenceService, error) {
	var out []*crd.InferenceService
	for _, sc := range s.scopes {
		if _, ok := sc.isvcInf.GetIndexer().GetIndexers()[index]; !ok {
			continue
		}
		objs, err := sc.isvcInf.GetIndexer().ByIndex(index, value)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if i, ok := o.(*crd.InferenceService); ok {
				out = append(out, i)
			}
		}
	}
	return out, nil
}

// Deployment returns the cached Deployment, decoded for the caller.
func (s *Set) Deployment(namespace, name string) (*appsv1.Deployment, bool, error) {
	return get(s, func(sc *scope) cache.SharedIndexInformer { return sc.deploy }, unpack[appsv1.Deployment], namespace, name)
}

// Service returns the cached Service, decoded for the caller.
func (s *Set) Service(namespace, name string) (*corev1.Service, bool, error) {
	return get(s, func(sc *scope) cache.SharedIndexInformer { return sc.svc }, unpack[corev1.Service], namespace, name)
}

// HPA returns the cached HorizontalPodAutoscaler, decoded for the caller.
func (s *Set) HPA(namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, bool, error) {
	return get(s, func(sc *scope) cache.SharedIndexInformer { return sc.hpa }, unpack[autoscalingv2.HorizontalPodAutoscaler], namespace, name)
}

// ConfigMap returns the cached ConfigMap (only the operator's are cached); do not modify it.
func (s *Set) ConfigMap(namespace, name string) (*corev1.ConfigMap, bool, error) {
	return get(s, func(sc *scope) cache.SharedIndexInformer { return sc.cm }, cast[*corev1.ConfigMap], namespace, name)
}

// PDB returns the cached PodDisruptionBudget; callers must not modify it.
func (s *Set) PDB(namespace, name string) (*policyv1.PodDisruptionBudget, bool, error) {
	return get(s, func(sc *scope) cache.SharedIndexInformer { return sc.pdb }, cast[*policyv1.PodDisruptionBudget], namespace, name)
}

// Optional returns a cached optional child; absent when its kind is not watched.
func (s *Set) Optional(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, bool, error) {
	sc, ok := s.scopeFor(namespace)
	if !ok || sc.optionalInf[gvr] == nil {
		return nil, false, nil
	}
	return get(s, func(sc *scope) cache.SharedIndexInformer { return sc.optionalInf[gvr] }, unpackJSON, namespace, name)
}

// Pod returns a cached pod of a model, decoded for the caller.
func (s *Set) Pod(namespace, name string) (*corev1.Pod, bool, error) {
	return get(s, func(sc *scope) cache.SharedIndexInformer { return sc.pod }, unpack[corev1.Pod], namespace, name)
}

// Workloads returns the Kueue Workloads of the given pods, by pod UID; nil when Workloads
// are not watched.
func (s *Set) Workloads(namespace string, pods []types.UID) map[types.UID]kinds.Workload {
	sc, ok := s.scopeFor(namespace)
	if !ok || sc.workloadInf == nil {
		return nil
	}
	out := map[types.UID]kinds.Workload{}
	for _, uid := range pods {
		objs, err := sc.workloadInf.GetIndexer().ByIndex(byPodOwner, namespace+"/"+string(uid))
		if err != nil {
			continue
		}
		for _, o := range objs {
			if u, ok := o.(*unstructured.Unstructured); ok {
				if owners, w, ok := kinds.WorkloadOf(u); ok && slices.Contains(owners, uid) {
					out[uid] = w
				}
			}
		}
	}
	return out
}

func byLabel[T any](s *Set, pick func(*scope) cache.SharedIndexInformer, read func(interface{}) (T, error), namespace, instance string) ([]T, error) {
	sc, ok := s.scopeFor(namespace)
	if !ok {
		return nil, nil
	}
	objs, err := pick(sc).GetIndexer().ByIndex(byInstance, namespace+"/"+instance)
	if err != nil || len(objs) == 0 {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		t, err := read(o)
		if err != nil {
			return nil, fmt.Errorf("cache for %s/%s: %w", namespace, instance, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// ReplicaSets lists the cached ReplicaSets of one InferenceService (by kinds.InstanceLabel),
// decoded for the caller.
func (s *Set) ReplicaSets(namespace, instance string) ([]*appsv1.ReplicaSet, error) {
	return byLabel(s, func(sc *scope) cache.SharedIndexInformer { return sc.rs }, unpack[appsv1.ReplicaSet], namespace, instance)
}

// Pods lists the cached Pods of one InferenceService (by kinds.InstanceLabel), decoded for
// the caller.
func (s *Set) Pods(namespace, instance string) ([]*corev1.Pod, error) {
	return byLabel(s, func(sc *scope) cache.SharedIndexInformer { return sc.pod }, unpack[corev1.Pod], namespace, instance)
}

// ResourceQuotas lists every cached ResourceQuota (for metrics); do not modify them.
func (s *Set) ResourceQuotas() []*corev1.ResourceQuota {
	var out []*corev1.ResourceQuota
	for _, sc := range s.scopes {
		for _, o := range sc.quotaInf.GetStore().List() {
			out = append(out, o.(*corev1.ResourceQuota))
		}
	}
	return out
}

// ClusterQueue returns a Kueue ClusterQueue's borrowing, by name; absent when ClusterQueues
// are not watched or it is not cached.
func (s *Set) ClusterQueue(name string) (kinds.ClusterQueue, bool) {
	if s.cqInf == nil || name == "" {
		return kinds.ClusterQueue{}, false
	}
	obj, ok, err := s.cqInf.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return kinds.ClusterQueue{}, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return kinds.ClusterQueue{}, false
	}
	return kinds.ClusterQueueOf(u), true
}

// AdmittedBy returns the cached pods' Workloads (stripped) a ClusterQueue admitted, in every
// scope. Callers must not modify them.
func (s *Set) AdmittedBy(clusterQueue string) []metav1.Object {
	var out []metav1.Object
	for _, sc := range s.scopes {
		if sc.workloadInf == nil {
			continue
		}
		objs, err := sc.workloadInf.GetIndexer().ByIndex(byClusterQueue, clusterQueue)
		if err != nil {
			continue
		}
		for _, o := range objs {
			if m, ok := o.(metav1.Object); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// TroubledNodes returns the cached nodes with GPU trouble (kinds.NodeTroubled), by name;
// nil when nodes are not watched. Callers must not modify them.
func (s *Set) TroubledNodes() map[string]*corev1.Node {
	if s.nodeInf == nil {
		return nil
	}
	objs, _ := s.nodeInf.GetIndexer().ByIndex(byTrouble, "troubled")
	if len(objs) == 0 {
		return nil
	}
	out := make(map[string]*corev1.Node, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			out[n.Name] = n
		}
	}
	return out
}

// PodsOnNode lists the cached pods bound to node, and, when pending is true, those bound to
// none yet, decoded for the caller; a scan of every cached pod, for the rare change of a
// node's GPU trouble.
func (s *Set) PodsOnNode(node string, pending bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, sc := range s.scopes {
		for _, o := range sc.pod.GetStore().List() {
			if pk, ok := o.(*packed); ok && pk.node != node && (!pending || pk.node != "") {
				continue // decoded only when bound to node, or pending
			}
			if p, err := unpack[corev1.Pod](o); err == nil && (p.Spec.NodeName == node || pending && p.Spec.NodeName == "") {
				out = append(out, p)
			}
		}
	}
	return out
}

// Nodes lists every cached (stripped) node; nil when nodes are not watched. Callers must not
// modify them.
func (s *Set) Nodes() []*corev1.Node {
	if s.nodeInf == nil {
		return nil
	}
	objs := s.nodeInf.GetStore().List()
	out := make([]*corev1.Node, 0, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			out = append(out, n)
		}
	}
	return out
}

// MetricsAPI is what the cached APIServices say of the custom metrics API; not Known when
// APIServices are not watched.
func (s *Set) MetricsAPI() kinds.MetricsAPI {
	if s.apiServiceInf == nil {
		return kinds.MetricsAPI{}
	}
	objs := s.apiServiceInf.GetStore().List()
	list := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			list = append(list, u)
		}
	}
	return kinds.MetricsAPIOf(list)
}
