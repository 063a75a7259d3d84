// What one model's gateway route reads of the others: the InferenceServices indexed by their
// route paths (so a reconcile finds the few whose routes overlap its own, and a route's
// change wakes them) and by whether they go through the activator (so the namespace's
// ReferenceGrant goes with the last model that needs it).

package controller

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

// The InferenceService indexes the controller reads (informers.Options.InferenceServiceIndexers).
const (
	// byRoute: reconcile.RouteIndexKeys of each model with spec.gateway.
	byRoute = "route"
	// byActivatorGrant: the namespace of each model whose route goes through the activator.
	byActivatorGrant = "activatorGrant"
)

// InferenceServiceIndexers are the indexes the controller's route reads need.
func InferenceServiceIndexers() cache.Indexers {
	return cache.Indexers{byRoute: routeIndex, byActivatorGrant: activatorGrantIndex}
}

// gatewayOf is a cached model's route, if it has spec.gateway; an object that does not decode
// has none (its reconcile reports it).
func gatewayOf(obj interface{}) (*crd.InferenceService, *crd.SpecExtensions, bool) {
	isvc, ok := obj.(*crd.InferenceService)
	if !ok {
		return nil, nil, false
	}
	ext, _, err := crd.ExtensionsOf(isvc)
	if err != nil || ext.Gateway == nil {
		return nil, nil, false
	}
	return isvc, &ext, true
}

func routeIndex(obj interface{}) ([]string, error) {
	isvc, ext, ok := gatewayOf(obj)
	if !ok {
		return nil, nil
	}
	return reconcile.RouteIndexKeys(reconcile.RouteOf(isvc, ext)), nil
}

func activatorGrantIndex(obj interface{}) ([]string, error) {
	isvc, ext, ok := gatewayOf(obj)
	if !ok || !reconcile.NeedsActivatorGrant(ext) {
		return nil, nil
	}
	return []string{isvc.Namespace}, nil
}

// routeNeighbours are the models whose routes overlap path (the model at key excluded), each
// once.
func (c *Controller) routeNeighbours(path string, key queue.Key) ([]*crd.InferenceService, error) {
	seen := map[queue.Key]bool{key: true}
	var out []*crd.InferenceService
	for _, k := range reconcile.RouteNeighbourKeys(path) {
		found, err := c.caches.InferenceServicesByIndex(byRoute, k)
		if err != nil {
			return nil, fmt.Errorf("route index %s: %w", k, err)
		}
		for _, i := range found {
			if k := (queue.Key{Namespace: i.Namespace, Name: i.Name}); !seen[k] {
				seen[k] = true
				out = append(out, i)
			}
		}
	}
	return out, nil
}

// observeRoutes reads the other models' routes that overlap this one's, and whether another
// model of the namespace needs the activator's grant.
func (c *Controller) observeRoutes(obs *reconcile.Observed, isvc *crd.InferenceService, ext *crd.SpecExtensions) error {
	key := queue.Key{Namespace: isvc.Namespace, Name: isvc.Name}
	if ext.Gateway != nil {
		others, err := c.routeNeighbours(reconcile.RouteOf(isvc, ext).Path, key)
		if err != nil {
			return err
		}
		for _, o := range others {
			if oext, _, err := crd.ExtensionsOf(o); err == nil && oext.Gateway != nil && o.DeletionTimestamp == nil {
				obs.RouteNeighbours = append(obs.RouteNeighbours, reconcile.RouteOf(o, &oext))
			}
		}
	}
	if obs.ActivatorGrant != nil {
		needed, err := c.grantNeeded(isvc.Namespace, isvc.Name)
		if err != nil {
			return err
		}
		obs.GrantNeededElsewhere = needed
	}
	return nil
}

// grantNeeded reports whether a model of namespace ns other than except goes through the
// activator.
func (c *Controller) grantNeeded(ns, except string) (bool, error) {
	found, err := c.caches.InferenceServicesByIndex(byActivatorGrant, ns)
	if err != nil {
		return false, fmt.Errorf("activator grant index %s: %w", ns, err)
	}
	for _, i := range found {
		if i.Name != except {
			return true, nil
		}
	}
	return false, nil
}

// enqueueRouteNeighbours wakes the models whose routes overlap obj's, so a route that arrives,
// moves or goes is named on (or cleared from) their status too.
func (c *Controller) enqueueRouteNeighbours(obj interface{}) {
	isvc, ext, ok := gatewayOf(obj)
	if !ok {
		return
	}
	others, err := c.routeNeighbours(reconcile.RouteOf(isvc, ext).Path, queue.Key{Namespace: isvc.Namespace, Name: isvc.Name})
	if err != nil {
		return // the index is configured with the caches; an error is no neighbour found
	}
	for _, o := range others {
		c.queue.Add(queue.Key{Namespace: o.Namespace, Name: o.Name})
	}
}

// isvcHandler enqueues the model of each event (its resync is its periodic reconcile), and on
// a real change the models whose routes overlap its route before and after.
func (c *Controller) isvcHandler() cache.ResourceEventHandlerFuncs {
	h := c.handler(true, func(obj metav1.Object) {
		c.queue.Add(queue.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()})
	})
	add, update, del := h.AddFunc, h.UpdateFunc, h.DeleteFunc
	h.AddFunc = func(obj interface{}) {
		add(obj)
		c.enqueueRouteNeighbours(obj)
	}
	h.UpdateFunc = func(oldObj, newObj interface{}) {
		update(oldObj, newObj)
		// The cache now holds newObj: a status write it shows is forgotten here, not at the
		// model's next reconcile, which a busy queue holds back for minutes (10,000 statuses).
		if isvc, ok := newObj.(*crd.InferenceService); ok {
			c.memory.echoes().settle(queue.Key{Namespace: isvc.Namespace, Name: isvc.Name}, isvc, c.now())
		}
		o, err1 := metaOf(oldObj)
		n, err2 := metaOf(newObj)
		if err1 == nil && err2 == nil && o.GetResourceVersion() != n.GetResourceVersion() {
			c.enqueueRouteNeighbours(oldObj)
			c.enqueueRouteNeighbours(newObj)
		}
	}
	h.DeleteFunc = func(obj interface{}) {
		del(obj)
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		c.enqueueRouteNeighbours(obj)
	}
	return h
}

// sweepActivatorGrant deletes namespace ns's grant once no model of it needs one: run when a
// model is gone, since no reconcile of it remains to decide that.
func (c *Controller) sweepActivatorGrant(ctx context.Context, ns string) error {
	f := c.features
	if !f.ReferenceGrants || f.Activator.Name == "" || f.Activator.Namespace == ns {
		return nil
	}
	live, ok, err := c.caches.Optional(reconcile.ReferenceGrantGVR, f.Activator.Namespace, reconcile.ActivatorGrantName(ns))
	if err != nil || !ok {
		return err
	}
	needed, err := c.grantNeeded(ns, "")
	if err != nil {
		return err
	}
	grant := reconcile.GrantUnneeded(live, needed)
	if grant == nil {
		return nil
	}
	if _, err = c.apply(ctx, reconcile.Action{Verb: reconcile.Delete, Kind: reconcile.KindReferenceGrant, Object: grant}); err != nil {
		return fmt.Errorf("deleting ReferenceGrant %s/%s: %w", grant.GetNamespace(), grant.GetName(), err)
	}
	klog.InfoS("Deleted the namespace's ReferenceGrant: no model of it routes through the activator", "referenceGrant", klog.KObj(grant), "namespace", ns)
	return nil
}
