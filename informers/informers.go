// Package informers is step 1 of the pipeline (informers -> queue -> controller sync ->
// reconcile -> controller apply): it hands out the operator's caches, a dynamic informer on
// InferenceService and typed informers on the children it manages, scoped by the managed-by
// label, each child trimmed by reconcile's transforms to what the decision reads (the most
// numerous then packed, packed.go), one set per watched namespace (or one for the whole cluster).
package informers

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	autoscalinginformers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// byInstance indexes objects by namespace/kinds.InstanceLabel: a reconcile then reads its own
// pods, not a scan of every pod in the namespace (O(1), not O(N), per reconcile).
const byInstance = "instance"

func instanceIndex(obj interface{}) ([]string, error) {
	ns, name, ok := instanceOf(obj)
	if !ok {
		return nil, nil
	}
	return []string{ns + "/" + name}, nil
}

// Options scope the caches.
type Options struct {
	// Namespaces to watch; empty means all namespaces.
	Namespaces []string
	// Resync re-delivers every cached InferenceService this often (0 disables it). Children are
	// not re-delivered: a child's resync says nothing new (the controller drops it), and
	// a packed child would be decoded for it.
	Resync time.Duration
	// Resource is the InferenceService version to watch; zero means crd.Resource (v1alpha1).
	Resource schema.GroupVersionResource
	// Optional are children kinds from CRDs that may be absent (ServiceMonitors, HTTPRoutes):
	// watched, label-scoped like the others, only when listed.
	Optional []schema.GroupVersionResource
	// Workloads watches Kueue's Workloads (kinds.KueueWorkloadGVR), not label-scoped since
	// Kueue makes them, stripped to what WorkloadOf reads and indexed by the pod owning them
	// and by the ClusterQueue that admitted them.
	Workloads bool
	// Nodes watches the cluster's Nodes, stripped to their GPU facts, for the diagnosis of
	// models failing on nodes whose GPUs are unhealthy (needs list and watch on nodes).
	Nodes bool
	// ClusterQueues watches Kueue's ClusterQueues (kinds.KueueClusterQueueGVR), cluster-wide,
	// stripped to what they borrow from their cohort.
	ClusterQueues bool
}

// Set is the operator's caches across its namespaces.
type Set struct {
	scopes map[string]*scope // by namespace; "" for cluster-wide
	// nodes is cluster-wide whatever the namespaces, nil unless Options.Nodes; indexed by
	// GPU trouble so a reconcile reads the few troubled nodes, never the whole list.
	nodes   informers.SharedInformerFactory
	nodeInf cache.SharedIndexInformer
	// Kueue's ClusterQueues, cluster-wide, nil unless Options.ClusterQueues.
	clusterQueues dynamicinformer.DynamicSharedInformerFactory
	cqInf         cache.SharedIndexInformer
}

// byTrouble indexes nodes with GPU trouble under "troubled".
const byTrouble = "trouble"

func troubleIndex(obj interface{}) ([]string, error) {
	if n, ok := obj.(*corev1.Node); ok && kinds.NodeTroubled(n) {
		return []string{"troubled"}, nil
	}
	return nil, nil
}

type scope struct {
	children informers.SharedInformerFactory
	// The isvc informer runs on its own, not from a dynamic factory, to go without the
	// factory's namespace index.
	isvcInf cache.SharedIndexInformer
	deploy  cache.SharedIndexInformer
	rs      cache.SharedIndexInformer
	svc     cache.SharedIndexInformer
	hpa     cache.SharedIndexInformer
	cm      cache.SharedIndexInformer
	pdb     cache.SharedIndexInformer
	pod     cache.SharedIndexInformer
	// optional children, unstructured, through their own label-scoped dynamic factory
	optional    dynamicinformer.DynamicSharedInformerFactory
	optionalInf map[schema.GroupVersionResource]cache.SharedIndexInformer
	// ResourceQuotas are an admin's, not labelled by the operator: their own unscoped factory,
	// read only by the metrics collector at scrape time, so no resync.
	quotas   informers.SharedInformerFactory
	quotaInf cache.SharedIndexInformer
	// Kueue's Workloads, unscoped (Kueue labels them with its own keys only); nil unless
	// Options.Workloads.
	workloads   dynamicinformer.DynamicSharedInformerFactory
	workloadInf cache.SharedIndexInformer
}

