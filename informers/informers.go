// Package informers is step 1 of the pipeline (informers -> queue -> controller sync ->
// reconcile -> controller apply): it hands out the operator's caches, a dynamic informer on
// InferenceService and typed informers on the children it manages, scoped by the managed-by
// label, each child trimmed by package kinds' transforms to what the decision reads (the most
// numerous then packed, packed.go), one set per watched namespace (or one for the whole cluster).
// This file builds and starts the set; transforms.go holds what it stores, indexes.go how it
// finds objects, handlers.go whom it tells of changes, reads.go what it hands out.
package informers

import (
	"context"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	"github.com/example/inferenceservice-operator/informers/unserved"
)

// Options scope the caches.
type Options struct {
	// Namespaces to watch; empty means all namespaces.
	Namespaces []string
	// InferenceServiceIndexers index the InferenceServices for the reads one model makes of
	// others (InferenceServicesByIndex): the controller's route paths, say, so a reconcile
	// finds the few models whose routes overlap its own without a scan.
	InferenceServiceIndexers cache.Indexers
	// Resync re-delivers every cached InferenceService this often (0 disables it). Children are
	// not re-delivered: a child's resync says nothing new (the controller drops it), and
	// a packed child would be decoded for it.
	Resync time.Duration
	// Resource is the InferenceService version to watch; zero means crd.Resource (v1alpha1).
	Resource schema.GroupVersionResource
	// Optional are children kinds from CRDs that may be absent (ServiceMonitors, HTTPRoutes):
	// watched, label-scoped like the others, only when listed, and cached as their JSON (packJSON).
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
	// APIServices watches the aggregator's APIServices (a few dozen), stripped to their
	// availability, so the autoscaling decision knows whether HPAs can read custom metrics at
	// all (needs list and watch on apiservices).
	APIServices bool
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
	cqSynced      cache.InformerSynced
	// APIServices, cluster-wide, nil unless Options.APIServices.
	apiServices   dynamicinformer.DynamicSharedInformerFactory
	apiServiceInf cache.SharedIndexInformer
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
	// synced checks of the informers of CRDs' kinds (the optional children, Workloads): a
	// kind whose CRD goes between discovery and the first list counts as synced and empty
	crdSynced []cache.InformerSynced
	// ResourceQuotas are an admin's, not labelled by the operator: their own unscoped factory,
	// read only by the metrics collector at scrape time, so no resync.
	quotas   informers.SharedInformerFactory
	quotaInf cache.SharedIndexInformer
	// Kueue's Workloads, unscoped (Kueue labels them with its own keys only); nil unless
	// Options.Workloads.
	workloads   dynamicinformer.DynamicSharedInformerFactory
	workloadInf cache.SharedIndexInformer
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
		sc.isvcInf = dynamicinformer.NewFilteredDynamicInformer(dyn, res, ns, opts.Resync, maps.Clone(opts.InferenceServiceIndexers), nil).Informer()
		must(sc.isvcInf.SetTransform(newInferenceServiceDecoder().decode))
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
		must(sc.pod.SetTransform(pack(stripPodSeenIn(sc.pod))))
		sc.optional = dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, tweak)
		sc.optionalInf = map[schema.GroupVersionResource]cache.SharedIndexInformer{}
		for _, gvr := range opts.Optional {
			inf := sc.optional.ForResource(gvr).Informer()
			must(inf.SetTransform(packJSON(StripManagedFields)))
			sc.optionalInf[gvr] = inf
			sc.crdSynced = append(sc.crdSynced, mustSynced(inf, gvr))
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
			sc.crdSynced = append(sc.crdSynced, mustSynced(sc.workloadInf, kinds.KueueWorkloadGVR))
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
		s.cqSynced = mustSynced(s.cqInf, kinds.KueueClusterQueueGVR)
	}
	if opts.APIServices {
		s.apiServices = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
		s.apiServiceInf = s.apiServices.ForResource(kinds.APIServiceGVR).Informer()
		must(s.apiServiceInf.SetTransform(kinds.StripAPIService))
	}
	return s
}

// mustSynced is unserved.Synced of an informer not started yet.
func mustSynced(inf cache.SharedIndexInformer, gvr schema.GroupVersionResource) cache.InformerSynced {
	synced, err := unserved.Synced(inf, gvr.String())
	must(err)
	return synced
}

func must(err error) {
	if err != nil {
		panic(err) // only on programmer error: a transform set after the informer started
	}
}

// Start starts every informer; they stop when ctx is done.
func (s *Set) Start(ctx context.Context) {
	if s.nodes != nil {
		s.nodes.Start(ctx.Done())
	}
	if s.clusterQueues != nil {
		s.clusterQueues.Start(ctx.Done())
	}
	if s.apiServices != nil {
		s.apiServices.Start(ctx.Done())
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

// HasSynced reports whether every cache has been filled once (a CRD kind no longer served
// counts as filled and empty: informers/unserved); /readyz uses it.
func (s *Set) HasSynced() bool {
	if s.nodeInf != nil && !s.nodeInf.HasSynced() || s.cqSynced != nil && !s.cqSynced() || s.apiServiceInf != nil && !s.apiServiceInf.HasSynced() {
		return false
	}
	for _, sc := range s.scopes {
		for _, inf := range []cache.SharedIndexInformer{sc.isvcInf, sc.deploy, sc.rs, sc.svc, sc.hpa, sc.cm, sc.pdb, sc.pod, sc.quotaInf} {
			if !inf.HasSynced() {
				return false
			}
		}
		for _, synced := range sc.crdSynced {
			if !synced() {
				return false
			}
		}
	}
	return true
}

// WaitForCacheSync blocks until every cache has synced or ctx is done.
func (s *Set) WaitForCacheSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), s.HasSynced)
}
