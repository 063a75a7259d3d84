package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
)

// Requests to /<prefix>/v1/... reach the server at /v1/..., a trailing slash in the prefix
// or not.
func TestHTTPRouteRewritesPrefix(t *testing.T) {
	for _, prefix := range []string{"/models/qwen3", "/models/qwen3/"} {
		w := newWorld(1)
		w.ext.Gateway = &crd.Gateway{Route: prefix}
		r := DesiredChildren(w.isvc, &w.ext, Features{HTTPRoutes: true, GatewayParent: types.NamespacedName{Namespace: "gw", Name: "public"}}).HTTPRoute
		if got := httpRouteRewrite(r, "/models/qwen3/v1/chat/completions"); got != "/v1/chat/completions" {
			t.Errorf("prefix %q: the server sees %q", prefix, got)
		}
	}
}

// TestRouteConflicts: the same path conflicts whatever the priorities; a shorter path only
// with a higher priority than the longer one's (then it takes the longer one's requests);
// nothing else, and never a model with itself.
func TestRouteConflicts(t *testing.T) {
	self := Route{Namespace: "a", Name: "llama", Path: "/a/llama"}
	for _, c := range []struct {
		name  string
		other Route
		want  string
	}{
		{"same path", Route{Namespace: "b", Name: "evil", Path: "/a/llama/"}, "route /a/llama is also claimed by InferenceService b/evil"},
		{"root with priority", Route{Namespace: "b", Name: "evil", Path: "/", Priority: 1000}, "route /a/llama is taken over by InferenceService b/evil's route / with priority 1000 over this one's 0"},
		{"ancestor with priority", Route{Namespace: "b", Name: "evil", Path: "/a", Priority: 1}, "taken over by InferenceService b/evil's route /a"},
		{"root without priority", Route{Namespace: "b", Name: "evil", Path: "/"}, ""},
		{"under it, lower priority", Route{Namespace: "a", Name: "sub", Path: "/a/llama/x"}, ""},
		{"a sibling", Route{Namespace: "a", Name: "llamas", Path: "/a/llamas", Priority: 1000}, ""},
		{"itself", Route{Namespace: "a", Name: "llama", Path: "/a/llama"}, ""},
	} {
		got := strings.Join(RouteConflicts(self, []Route{c.other}), "; ")
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	// The other side of a take-over names it too.
	high := Route{Namespace: "b", Name: "evil", Path: "/", Priority: 1000}
	if got := RouteConflicts(high, []Route{self}); len(got) != 1 || !strings.Contains(got[0], "takes over InferenceService a/llama's route /a/llama") {
		t.Fatalf("the taker's side: %q", got)
	}
}

// TestRouteIndexKeys: every route that can overlap another is found under the other's
// neighbour keys, and a sibling is not.
func TestRouteIndexKeys(t *testing.T) {
	at := func(r Route, path string) bool {
		for _, k := range RouteIndexKeys(r) {
			if slices.Contains(RouteNeighbourKeys(path), k) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		route, path string
		want        bool
	}{
		{"/a/llama", "/a/llama/", true}, {"/", "/a/llama", true}, {"/a", "/a/llama", true},
		{"/a/llama/x", "/a/llama", true}, {"/a/llama", "/", true}, {"/a/llamas", "/a/llama", false}, {"/b", "/a/llama", false},
	} {
		if got := at(Route{Path: c.route}, c.path); got != c.want {
			t.Errorf("route %s found from %s: %v, want %v", c.route, c.path, got, c.want)
		}
	}
}

// TestRouteConflictInStatus: a conflict is the serving model's Progressing reason (a failing
// one, so a Warning Event goes out) and its Routed condition's.
func TestRouteConflictInStatus(t *testing.T) {
	w := newWorld(1)
	w.ext.Gateway = &crd.Gateway{}
	w.f = Features{HTTPRoutes: true, GatewayParent: types.NamespacedName{Namespace: "gw", Name: "public"}}
	w.apply(w.reconcile().Actions)
	w.podsReady()
	w.obs.RouteNeighbours = []Route{{Namespace: "b", Name: "evil", Path: "/default/qwen3"}}
	st := w.reconcile().Status
	c := meta.FindStatusCondition(st.Conditions, crd.ConditionProgressing)
	if c == nil || c.Reason != ReasonRouteConflict || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "InferenceService b/evil") || st.Reason != ReasonRouteConflict {
		t.Fatalf("Progressing %+v, reason %q", c, st.Reason)
	}
	if r := meta.FindStatusCondition(st.Conditions, crd.ConditionRouted); r == nil || r.Reason != ReasonRouteConflict || r.Status != metav1.ConditionFalse {
		t.Fatalf("Routed %+v", r)
	}
	if _, _, ok := NewWarning(&crd.InferenceServiceStatus{}, &st); !ok {
		t.Fatal("no Warning for a route conflict")
	}
	w.obs.RouteNeighbours = nil
	if c := meta.FindStatusCondition(w.reconcile().Status.Conditions, crd.ConditionProgressing); c == nil || c.Reason == ReasonRouteConflict {
		t.Fatalf("conflict gone, Progressing %+v", c)
	}
}

// TestHTTPRouteTimeouts: every rule carries the route's timeouts, request 300s by default
// (longer than the activator's 3m hold), the spec's when set; the routes through the
// activator and the pool keep them.
func TestHTTPRouteTimeouts(t *testing.T) {
	for _, tc := range []struct {
		gw   crd.Gateway
		want string
	}{
		{crd.Gateway{}, "map[request:300s]"},
		{crd.Gateway{Timeouts: &crd.RouteTimeouts{BackendRequest: "1m"}}, "map[backendRequest:1m request:300s]"},
		{crd.Gateway{Timeouts: &crd.RouteTimeouts{Request: "0s"}}, "map[request:0s]"},
		{crd.Gateway{Timeouts: &crd.RouteTimeouts{Request: "10m", BackendRequest: "5m"}}, "map[backendRequest:5m request:10m]"},
	} {
		w := newWorld(1)
		w.ext.Gateway = &tc.gw
		r := DesiredChildren(w.isvc, &w.ext, Features{HTTPRoutes: true, GatewayParent: types.NamespacedName{Namespace: "gw", Name: "public"}}).HTTPRoute
		rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
		if len(rules) != len(InferencePaths) {
			t.Fatalf("%d rules", len(rules))
		}
		for _, routed := range []*unstructured.Unstructured{r, withPoolBackend(r, "m"), withActivatorBackend(r, w.isvc, types.NamespacedName{Namespace: "sys", Name: "act"}, 80)} {
			rules, _, _ := unstructured.NestedSlice(routed.Object, "spec", "rules")
			for _, rule := range rules {
				if got := fmt.Sprint(rule.(map[string]interface{})["timeouts"]); got != tc.want {
					t.Errorf("%+v: timeouts %s, want %s", tc.gw.Timeouts, got, tc.want)
				}
			}
		}
	}
}
