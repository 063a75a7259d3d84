package controller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// TestHTTPRegistrarFollowsNoRedirect: a redirect from the gateway admin API is an error, and the
// address it names is not called with the route.
func TestHTTPRegistrarFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	g, err := NewHTTPRegistrar(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	err = g.Register(context.Background(), reconcile.Route{Namespace: "team-a", Name: "llama"})
	if err == nil || !strings.Contains(err.Error(), "307") {
		t.Fatalf("a 307: %v", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect was followed %d times", n)
	}
}
