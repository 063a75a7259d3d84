package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// fakeGateway is a gateway admin API on loopback that records registrations and can be
// switched down to test the finalizer's retries.
type fakeGateway struct {
	srv     *httptest.Server
	mu      sync.Mutex
	routes  map[string]bool
	bodies  map[string]reconcile.Route // last PUT body per route
	calls   []string                   // "PUT ns/name", "DELETE ns/name"
	removed map[string]int
	down    bool
	status  int           // when set, every call fails with it
	delay   time.Duration // every call waits this long first
}

func newFakeGateway() *fakeGateway {
	g := &fakeGateway{routes: map[string]bool{}, bodies: map[string]reconcile.Route{}, removed: map[string]int{}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	return g
}

func (g *fakeGateway) URL() string { return g.srv.URL }
func (g *fakeGateway) Close()      { g.srv.Close() }

func (g *fakeGateway) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	delay := g.delay
	g.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay) // a slow gateway, as the test asked
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	key := strings.TrimPrefix(r.URL.Path, "/routes/")
	if g.down {
		http.Error(w, "gateway unavailable", http.StatusServiceUnavailable)
		return
	}
	if g.status != 0 {
		g.calls = append(g.calls, "FAILED "+r.Method+" "+key)
		http.Error(w, "internal error: route store locked", g.status)
		return
	}
	g.calls = append(g.calls, r.Method+" "+key)
	switch r.Method {
	case http.MethodPut:
		g.routes[key] = true
		var body reconcile.Route
		if json.NewDecoder(r.Body).Decode(&body) == nil {
			g.bodies[key] = body
		}
	case http.MethodDelete:
		if !g.routes[key] {
			http.NotFound(w, r)
			return
		}
		delete(g.routes, key)
		g.removed[key]++
	}
}

func (g *fakeGateway) setFailure(status int, delay time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status, g.delay = status, delay
}

func (g *fakeGateway) removals(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.removed[key]
}

func (g *fakeGateway) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
}

// route is the last route registered for ns/name.
func (g *fakeGateway) route(ns, name string) (reconcile.Route, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.bodies[ns+"/"+name]
	return r, ok && g.routes[ns+"/"+name]
}

func (g *fakeGateway) registered(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.routes[key]
}

func (g *fakeGateway) count(call string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.calls {
		if c == call {
			n++
		}
	}
	return n
}
