package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Backend is one backendRef of an HTTPRoute rule.
type Backend struct {
	Group, Kind, Namespace, Name string
	Port                         int64
	Weight                       int64
}

// IsPool says the backend is an InferencePool (inference.networking.k8s.io).
func (b Backend) IsPool() bool { return b.Group == PoolGroup && b.Kind == "InferencePool" }

// IsService says the backend is a core Service.
func (b Backend) IsService() bool { return b.Group == "" && (b.Kind == "" || b.Kind == "Service") }

func (b Backend) String() string {
	k := b.Kind
	if k == "" {
		k = "Service"
	}
	return fmt.Sprintf("%s/%s/%s:%d", k, b.Namespace, b.Name, b.Port)
}

// Rule is one (match, rule) pair of an HTTPRoute: a PathPrefix match and what it does.
type Rule struct {
	Route   string // namespace/name of the HTTPRoute
	Prefix  string // PathPrefix value ("/" without matches)
	Rewrite *string
	// SetHeaders are the RequestHeaderModifier filter's set and add entries (add as set: one
	// value a header is all this gateway's routes use).
	SetHeaders map[string]string
	Backends   []Backend
	// Timeouts are the rule's timeouts (timeouts.go).
	Timeouts Timeouts
}

// Match finds the rule for path: the longest PathPrefix that matches it element-wise, as the
// Gateway API's precedence orders path matches, then the rules' order.
func Match(rules []Rule, path string) (Rule, bool) {
	best, found := Rule{}, false
	for _, r := range rules {
		if !prefixMatches(r.Prefix, path) {
			continue
		}
		if !found || len(strings.TrimSuffix(r.Prefix, "/")) > len(strings.TrimSuffix(best.Prefix, "/")) {
			best, found = r, true
		}
	}
	return best, found
}

// prefixMatches is the Gateway API's PathPrefix: a match on whole path elements, a trailing
// "/" in the prefix ignored ("/abc" matches "/abc" and "/abc/x", not "/abcd").
func prefixMatches(prefix, path string) bool {
	p := strings.TrimSuffix(prefix, "/")
	if p == "" {
		return strings.HasPrefix(path, "/")
	}
	return path == p || strings.HasPrefix(path, p+"/")
}

// Rewrite applies the rule's URLRewrite ReplacePrefixMatch to path (which the rule matched).
func (r Rule) RewritePath(path string) string {
	if r.Rewrite == nil {
		return path
	}
	rest := strings.TrimPrefix(path, strings.TrimSuffix(r.Prefix, "/"))
	repl := *r.Rewrite
	switch {
	case rest == "":
		if repl == "" {
			return "/"
		}
		return repl
	case strings.HasSuffix(repl, "/"):
		return repl + strings.TrimPrefix(rest, "/")
	}
	return repl + rest
}

// ParentsGateway says whether the route's parentRefs name the Gateway ns/name, and returns
// that parentRef (as written, for status).
func ParentsGateway(route *unstructured.Unstructured, ns, name string) (map[string]any, bool) {
	refs, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
	for _, r := range refs {
		ref, ok := r.(map[string]any)
		if !ok {
			continue
		}
		g, _ := ref["group"].(string)
		k, _ := ref["kind"].(string)
		n, _ := ref["name"].(string)
		rns, _ := ref["namespace"].(string)
		if rns == "" {
			rns = route.GetNamespace()
		}
		if (g == "" || g == "gateway.networking.k8s.io") && (k == "" || k == "Gateway") && n == name && rns == ns {
			return ref, true
		}
	}
	return nil, false
}

