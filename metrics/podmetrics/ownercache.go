package podmetrics

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/informers/unserved"
)

// LWSGroupVersion is the LeaderWorkerSet API the operator's multi-node models use.
const LWSGroupVersion = "leaderworkerset.x-k8s.io/v1"

// lwsNameLabel is on every StatefulSet the LeaderWorkerSet controller makes.
const lwsNameLabel = "leaderworkerset.sigs.k8s.io/name"

// OwnerCaches are Owners from metadata-only informers: name, UID and controller reference of
// each object between a model pod and its InferenceService, nothing else.
type OwnerCaches struct {
	pods      corelisters.PodLister
	listers   map[schema.GroupKind]cache.GenericLister
	informers []cache.SharedIndexInformer
	synced    []cache.InformerSynced
}

var _ Owners = (*OwnerCaches)(nil)

// ownerSource is one kind's cache: the resource to list and the selector that keeps it to
// what the operator (or the LeaderWorkerSet controller for it) made.
type ownerSource struct {
	kind     schema.GroupKind
	resource schema.GroupVersionResource
	selector string
}

// NewOwnerCaches makes the informers (not started); pods is the model pods' cache, which
// holds the leader pods a worker StatefulSet names. The LeaderWorkerSet kinds are cached only
// where that API is served.
func NewOwnerCaches(client metadata.Interface, pods corelisters.PodLister, leaderWorkerSets bool) *OwnerCaches {
	sources := []ownerSource{
		{replicaSetKind, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, ManagedBySelector},
		{deploymentKind, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, ManagedBySelector},
		{isvcKind, schema.GroupVersionResource{Group: isvcKind.Group, Version: "v1alpha1", Resource: "inferenceservices"}, ""},
	}
	if leaderWorkerSets {
		sources = append(sources,
			ownerSource{statefulSetKind, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, lwsNameLabel},
			ownerSource{lwsKind, schema.GroupVersionResource{Group: lwsKind.Group, Version: "v1", Resource: "leaderworkersets"}, ""})
	}
	o := &OwnerCaches{pods: pods, listers: map[schema.GroupKind]cache.GenericLister{}}
	for _, src := range sources {
		selector := src.selector
		inf := metadatainformer.NewFilteredMetadataInformer(client, src.resource, metav1.NamespaceAll, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			func(lo *metav1.ListOptions) { lo.LabelSelector = selector })
		// Only what ServedBy reads: a cluster's ReplicaSets are many.
		_ = inf.Informer().SetTransform(stripOwner)
		o.listers[src.kind] = inf.Lister()
		o.informers = append(o.informers, inf.Informer())
		synced := inf.Informer().HasSynced
		if src.kind == lwsKind {
			// LeaderWorkerSet uninstalled after discovery must not keep the adapter unready.
			if s, err := unserved.Synced(inf.Informer(), src.resource.String()); err == nil {
				synced = s
			}
		}
		o.synced = append(o.synced, synced)
	}
	return o
}

// Start runs the informers until stop closes.
func (o *OwnerCaches) Start(stop <-chan struct{}) {
	for _, inf := range o.informers {
		go inf.Run(stop)
	}
}

// HasSynced is true once every cache has listed (LeaderWorkerSets no longer served count as
// listed and empty).
func (o *OwnerCaches) HasSynced() bool {
	for _, synced := range o.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// Get is the cached object, or nil.
func (o *OwnerCaches) Get(kind schema.GroupKind, namespace, name string) metav1.Object {
	if kind == podKind {
		p, err := o.pods.Pods(namespace).Get(name)
		if err != nil {
			return nil
		}
		return p
	}
	l, ok := o.listers[kind]
	if !ok {
		return nil
	}
	obj, err := l.ByNamespace(namespace).Get(name)
	if err != nil {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return m
}

// stripOwner keeps an object's name, namespace, UID and controller reference.
func stripOwner(obj interface{}) (interface{}, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil // a tombstone: the informer passes it through
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	return out, nil
}