// byPodOwner indexes Workloads by the namespace/UID of each pod that owns them (every pod of
// a group).
const byPodOwner = "podOwner"

func podOwnerIndex(obj interface{}) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	uids, _, _ := kinds.WorkloadOf(u)
	keys := make([]string, 0, len(uids))
	for _, uid := range uids {
		keys = append(keys, u.GetNamespace()+"/"+string(uid))
	}
	return keys, nil
}

// byClusterQueue indexes pods' Workloads by the ClusterQueue that admitted them.
const byClusterQueue = "clusterQueue"

func clusterQueueIndex(obj interface{}) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	if _, w, ok := kinds.WorkloadOf(u); ok && w.ClusterQueue != "" {
		return []string{w.ClusterQueue}, nil
	}
	return nil, nil
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

// New builds, but does not start, the informers.
func New(kube kubernetes.Interface, dyn dynamic.Interface, opts Options) *Set {
	namespaces := opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	res := opts.Resource
	if res.Empty() {
		res = crd.Resource
	}
	s := &Set{scopes: map[string]*scope{}}
	managed := labels.SelectorFromSet(labels.Set{kinds.ManagedByLabel: kinds.ManagedByValue}).String()
	for _, ns := range namespaces {
		sc := &scope{}
		sc.isvcInf = dynamicinformer.NewFilteredDynamicInformer(dyn, res, ns, opts.Resync, cache.Indexers{}, nil).Informer()
		must(sc.isvcInf.SetTransform(DecodeInferenceService))
		tweak := func(o *metav1.ListOptions) { o.LabelSelector = managed }
		sc.children = informers.NewSharedInformerFactoryWithOptions(kube, 0,
			informers.WithNamespace(ns), informers.WithTweakListOptions(tweak),
			informers.WithTransform(StripManagedFields),
		)
		// Built without the factory's namespace index: nothing lists by namespace, and the
		// index costs a set entry per object (megabytes at 10,000 models).
		sc.deploy = sc.children.InformerFor(&appsv1.Deployment{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return appsinformers.NewFilteredDeploymentInformer(c, ns, r, cache.Indexers{}, tweak)
		})
		must(sc.deploy.SetTransform(pack(kinds.StripDeployment)))
		sc.rs = sc.children.InformerFor(&appsv1.ReplicaSet{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return appsinformers.NewFilteredReplicaSetInformer(c, ns, r, cache.Indexers{byInstance: instanceIndex}, tweak)
		})
		must(sc.rs.SetTransform(pack(kinds.StripReplicaSet)))
		sc.svc = sc.children.InformerFor(&corev1.Service{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredServiceInformer(c, ns, r, cache.Indexers{}, tweak)
		})
		must(sc.svc.SetTransform(pack(kinds.StripService)))
		sc.hpa = sc.children.InformerFor(&autoscalingv2.HorizontalPodAutoscaler{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return autoscalinginformers.NewFilteredHorizontalPodAutoscalerInformer(c, ns, r, cache.Indexers{}, tweak)
		})
		must(sc.hpa.SetTransform(pack(kinds.StripHPA)))
		sc.cm = sc.children.InformerFor(&corev1.ConfigMap{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredConfigMapInformer(c, ns, r, cache.Indexers{}, tweak)
		})
		sc.pdb = sc.children.InformerFor(&policyv1.PodDisruptionBudget{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return policyinformers.NewFilteredPodDisruptionBudgetInformer(c, ns, r, cache.Indexers{}, tweak)
		})
		sc.pod = sc.children.InformerFor(&corev1.Pod{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredPodInformer(c, ns, r, cache.Indexers{byInstance: instanceIndex}, tweak)
		})
		pods := sc.pod
		must(sc.pod.SetTransform(pack(func(obj interface{}) (interface{}, error) {
			// The cached version (if any) says whether a container was seen not started yet.
			var prev *corev1.Pod
			if p, ok := obj.(*corev1.Pod); ok {
				if o, ok, _ := pods.GetIndexer().GetByKey(p.Namespace + "/" + p.Name); ok {
					prev, _ = unpack[corev1.Pod](o)
				}
			}
			return kinds.StripPodSeen(obj, prev, time.Now())
		})))
		sc.optional = dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, tweak)
		sc.optionalInf = map[schema.GroupVersionResource]cache.SharedIndexInformer{}
		for _, gvr := range opts.Optional {
			inf := sc.optional.ForResource(gvr).Informer()
			must(inf.SetTransform(StripManagedFields))
			sc.optionalInf[gvr] = inf
		}
		sc.quotas = informers.NewSharedInformerFactoryWithOptions(kube, 0,
			informers.WithNamespace(ns), informers.WithTransform(StripManagedFields))
		sc.quotaInf = sc.quotas.InformerFor(&corev1.ResourceQuota{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewResourceQuotaInformer(c, ns, r, cache.Indexers{})
		})
		if opts.Workloads {
			// No resync: a Workload's news is its own change.
			sc.workloads = dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
			sc.workloadInf = sc.workloads.ForResource(kinds.KueueWorkloadGVR).Informer()
			must(sc.workloadInf.AddIndexers(cache.Indexers{byPodOwner: podOwnerIndex, byClusterQueue: clusterQueueIndex}))
			must(sc.workloadInf.SetTransform(StripWorkload))
		}
		s.scopes[ns] = sc
	}
	if opts.Nodes {
		// No resync: a node's trouble is news only when it changes.
		s.nodes = informers.NewSharedInformerFactoryWithOptions(kube, 0)
		s.nodeInf = s.nodes.InformerFor(&corev1.Node{}, func(c kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewNodeInformer(c, r, cache.Indexers{byTrouble: troubleIndex})
		})
		must(s.nodeInf.SetTransform(kinds.StripNode))
	}
	if opts.ClusterQueues {
		s.clusterQueues = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
		s.cqInf = s.clusterQueues.ForResource(kinds.KueueClusterQueueGVR).Informer()
		must(s.cqInf.SetTransform(StripClusterQueue))
	}
	return s
}

