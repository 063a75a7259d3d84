package activator

import (
	"os"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// TestClusterRoleIsWhatIsCalled: manifests/activator/rbac.yaml grants exactly the calls the
// activator's Feed, Models and Activity make (fake clientsets record them), no more, no fewer.
func TestClusterRoleIsWhatIsCalled(t *testing.T) {
	w := newActivityWorld(t, true)
	factory := informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithTransform(Strip))
	synced, err := NewFeed(&setter{}, ModelPort).Watch(factory.Core().V1().Pods().Informer())
	if err != nil {
		t.Fatal(err)
	}
	svcs := factory.Core().V1().Services().Informer()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{crd.Resource: crd.Kind + "List"})
	isvcs := dynamicinformer.NewFilteredDynamicInformer(dyn, crd.Resource, "", 0, cache.Indexers{}, nil).Informer()
	if err := isvcs.SetTransform(StripModel); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	go isvcs.Run(stop)
	defer factory.Shutdown()
	defer close(stop)
	if !cache.WaitForCacheSync(stop, synced, svcs.HasSynced, isvcs.HasSynced) {
		t.Fatal("not synced")
	}
	w.activity.Wake(qwen)
	w.activity.ColdStarted(qwen, t0, time.Second)
	eventually(t, "the writes", func() bool { return w.annotation(t, kinds.ColdStartAnnotation) != "" })

	called := map[string]bool{}
	for _, a := range append(w.client.Actions(), dyn.Actions()...) {
		if a.GetVerb() == "get" && a.GetResource().Resource == "services" {
			continue // the test's own reads
		}
		called[a.GetResource().Group+"/"+a.GetResource().Resource+" "+a.GetVerb()] = true
	}
	granted := map[string]bool{}
	for _, r := range clusterRole(t).Rules {
		if len(r.APIGroups) != 1 || len(r.ResourceNames) > 0 {
			t.Errorf("rule %+v: one group a rule, unnamed", r)
		}
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				granted[r.APIGroups[0]+"/"+res+" "+v] = true
			}
		}
	}
	for c := range called {
		if !granted[c] {
			t.Errorf("called, not granted: %s", c)
		}
	}
	for g := range granted {
		if !called[g] {
			t.Errorf("granted, never called: %s", g)
		}
	}
}

// clusterRole reads the ClusterRole of manifests/activator/rbac.yaml.
func clusterRole(t *testing.T) rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile("../../manifests/activator/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---") {
		var cr rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &cr); err != nil {
			t.Fatal(err)
		}
		if cr.Kind == "ClusterRole" {
			return cr
		}
	}
	t.Fatal("no ClusterRole")
	return rbacv1.ClusterRole{}
}
