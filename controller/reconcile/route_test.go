package reconcile

import (
	"testing"

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
