package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
}
