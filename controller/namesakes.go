package controller

import (
	"sync"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// namesakes remembers the children whose create found someone else's object of the same name.
// Such an object is outside the label-scoped caches, so without this every retry and resync
// would send a create the API server refuses; with it, they read the namesake instead. Only
// children in conflict are held, and an entry goes when the namesake does or the isvc is gone.
type namesakes struct {
	mu sync.Mutex
	m  map[namesake]struct{}
}

// namesake is one child: its kind, namespace and name.
type namesake struct{ kind, namespace, name string }

func namesakeOf(a reconcile.Action) namesake {
	return namesake{a.Kind, a.Object.GetNamespace(), a.Object.GetName()}
}

func (n *namesakes) seen(a reconcile.Action) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.m[namesakeOf(a)]
	return ok
}

func (n *namesakes) add(a reconcile.Action) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[namesake]struct{}{}
	}
	n.m[namesakeOf(a)] = struct{}{}
}

func (n *namesakes) forget(a reconcile.Action) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, namesakeOf(a))
}

// forgetAll drops what was remembered for a deleted InferenceService's children.
func (n *namesakes) forgetAll(namespace, isvc string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k := range n.m {
		if k.namespace == namespace && (k.name == isvc || k.name == reconcile.AdaptersConfigMapName(isvc)) {
			delete(n.m, k)
		}
	}
}
