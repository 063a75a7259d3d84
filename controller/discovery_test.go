package controller

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

func discoveryServing(groups ...metav1.APIResourceList) *fakediscovery.FakeDiscovery {
	d := kubefake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	for i := range groups {
		d.Resources = append(d.Resources, &groups[i])
	}
	return d
}

func TestWatchedVersion(t *testing.T) {
	v1beta1 := metav1.APIResourceList{GroupVersion: crd.ResourceV1beta1.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: crd.Plural}}}
	for _, c := range []struct {
		flag   string
		disco  *fakediscovery.FakeDiscovery
		want   string
		errors bool
	}{
		{"auto", discoveryServing(), crd.Version, false},
		{"auto", discoveryServing(v1beta1), crd.VersionV1beta1, false},
		{crd.Version, discoveryServing(v1beta1), crd.Version, false},
		{"v2", discoveryServing(), "", true},
	} {
		got, err := WatchedVersion(c.flag, c.disco)
		if got != c.want || (err != nil) != c.errors {
			t.Errorf("--api-version=%s: %q %v, want %q (error %v)", c.flag, got, err, c.want, c.errors)
		}
	}
}

func TestDiscoverFeatures(t *testing.T) {
	sm := metav1.APIResourceList{GroupVersion: reconcile.ServiceMonitorGVR.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: reconcile.ServiceMonitorGVR.Resource}}}
	routes := metav1.APIResourceList{GroupVersion: reconcile.HTTPRouteGVR.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: reconcile.HTTPRouteGVR.Resource}}}
	f, watch, err := DiscoverFeatures(discoveryServing(sm, routes), true, "gw/main")
	if err != nil || !f.ServiceMonitors || !f.HTTPRoutes || f.GatewayParent.String() != "gw/main" || len(watch) != 2 {
		t.Fatalf("both served: %+v %v %v", f, watch, err)
	}
	if f, watch, _ := DiscoverFeatures(discoveryServing(sm), false, "gw/main"); f.ServiceMonitors || f.HTTPRoutes || len(watch) != 0 {
		t.Fatalf("ServiceMonitors off, HTTPRoutes not served: %+v %v", f, watch)
	}
	if _, _, err := DiscoverFeatures(discoveryServing(), false, "main"); err == nil {
		t.Fatal("--gateway-parent without a namespace accepted")
	}
	grants := metav1.APIResourceList{GroupVersion: reconcile.ReferenceGrantGVR.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: reconcile.ReferenceGrantGVR.Resource}}}
	if f, watch, _ := DiscoverFeatures(discoveryServing(routes, grants), false, "gw/main"); !f.ReferenceGrants || len(watch) != 2 || watch[1] != reconcile.ReferenceGrantGVR {
		t.Fatalf("ReferenceGrants served: %+v %v", f, watch)
	}
	if f, _, _ := DiscoverFeatures(discoveryServing(grants), false, "gw/main"); f.ReferenceGrants {
		t.Fatal("ReferenceGrants without HTTPRoutes")
	}
}

