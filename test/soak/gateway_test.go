package soak

// The gateway's admin API the operators register each model's route with (--gateway-url), and
// the fault that takes it down: its listener closed, so every call is refused as by a gateway
// that is not running, for minutes, then open again on the same address.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// routeStore is the admin API: PUT /routes/{ns}/{name} stores a route, DELETE removes it (404
// when it has none, which the operator counts as removed).
type routeStore struct {
	addr string

	mu     sync.Mutex
	routes map[string]reconcile.Route
	srv    *http.Server
	calls  int
}

// startRouteStore serves the admin API on a free loopback port.
func startRouteStore() (*routeStore, error) {
	g := &routeStore{routes: map[string]reconcile.Route{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g.addr = ln.Addr().String()
	g.serve(ln)
	return g, nil
}

func (g *routeStore) url() string { return "http://" + g.addr }

func (g *routeStore) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(g.handle), ReadHeaderTimeout: 10 * time.Second}
	g.mu.Lock()
	g.srv = srv
	g.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (g *routeStore) handle(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutPrefix(r.URL.Path, "/routes/")
	if !ok || strings.Count(key, "/") != 1 {
		http.NotFound(w, r)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	switch r.Method {
	case http.MethodPut:
		var route reconcile.Route
		if err := json.NewDecoder(r.Body).Decode(&route); err != nil {
			http.Error(w, "route: "+err.Error(), http.StatusBadRequest)
			return
		}
		g.routes[key] = route
	case http.MethodDelete:
		if _, ok := g.routes[key]; !ok {
			http.NotFound(w, r)
			return
		}
		delete(g.routes, key)
	default:
		http.Error(w, "PUT or DELETE", http.StatusMethodNotAllowed)
	}
}

// snapshot is a copy of the routes registered.
func (g *routeStore) snapshot() map[string]reconcile.Route {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]reconcile.Route, len(g.routes))
	for k, v := range g.routes {
		out[k] = v
	}
	return out
}

// down closes the listener and every connection: calls are refused until up.
func (g *routeStore) down() error {
	g.mu.Lock()
	srv := g.srv
	g.mu.Unlock()
	return srv.Close()
}

// up listens on the same address again; the port was just released, so a bind that fails is
// retried for a while (bounded) rather than moved: the operators know this address only.
func (g *routeStore) up(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ln, err := net.Listen("tcp", g.addr)
		if err == nil {
			g.serve(ln)
			return nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the gateway's admin API back on %s: %w", g.addr, err)
		}
		time.Sleep(200 * time.Millisecond) // retry interval
	}
}

// gatewayDownHold is how long the gateway stays down: minutes, as the issue asks, but less
// than a user's wait for a deletion (waitGone's three minutes), which the finalizer holds
// until the route is deregistered.
func gatewayDownHold(h time.Duration) time.Duration { return time.Minute + 4*h }

// gatewayDown takes the admin API down for hold, then brings it back.
func (s *soakRun) gatewayDown(ctx context.Context, hold time.Duration) (string, error) {
	before := len(s.gateway.snapshot())
	if err := s.gateway.down(); err != nil {
		return "", err
	}
	timer := time.NewTimer(hold) // the fault's length, not a wait for state
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	if err := s.gateway.up(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("the gateway's admin API down (connections refused) for %s; %d routes registered before", hold, before), nil
}

// gatewayView is what the check compares the isvcs with: the routes registered, and the
// namespaces whose routes may be left behind (deleted while the gateway was down: the
// operator releases the finalizer at the first failure there, so the namespace can go).
type gatewayView struct {
	routes    map[string]reconcile.Route
	mayBeLeft map[string]bool
}

// gatewayView reads the routes, and the namespaces deleted while the gateway was down.
func (s *soakRun) gatewayView() *gatewayView {
	if s.gateway == nil {
		return nil
	}
	return &gatewayView{routes: s.gateway.snapshot(), mayBeLeft: leftNamespaces(s.world.act.all())}
}

// leftNamespaces are the namespaces a workload's deletion of overlapped the gateway's outage.
func leftNamespaces(spans []span) map[string]bool {
	out := map[string]bool{}
	for _, down := range spans {
		if down.key != "" || down.what != faultGatewayDown {
			continue
		}
		for _, a := range spans {
			ns, name, _ := strings.Cut(a.key, "/")
			if name == "*" && a.what == "namespace" && a.from.Before(down.to) && down.from.Before(a.to) {
				out[ns] = true
			}
		}
	}
	return out
}
