package soak

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

func TestCheckRoutes(t *testing.T) {
	isvc := func(ns, name string, gen int64, cond *metav1.Condition) *crd.InferenceService {
		i := &crd.InferenceService{}
		i.Namespace, i.Name, i.Generation = ns, name, gen
		if cond != nil {
			i.Status.Conditions = []metav1.Condition{*cond}
		}
		return i
	}
	registered := func(gen int64) *metav1.Condition {
		return &metav1.Condition{Type: crd.ConditionGatewayRegistered, Status: metav1.ConditionTrue, Reason: reconcile.ReasonRegistered, ObservedGeneration: gen}
	}
	route := func(name string) reconcile.Route { return reconcile.Route{Service: name, Port: reconcile.Port} }
	for _, c := range []struct {
		name   string
		isvc   *crd.InferenceService
		routes map[string]reconcile.Route
		left   map[string]bool
		want   string // a violation containing this, "" none
	}{
		{"registered for its generation", isvc("a", "m", 2, registered(2)), map[string]reconcile.Route{"a/m": route("m")}, nil, ""},
		{"no route", isvc("a", "m", 2, registered(2)), nil, nil, "a/m has no route"},
		{"a route to another Service", isvc("a", "m", 2, registered(2)), map[string]reconcile.Route{"a/m": route("x")}, nil, "leads to x:8000"},
		{"status for an older generation", isvc("a", "m", 3, registered(2)), map[string]reconcile.Route{"a/m": route("m")}, nil, "for generation 3"},
		{"status without the condition", isvc("a", "m", 1, nil), map[string]reconcile.Route{"a/m": route("m")}, nil, "without GatewayRegistered"},
		{"a route left for a deleted isvc", isvc("a", "m", 1, registered(1)), map[string]reconcile.Route{"a/m": route("m"), "b/gone": route("gone")}, nil, "route b/gone left"},
		{"left where its namespace went while the gateway was down", isvc("a", "m", 1, registered(1)), map[string]reconcile.Route{"a/m": route("m"), "b/gone": route("gone")}, map[string]bool{"b": true}, ""},
	} {
		want := map[string]model{"a/m": {ns: "a", name: "m"}}
		v := checkRoutes(want, map[string]*crd.InferenceService{"a/m": c.isvc}, &gatewayView{routes: c.routes, mayBeLeft: c.left})
		got := strings.Join(v, "; ")
		if (c.want == "") != (len(v) == 0) || !strings.Contains(got, c.want) {
			t.Errorf("%s: violations %q, want one with %q", c.name, got, c.want)
		}
	}
}

func TestLeftNamespaces(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	got := leftNamespaces([]span{
		{from: at(100), to: at(200), what: faultGatewayDown},
		{from: at(10), to: at(20), what: faultGatewayDown, key: "soak-9/m"}, // not a fault's span
		{from: at(50), to: at(120), key: "soak-1/*", what: "namespace"},     // deleted as it went down
		{from: at(150), to: at(160), key: "soak-2/*", what: "namespace"},    // deleted while down
		{from: at(190), to: at(300), key: "soak-3/*", what: "namespace"},    // as it came back
		{from: at(201), to: at(300), key: "soak-4/*", what: "namespace"},    // after
		{from: at(0), to: at(99), key: "soak-5/*", what: "namespace"},       // before
		{from: at(12), to: at(18), key: "soak-6/*", what: "namespace"},      // under the model's span only
		{from: at(150), to: at(160), key: "soak-7/m", what: "recreate"},     // a model, not a namespace
		{from: at(0), to: at(400), what: faultLeaderKill},
	})
	want := "soak-1 soak-2 soak-3"
	var names []string
	for _, ns := range []string{"soak-1", "soak-2", "soak-3", "soak-4", "soak-5", "soak-6", "soak-7"} {
		if got[ns] {
			names = append(names, ns)
		}
	}
	if strings.Join(names, " ") != want || len(got) != 3 {
		t.Errorf("left namespaces %v, want %s", got, want)
	}
}

// The store refuses connections while down and serves the same address, routes kept, when up.
func TestRouteStoreDownAndUp(t *testing.T) {
	g, err := startRouteStore()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.down() }()
	// A new connection each call: a kept one closed by down reads EOF instead, as it would.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	put := func() error {
		req, _ := http.NewRequest(http.MethodPut, g.url()+"/routes/a/m", bytes.NewReader([]byte(`{"service":"m","port":8000}`)))
		res, err := hc.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("PUT: %s", res.Status)
			}
		}
		return err
	}
	if err := put(); err != nil {
		t.Fatal(err)
	}
	if err := g.down(); err != nil {
		t.Fatal(err)
	}
	if err := put(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("PUT while down: %v, want connection refused", err)
	}
	if err := g.up(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := put(); err != nil {
		t.Fatalf("PUT once up: %v", err)
	}
	if r := g.snapshot()["a/m"]; r.Service != "m" || r.Port != 8000 {
		t.Fatalf("route a/m %+v", r)
	}
}