// Rules reads the route's rules: one Rule per PathPrefix match (a rule without matches is
// "/"); other match types are skipped, filters other than URLRewrite ReplacePrefixMatch and
// RequestHeaderModifier set/add ignored.
func Rules(route *unstructured.Unstructured) []Rule {
	var out []Rule
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	for _, ru := range rules {
		rule, ok := ru.(map[string]any)
		if !ok {
			continue
		}
		var rewrite *string
		var setHeaders map[string]string
		filters, _, _ := unstructured.NestedSlice(rule, "filters")
		for _, f := range filters {
			fm, _ := f.(map[string]any)
			if t, _, _ := unstructured.NestedString(fm, "type"); t == "RequestHeaderModifier" {
				for _, op := range []string{"set", "add"} {
					hs, _, _ := unstructured.NestedSlice(fm, "requestHeaderModifier", op)
					for _, h := range hs {
						hm, _ := h.(map[string]any)
						n, _ := hm["name"].(string)
						v, _ := hm["value"].(string)
						if setHeaders == nil {
							setHeaders = map[string]string{}
						}
						setHeaders[n] = v
					}
				}
				continue
			}
			if t, _, _ := unstructured.NestedString(fm, "type"); t != "URLRewrite" {
				continue
			}
			if pt, _, _ := unstructured.NestedString(fm, "urlRewrite", "path", "type"); pt == "ReplacePrefixMatch" {
				v, _, _ := unstructured.NestedString(fm, "urlRewrite", "path", "replacePrefixMatch")
				rewrite = &v
			}
		}
		timeouts := parseTimeouts(rule)
		var backends []Backend
		refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
		for _, b := range refs {
			bm, _ := b.(map[string]any)
			be := Backend{Namespace: route.GetNamespace(), Weight: 1}
			be.Group, _, _ = unstructured.NestedString(bm, "group")
			be.Kind, _, _ = unstructured.NestedString(bm, "kind")
			be.Name, _, _ = unstructured.NestedString(bm, "name")
			if ns, _, _ := unstructured.NestedString(bm, "namespace"); ns != "" {
				be.Namespace = ns
			}
			be.Port = nestedInt(bm, "port")
			if w, ok := bm["weight"]; ok {
				be.Weight = toInt(w)
			}
			backends = append(backends, be)
		}
		matches, _, _ := unstructured.NestedSlice(rule, "matches")
		if len(matches) == 0 {
			out = append(out, Rule{Route: route.GetNamespace() + "/" + route.GetName(), Prefix: "/", Rewrite: rewrite, SetHeaders: setHeaders, Backends: backends, Timeouts: timeouts})
		}
		for _, m := range matches {
			mm, _ := m.(map[string]any)
			t, _, _ := unstructured.NestedString(mm, "path", "type")
			v, found, _ := unstructured.NestedString(mm, "path", "value")
			if !found {
				v = "/"
			}
			if t != "" && t != "PathPrefix" && !(t == "Exact" && v == "/") {
				continue // Exact and RegularExpression are not implemented
			}
			out = append(out, Rule{Route: route.GetNamespace() + "/" + route.GetName(), Prefix: v, Rewrite: rewrite, SetHeaders: setHeaders, Backends: backends, Timeouts: timeouts})
		}
	}
	return out
}

func nestedInt(m map[string]any, field string) int64 { return toInt(m[field]) }

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}

func labelsEverything() labels.Selector { return labels.Everything() }

// GrantPermits says whether ReferenceGrant u lets HTTPRoutes of namespace from reference the
// object group/kind/name in u's namespace.
func GrantPermits(u *unstructured.Unstructured, from, group, kind, name string) bool {
	froms, _, _ := unstructured.NestedSlice(u.Object, "spec", "from")
	tos, _, _ := unstructured.NestedSlice(u.Object, "spec", "to")
	fromOK := false
	for _, f := range froms {
		fm, _ := f.(map[string]any)
		if fm["group"] == "gateway.networking.k8s.io" && fm["kind"] == "HTTPRoute" && fm["namespace"] == from {
			fromOK = true
		}
	}
	if !fromOK {
		return false
	}
	for _, t := range tos {
		tm, _ := t.(map[string]any)
		g, _ := tm["group"].(string)
		k, _ := tm["kind"].(string)
		n, _ := tm["name"].(string)
		if g == group && k == kind && (n == "" || n == name) {
			return true
		}
	}
	return false
}