func must(err error) {
	if err != nil {
		panic(err) // only on programmer error: a transform set after the informer started
	}
}

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

// Handlers receives the events of every informer in the set, with typed objects (the packed
// children decoded; each event's objects are the handler's own).
type Handlers struct {
	InferenceService cache.ResourceEventHandler
	Child            cache.ResourceEventHandler // Deployments, Services, HPAs, ConfigMaps, PDBs
	ReplicaSet       cache.ResourceEventHandler
	Pod              cache.ResourceEventHandler
	// Workload is called for Kueue's Workloads (with Options.Workloads), stripped by StripWorkload.
	Workload cache.ResourceEventHandler
	// Node is called with a node whose GPU trouble began, changed or ended (with Options.Nodes).
	Node func(node *corev1.Node)
	// ClusterQueue is called with the name of a ClusterQueue whose borrowing changed (with
	// Options.ClusterQueues).
	ClusterQueue func(name string)
}

// AddEventHandlers wires h into every scope.
func (s *Set) AddEventHandlers(h Handlers) error {
	for _, sc := range s.scopes {
		add := func(inf cache.SharedIndexInformer, eh cache.ResourceEventHandler) error {
			if eh == nil {
				return nil
			}
			_, err := inf.AddEventHandler(eh)
			return err
		}
		for _, p := range []struct {
			inf cache.SharedIndexInformer
			h   cache.ResourceEventHandler
		}{{sc.isvcInf, h.InferenceService}, {sc.deploy, unpackedOrNil[appsv1.Deployment](h.Child)}, {sc.svc, unpackedOrNil[corev1.Service](h.Child)},
			{sc.hpa, unpackedOrNil[autoscalingv2.HorizontalPodAutoscaler](h.Child)}, {sc.cm, h.Child}, {sc.pdb, h.Child},
			{sc.rs, unpackedOrNil[appsv1.ReplicaSet](h.ReplicaSet)}, {sc.pod, unpackedOrNil[corev1.Pod](h.Pod)}} {
			if err := add(p.inf, p.h); err != nil {
				return err
			}
		}
		for _, inf := range sc.optionalInf {
			if err := add(inf, h.Child); err != nil {
				return err
			}
		}
		if sc.workloadInf != nil {
			if err := add(sc.workloadInf, h.Workload); err != nil {
				return err
			}
		}
	}
	if s.cqInf != nil && h.ClusterQueue != nil {
		if _, err := s.cqInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj interface{}) {
				if u, ok := obj.(*unstructured.Unstructured); ok {
					h.ClusterQueue(u.GetName())
				}
			},
			UpdateFunc: func(old, obj interface{}) {
				o, ok1 := old.(*unstructured.Unstructured)
				n, ok2 := obj.(*unstructured.Unstructured)
				// Stripped to its borrowing: only a change of it is news.
				if ok1 && ok2 && !equality.Semantic.DeepEqual(kinds.ClusterQueueOf(o), kinds.ClusterQueueOf(n)) {
					h.ClusterQueue(n.GetName())
				}
			},
			DeleteFunc: func(obj interface{}) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if u, ok := obj.(*unstructured.Unstructured); ok {
					h.ClusterQueue(u.GetName())
				}
			},
		}); err != nil {
			return err
		}
	}
	if s.nodeInf == nil || h.Node == nil {
		return nil
	}
	_, err := s.nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if n, ok := obj.(*corev1.Node); ok && kinds.NodeTroubled(n) {
				h.Node(n)
			}
		},
		UpdateFunc: func(old, obj interface{}) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			// Stripped, a node changes only when its GPU facts do: heartbeats are not news.
			if !ok1 || !ok2 || !kinds.NodeTroubled(o) && !kinds.NodeTroubled(n) {
				return
			}
			if !equality.Semantic.DeepEqual(o.Spec, n.Spec) || !equality.Semantic.DeepEqual(o.Status, n.Status) {
				h.Node(n)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok && kinds.NodeTroubled(n) {
				h.Node(n)
			}
		},
	})
	return err
}

