// Whom the caches tell of a change: the controller's handlers, each informer's events
// filtered down to what is news for it.

package informers

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

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
			if err := add(inf, unpackedJSON(h.Child)); err != nil {
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
		if _, err := s.cqInf.AddEventHandler(borrowingChanges(h.ClusterQueue)); err != nil {
			return err
		}
	}
	if s.nodeInf == nil || h.Node == nil {
		return nil
	}
	_, err := s.nodeInf.AddEventHandler(troubleChanges(h.Node))
	return err
}

// borrowingChanges calls changed with the name of a ClusterQueue added, deleted, or whose
// borrowing changed: stripped to its borrowing, only a change of it is news.
func borrowingChanges(changed func(name string)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				changed(u.GetName())
			}
		},
		UpdateFunc: func(old, obj interface{}) {
			o, ok1 := old.(*unstructured.Unstructured)
			n, ok2 := obj.(*unstructured.Unstructured)
			if ok1 && ok2 && !equality.Semantic.DeepEqual(kinds.ClusterQueueOf(o), kinds.ClusterQueueOf(n)) {
				changed(n.GetName())
			}
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				changed(u.GetName())
			}
		},
	}
}

// troubleChanges calls changed with a node whose GPU trouble began, changed or ended.
// Stripped, a node changes only when its GPU facts do: heartbeats are not news.
func troubleChanges(changed func(*corev1.Node)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if n, ok := obj.(*corev1.Node); ok && kinds.NodeTroubled(n) {
				changed(n)
			}
		},
		UpdateFunc: func(old, obj interface{}) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if !ok1 || !ok2 || !kinds.NodeTroubled(o) && !kinds.NodeTroubled(n) {
				return
			}
			if !equality.Semantic.DeepEqual(o.Spec, n.Spec) || !equality.Semantic.DeepEqual(o.Status, n.Status) {
				changed(n)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok && kinds.NodeTroubled(n) {
				changed(n)
			}
		},
	}
}
