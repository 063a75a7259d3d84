// The Gateway API HTTPRoute that takes a model's traffic through the gateway: its Route, the
// desired object and whether the Gateway accepted it (drift and set are the optional
// children's, in optional.go).

package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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

// routePath is a route's path as the gateway compares it: without a trailing "/" ("/" itself
// stays "/").
func routePath(p string) string {
	if t := strings.TrimRight(p, "/"); t != "" {
		return t
	}
	return "/"
}

// routeAncestors are the paths of which p is a proper element-wise prefix: "/a/b" has "/" and "/a".
func routeAncestors(p string) []string {
	p = routePath(p)
	if p == "/" {
		return nil
	}
	out := []string{"/"}
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// Route index keys: "=" + a route's path, and "^" + each of its ancestors, so the routes that
// can overlap one are found by a few exact lookups, never a scan of every model.
const (
	routeAtPrefix    = "="
	routeUnderPrefix = "^"
)

// RouteIndexKeys are the index keys of route r (see RouteNeighbourKeys).
func RouteIndexKeys(r Route) []string {
	keys := []string{routeAtPrefix + routePath(r.Path)}
	for _, a := range routeAncestors(r.Path) {
		keys = append(keys, routeUnderPrefix+a)
	}
	return keys
}

// RouteNeighbourKeys are the index keys under which every route that overlaps path is found:
// routes at path or at one of its ancestors, and routes under path.
func RouteNeighbourKeys(path string) []string {
	keys := []string{routeAtPrefix + routePath(path), routeUnderPrefix + routePath(path)}
	for _, a := range routeAncestors(path) {
		keys = append(keys, routeAtPrefix+a)
	}
	return keys
}

// under reports whether path p is q or lies under q element-wise.
func under(p, q string) bool {
	p, q = routePath(p), routePath(q)
	return p == q || q == "/" || strings.HasPrefix(p, q+"/")
}

// RouteConflicts names, for route self, each other model's route that takes its requests or
// whose requests it takes, as a gateway that orders overlapping routes by priority (higher
// wins) and then by the longest path decides: the same path is a conflict whatever the
// priorities; a shorter path conflicts only with a higher priority than the longer one's
// (else the longer path wins its own requests, as meant). One line per other model, sorted.
func RouteConflicts(self Route, others []Route) []string {
	var out []string
	for _, o := range others {
		if o.Namespace == self.Namespace && o.Name == self.Name {
			continue
		}
		who := o.Namespace + "/" + o.Name
		switch sp, op := routePath(self.Path), routePath(o.Path); {
		case sp == op:
			out = append(out, fmt.Sprintf("route %s is also claimed by InferenceService %s (priority %d; this one's %d): a request may reach either model", sp, who, o.Priority, self.Priority))
		case under(sp, op) && o.Priority > self.Priority:
			out = append(out, fmt.Sprintf("route %s is taken over by InferenceService %s's route %s with priority %d over this one's %d", sp, who, op, o.Priority, self.Priority))
		case under(op, sp) && self.Priority > o.Priority:
			out = append(out, fmt.Sprintf("route %s with priority %d takes over InferenceService %s's route %s (priority %d)", sp, self.Priority, who, op, o.Priority))
		}
	}
	slices.Sort(out)
	return out
}

// routeConflictCause is the status cause of a model's route conflicts; nil without any.
func routeConflictCause(in *Input) *Cause {
	if in.Ext.Gateway == nil || len(in.Observed.RouteNeighbours) == 0 {
		return nil
	}
	msgs := RouteConflicts(RouteOf(in.ISVC, &in.Ext), in.Observed.RouteNeighbours)
	if len(msgs) == 0 {
		return nil
	}
	return &Cause{Rank: RankRouteConflict, Reason: ReasonRouteConflict, Message: strings.Join(msgs, "; ") +
		" (a namespace's routes belong under /{namespace}/: the install's tenant-routes policy refuses others)"}
}

// InferencePaths are the model server's paths a client reaches through the gateway: vLLM
// v0.11's OpenAI-compatible inference API and its tokenizer. The rest stays inside the
// cluster: /v1/load_lora_adapter and /v1/unload_lora_adapter (anyone could replace a served
// adapter), /health, /metrics, /reset_prefix_cache, /sleep, /wake_up, /collective_rpc, the
// profiler and the server's info.
var InferencePaths = []string{
	"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings", "/v1/models",
	"/v1/audio/transcriptions", "/v1/audio/translations", "/v1/score", "/v1/rerank",
	"/pooling", "/classify", "/tokenize", "/detokenize",
}

// desiredHTTPRoute routes spec.gateway.route (default /{namespace}/{name}) on the parent
// Gateway to the model's Service, one rule per inference path, the prefix stripped on the way
// in, each with the route's timeouts (routeTimeouts); nil without spec.gateway. Fields the
// Gateway API defaults are written out, so the comparison sees no drift.
func desiredHTTPRoute(isvc *crd.InferenceService, ext *crd.SpecExtensions, parent types.NamespacedName) *unstructured.Unstructured {
	if ext.Gateway == nil {
		return nil
	}
	r := RouteOf(isvc, ext)
	u := newChildUnstructured(isvc, "gateway.networking.k8s.io/v1", KindHTTPRoute)
	rules := make([]interface{}, 0, len(InferencePaths))
	prefix := strings.TrimSuffix(r.Path, "/")
	for _, p := range InferencePaths {
		rules = append(rules, map[string]interface{}{
			"timeouts": routeTimeouts(ext.Gateway),
			"matches": []interface{}{map[string]interface{}{
				"path": map[string]interface{}{"type": "PathPrefix", "value": prefix + p},
			}},
			"filters": []interface{}{map[string]interface{}{
				"type": "URLRewrite",
				"urlRewrite": map[string]interface{}{
					"path": map[string]interface{}{"type": "ReplacePrefixMatch", "replacePrefixMatch": p},
				},
			}},
			"backendRefs": []interface{}{map[string]interface{}{
				"group": "", "kind": "Service", "name": isvc.Name, "port": int64(Port), "weight": int64(1),
			}},
		})
	}
	u.Object["spec"] = map[string]interface{}{
		"parentRefs": []interface{}{map[string]interface{}{
			"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": parent.Namespace, "name": parent.Name,
		}},
		"rules": rules,
	}
	return u
}

// routeTimeouts are a rule's timeouts: spec.gateway.timeouts, request defaulting to
// crd.DefaultRouteRequestTimeout. Without them a gateway applies its own default, which cuts
// long generations and the activator's hold for a cold start (Envoy's 15 s route timeout).
func routeTimeouts(g *crd.Gateway) map[string]interface{} {
	t := map[string]interface{}{"request": g.RequestTimeout()}
	if b := g.BackendRequestTimeout(); b != "" {
		t["backendRequest"] = b
	}
	return t
}

// routeAccepted reports whether the HTTPRoute's status says the parent Gateway accepted it
// for the current generation; a route without status (no Gateway controller) is not.
func routeAccepted(r *unstructured.Unstructured, parent types.NamespacedName) bool {
	for _, conds := range parentConditions(r, parent) {
		for _, cm := range conds {
			if cm["type"] != "Accepted" {
				continue
			}
			gen, found, _ := unstructured.NestedInt64(cm, "observedGeneration")
			if cm["status"] == "True" && (!found || gen == r.GetGeneration()) {
				return true
			}
		}
	}
	return false
}

// parentConditions are the conditions of each status.parents entry a Gateway API object (an
// HTTPRoute, an InferencePool) has for parent, as the Gateway's controller wrote them.
func parentConditions(obj *unstructured.Unstructured, parent types.NamespacedName) [][]map[string]interface{} {
	var out [][]map[string]interface{}
	parents, _, _ := unstructured.NestedSlice(obj.Object, "status", "parents")
	for _, p := range parents {
		pm, ok := p.(map[string]interface{})
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(pm, "parentRef", "name")
		ns, _, _ := unstructured.NestedString(pm, "parentRef", "namespace")
		if name != parent.Name || (ns != "" && ns != parent.Namespace) {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(pm, "conditions")
		var cs []map[string]interface{}
		for _, c := range conds {
			if cm, ok := c.(map[string]interface{}); ok {
				cs = append(cs, cm)
			}
		}
		out = append(out, cs)
	}
	return out
}