// Start starts every informer; they stop when ctx is done.
func (s *Set) Start(ctx context.Context) {
	if s.nodes != nil {
		s.nodes.Start(ctx.Done())
	}
	if s.clusterQueues != nil {
		s.clusterQueues.Start(ctx.Done())
	}
	for _, sc := range s.scopes {
		go sc.isvcInf.RunWithContext(ctx)
		sc.children.Start(ctx.Done())
		sc.optional.Start(ctx.Done())
		sc.quotas.Start(ctx.Done())
		if sc.workloads != nil {
			sc.workloads.Start(ctx.Done())
		}
	}
}

// HasSynced reports whether every cache has been filled once; /readyz uses it.
func (s *Set) HasSynced() bool {
	if s.nodeInf != nil && !s.nodeInf.HasSynced() || s.cqInf != nil && !s.cqInf.HasSynced() {
		return false
	}
	for _, sc := range s.scopes {
		for _, inf := range []cache.SharedIndexInformer{sc.isvcInf, sc.deploy, sc.rs, sc.svc, sc.hpa, sc.cm, sc.pdb, sc.pod, sc.quotaInf} {
			if !inf.HasSynced() {
				return false
			}
		}
		for _, inf := range sc.optionalInf {
			if !inf.HasSynced() {
				return false
			}
		}
		if sc.workloadInf != nil && !sc.workloadInf.HasSynced() {
			return false
		}
	}
	return true
}

// WaitForCacheSync blocks until every cache has synced or ctx is done.
func (s *Set) WaitForCacheSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), s.HasSynced)
}

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
	return get(s, func(sc *scope) cache.SharedIndexInformer { return sc.optionalInf[gvr] }, cast[*unstructured.Unstructured], namespace, name)
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
