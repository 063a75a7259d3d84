package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// fakeGateway is a gateway admin API on loopback that records registrations and can be
// switched down to test the finalizer's retries.
type fakeGateway struct {
	srv    *httptest.Server
	mu     sync.Mutex
	routes map[string]bool
	calls  []string // "PUT ns/name", "DELETE ns/name"
	down   bool
}

func newFakeGateway() *fakeGateway {
	g := &fakeGateway{routes: map[string]bool{}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	return g
}

func (g *fakeGateway) URL() string { return g.srv.URL }
func (g *fakeGateway) Close()      { g.srv.Close() }

func (g *fakeGateway) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := strings.TrimPrefix(r.URL.Path, "/routes/")
	if g.down {
		http.Error(w, "gateway unavailable", http.StatusServiceUnavailable)
		return
	}
	g.calls = append(g.calls, r.Method+" "+key)
	switch r.Method {
	case http.MethodPut:
		g.routes[key] = true
	case http.MethodDelete:
		if !g.routes[key] {
			http.NotFound(w, r)
			return
		}
		delete(g.routes, key)
	}
}

func (g *fakeGateway) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
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