func TestDiscoverInferencePool(t *testing.T) {
	pools := metav1.APIResourceList{GroupVersion: reconcile.InferencePoolGVR.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: reconcile.InferencePoolGVR.Resource}}}
	routes := reconcile.Features{HTTPRoutes: true}
	for _, c := range []struct {
		name         string
		mode         string
		f            reconcile.Features
		disco        *fakediscovery.FakeDiscovery
		pools, serve bool
		watched      int
		errors       bool
		refresh      time.Duration
	}{
		{"served, auto", InferencePoolAuto, routes, discoveryServing(pools), true, true, 3, false, time.Second},
		{"served, off: watched, so the pool route's children can go", InferencePoolOff, routes, discoveryServing(pools), false, true, 3, false, time.Second},
		{"not served", InferencePoolAuto, routes, discoveryServing(), false, false, 2, false, time.Second},
		{"no HTTPRoutes", InferencePoolAuto, reconcile.Features{}, discoveryServing(pools), false, false, 0, false, time.Second},
		{"bad mode", "on", routes, discoveryServing(pools), false, false, 0, true, time.Second},
		{"refresh 0: the picker would read every 50 ms", InferencePoolAuto, routes, discoveryServing(pools), false, false, 0, true, 0},
		{"refresh 5ms", InferencePoolAuto, routes, discoveryServing(pools), false, false, 0, true, 5 * time.Millisecond},
		{"refresh 2m", InferencePoolAuto, routes, discoveryServing(pools), false, false, 0, true, 2 * time.Minute},
		{"refresh 10ms", InferencePoolAuto, routes, discoveryServing(pools), true, true, 3, false, 10 * time.Millisecond},
		{"refresh 1m", InferencePoolAuto, routes, discoveryServing(pools), true, true, 3, false, time.Minute},
	} {
		f := c.f
		watch, err := DiscoverInferencePool(c.disco, c.mode, "img", "role", c.refresh, &f)
		if (err != nil) != c.errors || f.InferencePools != c.pools || f.PoolServed != c.serve || len(watch) != c.watched {
			t.Errorf("%s: pools %v served %v watch %v err %v", c.name, f.InferencePools, f.PoolServed, watch, err)
		}
		if c.pools && (f.PickerImage != "img" || f.PickerClusterRole != "role" || f.PickerRefreshMetricsInterval != c.refresh) {
			t.Errorf("%s: picker features %q %q %s", c.name, f.PickerImage, f.PickerClusterRole, f.PickerRefreshMetricsInterval)
		}
	}
}

func TestParseActivatorService(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		port int32
		bad  bool
	}{
		{"", "", 0, false},
		{DefaultActivatorService, "inferenceservice-system/inferenceservice-activator", 80, false},
		{"ops/act:8080", "ops/act", 8080, false},
		{"ops/act", "ops/act", 80, false},
		{"act:80", "", 0, true},
		{"ops/:80", "", 0, true},
		{"ops/act:http", "", 0, true},
		{"ops/act:70000", "", 0, true},
		{"a/b/c", "", 0, true},
	} {
		got, port, err := ParseActivatorService(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && (got.String() != tc.want && tc.want != "" || port != tc.port)) {
			t.Errorf("%q: got %v %d %v", tc.in, got, port, err)
		}
	}
}

// TestDiscoverGatewayPolicies: Istio's DestinationRules and GKE's HealthCheckPolicies are made
// and watched where served, with HTTPRoutes on.
func TestDiscoverGatewayPolicies(t *testing.T) {
	list := func(gvr schema.GroupVersionResource) metav1.APIResourceList {
		return metav1.APIResourceList{GroupVersion: gvr.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: gvr.Resource}}}
	}
	pools, dr, hcp := list(reconcile.InferencePoolGVR), list(reconcile.DestinationRuleGVR), list(reconcile.HealthCheckPolicyGVR)
	for _, c := range []struct {
		name     string
		f        reconcile.Features
		disco    *fakediscovery.FakeDiscovery
		dr, hcp  bool
		watching []schema.GroupVersionResource
	}{
		{"Istio", reconcile.Features{HTTPRoutes: true}, discoveryServing(pools, dr), true, false, []schema.GroupVersionResource{reconcile.DestinationRuleGVR}},
		{"GKE", reconcile.Features{HTTPRoutes: true}, discoveryServing(pools, hcp), false, true, []schema.GroupVersionResource{reconcile.HealthCheckPolicyGVR}},
		{"neither", reconcile.Features{HTTPRoutes: true}, discoveryServing(pools), false, false, nil},
		{"no HTTPRoutes", reconcile.Features{}, discoveryServing(pools, dr, hcp), false, false, nil},
	} {
		f := c.f
		watch, err := DiscoverInferencePool(c.disco, InferencePoolAuto, "img", "role", reconcile.DefaultPickerRefreshMetricsInterval, &f)
		if err != nil || f.DestinationRules != c.dr || f.HealthCheckPolicies != c.hcp {
			t.Errorf("%s: DestinationRules %v HealthCheckPolicies %v err %v", c.name, f.DestinationRules, f.HealthCheckPolicies, err)
		}
		for _, g := range c.watching {
			if !slices.Contains(watch, g) {
				t.Errorf("%s: %v not watched (%v)", c.name, g, watch)
			}
		}
	}
}
