package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

// desiredCache keeps each isvc's Desired for its current generation: building the children
// is most of a converged reconcile's cost, and resyncs reconcile every object.
type desiredCache struct {
	mu sync.Mutex
	m  map[queue.Key]desiredEntry
}

type desiredEntry struct {
	uid        types.UID
	generation int64
	// ext is the v1beta1 spec annotation: on a v1alpha1 object it can change without the
	// generation.
	ext string
	d   *Desired
}

func (c *desiredCache) get(k queue.Key, isvc *crd.InferenceService, ext *crd.SpecExtensions, f Features) *Desired {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := isvc.Annotations[crd.AnnotationV1beta1Spec]
	if e, ok := c.m[k]; ok && e.uid == isvc.UID && e.generation == isvc.Generation && isvc.Generation != 0 && e.ext == a {
		return e.d
	}
	d := DesiredChildren(isvc, ext, f)
	if c.m == nil {
		c.m = map[queue.Key]desiredEntry{}
	}
	c.m[k] = desiredEntry{uid: isvc.UID, generation: isvc.Generation, ext: a, d: d}
	return d
}

func (c *desiredCache) forget(k queue.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}
