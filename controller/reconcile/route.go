package reconcile

import (
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// Route is what the gateway needs to send a model's traffic to its Service.
type Route struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Model     string `json:"model"`
	Service   string `json:"service"`
	Port      int    `json:"port"`
	// Path is the route's prefix (spec.gateway.route, default /{namespace}/{name}).
	Path string `json:"path"`
	// Priority orders overlapping routes; higher wins.
	Priority int32 `json:"priority,omitempty"`
	// Adapters are the LoRA adapters served under the route besides the base model.
	Adapters []string `json:"adapters,omitempty"`
}

// RouteOf is the route registered for an InferenceService.
func RouteOf(isvc *crd.InferenceService, ext *crd.SpecExtensions) Route {
	r := Route{Namespace: isvc.Namespace, Name: isvc.Name, Model: isvc.Spec.Model, Service: isvc.Name, Port: Port,
		Path: "/" + isvc.Namespace + "/" + isvc.Name}
	for _, a := range ext.Adapters {
		r.Adapters = append(r.Adapters, a.Name)
	}
	if g := ext.Gateway; g != nil {
		if g.Route != "" {
			r.Path = g.Route
		}
		r.Priority = ptr.Deref(g.Priority, 0)
	}
	return r
}
