// The model server's requests and limits: desired, shared when the user sets none, and compared.

package reconcile

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/inferenceservice-operator/crd"
)

// desiredResources sets requests so a namespace with a quota admits the pods, GPUs in both
// requests and limits (extended resources require it), and mirrors the API server's defaulting
// (a limit without a request becomes the request) so the comparison never sees a false drift.
func desiredResources(spec *crd.InferenceServiceSpec) corev1.ResourceRequirements {
	if spec.Resources == nil || (len(spec.Resources.Requests) == 0 && len(spec.Resources.Limits) == 0) {
		return sharedResources.get(spec)
	}
	return buildResources(spec)
}

// resourcesKey is all a model's resources depend on when the user sets no requests or limits.
type resourcesKey struct {
	gpu  corev1.ResourceName
	gpus int32
}

// resourceCache holds the requests and limits of models that set none, by GPU resource and
// count: shared, read-only like the rest of the desired children, instead of two maps built
// per reconcile. Bounded: past maxSharedResources keys, each reconcile builds its own.
type resourceCache struct {
	mu sync.RWMutex
	m  map[resourcesKey]corev1.ResourceRequirements
}

const maxSharedResources = 64

var sharedResources = &resourceCache{m: map[resourcesKey]corev1.ResourceRequirements{}}

func (c *resourceCache) get(spec *crd.InferenceServiceSpec) corev1.ResourceRequirements {
	k := resourcesKey{spec.GPUResourceName(), spec.GPUs()}
	c.mu.RLock()
	r, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return r
	}
	r = buildResources(spec)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) < maxSharedResources {
		c.m[k] = r
	}
	return r
}

func buildResources(spec *crd.InferenceServiceSpec) corev1.ResourceRequirements {
	req, lim := crd.DefaultRequests(spec.GPUs()), make(corev1.ResourceList, 1)
	var user crd.Resources
	if spec.Resources != nil {
		user = *spec.Resources
	}
	for k, v := range user.Requests {
		req[k] = v.DeepCopy()
	}
	for k, l := range user.Limits {
		lim[k] = l.DeepCopy()
		// A missing request becomes the limit, as the API server would default it; a default
		// request above a user's limit is lowered to it (a user's own request above its limit
		// is refused by the CRD's CEL rule).
		_, userSet := user.Requests[k]
		if r, ok := req[k]; !ok || (!userSet && r.Cmp(l) > 0) {
			req[k] = l.DeepCopy()
		}
	}
	if g := spec.GPUs(); g > 0 {
		name := spec.GPUResourceName()
		req[name] = *resource.NewQuantity(int64(g), resource.DecimalSI)
		lim[name] = *resource.NewQuantity(int64(g), resource.DecimalSI)
	}
	if len(lim) == 0 {
		lim = nil
	}
	return corev1.ResourceRequirements{Requests: req, Limits: lim}
}

func resourcesDrifted(have, want corev1.ResourceList) bool {
	if len(have) != len(want) {
		return true
	}
	for k, w := range want {
		if h, ok := have[k]; !ok || h.Cmp(w) != 0 {
			return true
		}
	}
	return false
}
