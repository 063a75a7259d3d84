package controller

import (
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/queue"
)

// namesakes remembers the children whose create found someone else's object of the same name.
// Such an object is outside the label-scoped caches, so without this every retry and resync
// would send a create the API server refuses; with it, they read the namesake instead. Only
// children in conflict are held, under the isvc that controls them, and an entry goes when the
// namesake does or the isvc is gone. A view of the controller's memory.
type namesakes memory

// namesake is one child: its kind, namespace and name.
type namesake struct{ kind, namespace, name string }

// namesakeOf is a's child and the isvc it belongs to; false for a child no isvc controls.
func namesakeOf(a reconcile.Action) (queue.Key, namesake, bool) {
	k, ok := ownerKey(a.Object)
	return k, namesake{a.Kind, a.Object.GetNamespace(), a.Object.GetName()}, ok
}

func (n *namesakes) seen(a reconcile.Action) bool {
	k, ns, ok := namesakeOf(a)
	if !ok {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	r := (*memory)(n).lookup(k)
	if r == nil {
		return false
	}
	_, seen := r.namesakes[ns]
	return seen
}

func (n *namesakes) add(a reconcile.Action) {
	k, ns, ok := namesakeOf(a)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	r := (*memory)(n).entry(k)
	if r.namesakes == nil {
		r.namesakes = map[namesake]struct{}{}
	}
	r.namesakes[ns] = struct{}{}
}

func (n *namesakes) forget(a reconcile.Action) {
	k, ns, ok := namesakeOf(a)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if r := (*memory)(n).lookup(k); r != nil {
		delete(r.namesakes, ns)
		(*memory)(n).tidy(k)
	}
}
