// Event handlers: each informer event becomes the key of the InferenceService it concerns.

package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

// Handlers are the informer event handlers: each maps an event to the InferenceService key.
func (c *Controller) Handlers() informers.Handlers {
	return informers.Handlers{
		// An InferenceService's resync is its periodic reconcile: it re-checks what no event
		// reports (a gateway route lost, an unlabeled namesake gone) and writes nothing when
		// converged. A change also wakes the models whose routes overlap its own (routes.go).
		InferenceService: c.isvcHandler(),
		Child:            c.childHandler(),
		ReplicaSet:       c.handler(false, c.enqueueDeploymentOwner),
		Pod:              c.handler(false, c.enqueuePodOwner),
		Workload:         c.handler(false, c.enqueueWorkloadPodOwner),
		Node:             c.enqueueNodeModels,
		// Borrowing is the ClusterQueue's: every model it admitted says so.
		ClusterQueue: func(name string) {
			for _, w := range c.caches.AdmittedBy(name) {
				c.enqueueWorkloadPodOwner(w)
			}
		},
	}
}

// childHandler enqueues a child's owner; a child added is one of its creates seen (expected).
func (c *Controller) childHandler() cache.ResourceEventHandler {
	h := c.handler(false, c.enqueueOwner)
	add := h.AddFunc
	h.AddFunc = func(obj interface{}) {
		if m, err := metaOf(obj); err == nil {
			if k, ok := ownerKey(m); ok {
				c.memory.expected().observed(k)
			}
		}
		add(obj)
	}
	return h
}

// ownerKey is the InferenceService that controls obj.
func ownerKey(obj metav1.Object) (queue.Key, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != crd.Kind || !reconcile.IsOurGroup(ref.APIVersion) {
		return queue.Key{}, false
	}
	return queue.Key{Namespace: obj.GetNamespace(), Name: ref.Name}, true
}

// enqueueNodeModels enqueues the models with pods on a node whose GPU trouble changed, and
// those with pods still pending (a shortage of GPUs names the nodes whose GPUs are not
// allocatable).
func (c *Controller) enqueueNodeModels(n *corev1.Node) {
	for _, p := range c.caches.PodsOnNode(n.Name, true) {
		c.enqueuePodOwner(p)
	}
}

// handler unwraps tombstones and, unless resyncs are wanted, skips updates whose
// resourceVersion did not change (a resync of a child says nothing new).
func (c *Controller) handler(resyncs bool, enqueue func(metav1.Object)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if m, err := metaOf(obj); err == nil {
				enqueue(m)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, err1 := metaOf(oldObj)
			n, err2 := metaOf(newObj)
			if err1 == nil && err2 == nil && (resyncs || o.GetResourceVersion() != n.GetResourceVersion()) {
				enqueue(n)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if m, err := metaOf(obj); err == nil {
				enqueue(m)
			}
		},
	}
}

func metaOf(obj interface{}) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	return m, nil
}

// enqueueOwner maps a child to its InferenceService through the controller reference. No UID
// check: a child of a deleted namesake wakes the current one, which waits for it to be
// garbage-collected (ReplacingPrevious) and creates its own the moment it is gone. A child
// controlled by someone else but carrying the instance label still wakes its namesake, whose
// status names it.
func (c *Controller) enqueueOwner(obj metav1.Object) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != crd.Kind || !reconcile.IsOurGroup(ref.APIVersion) {
		if name, ok := obj.GetLabels()[kinds.InstanceLabel]; ok {
			c.queue.Add(queue.Key{Namespace: obj.GetNamespace(), Name: name})
		}
		return
	}
	c.queue.Add(queue.Key{Namespace: obj.GetNamespace(), Name: ref.Name})
}

// enqueueDeploymentOwner maps a ReplicaSet to its Deployment, then to the InferenceService.
func (c *Controller) enqueueDeploymentOwner(obj metav1.Object) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != "Deployment" {
		return
	}
	d, ok, err := c.caches.Deployment(obj.GetNamespace(), ref.Name)
	if err != nil || !ok || d.UID != ref.UID {
		return
	}
	c.enqueueOwner(d)
}

// enqueuePodOwner maps a Pod to its ReplicaSet's Deployment's InferenceService.
func (c *Controller) enqueuePodOwner(obj metav1.Object) {
	if name, ok := obj.GetLabels()[kinds.InstanceLabel]; ok {
		// The instance label is ours and immutable on the template; pods of a rollout in
		// progress may belong to a ReplicaSet the cache has not seen yet. A canary's pods
		// name their model with a suffix no model's name has.
		if stable, canary := reconcile.StableOfCanary(name); canary {
			name = stable
		}
		c.queue.Add(queue.Key{Namespace: obj.GetNamespace(), Name: name})
	}
}

// enqueueWorkloadPodOwner maps a Kueue Workload to the model of the pod that owns it: what
// Kueue says about a gated pod (short of quota, preempting) is in the model's status.
func (c *Controller) enqueueWorkloadPodOwner(obj metav1.Object) {
	for _, r := range obj.GetOwnerReferences() {
		if r.Kind != "Pod" {
			continue
		}
		if p, ok, err := c.caches.Pod(obj.GetNamespace(), r.Name); err == nil && ok && p.UID == r.UID {
			c.enqueuePodOwner(p)
		}
	}
}
