package informers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

func apiService(name, group, available string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]interface{}{"name": name},
		"spec":     map[string]interface{}{"group": group, "version": strings.SplitN(name, ".", 2)[0]},
		"status": map[string]interface{}{"conditions": []interface{}{map[string]interface{}{
			"type": "Available", "status": available, "reason": "MissingEndpoints", "message": "no endpoints"}}},
	}}
	return u
}

// APIServices are watched only when asked; the custom metrics API's availability follows its
// APIService's condition as the aggregator rewrites it.
func TestMetricsAPIFromAPIServices(t *testing.T) {
	scheme := runtime.NewScheme()
	lists := map[schema.GroupVersionResource]string{crd.Resource: crd.Kind + "List", kinds.APIServiceGVR: "APIServiceList"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, lists,
		apiService("v1.apps", "apps", "True"), apiService("v1beta2.custom.metrics.k8s.io", kinds.CustomMetricsGroup, "False"))
	if s := New(fake.NewSimpleClientset(), dyn, Options{}); s.MetricsAPI().Known {
		t.Fatal("APIServices read without Options.APIServices")
	}
	s := New(fake.NewSimpleClientset(), dyn, Options{APIServices: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Start(ctx)
	if !s.WaitForCacheSync(ctx) {
		t.Fatal("no sync")
	}
	if got := s.MetricsAPI(); !got.Known || got.Available || !strings.Contains(got.Why, "MissingEndpoints") {
		t.Fatalf("down: %+v", got)
	}
	if _, err := dyn.Resource(kinds.APIServiceGVR).Update(ctx, apiService("v1beta2.custom.metrics.k8s.io", kinds.CustomMetricsGroup, "True"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "available", func() error {
		if got := s.MetricsAPI(); !got.Available {
			return fmt.Errorf("%+v", got)
		}
		return nil
	})
	if err := dyn.Resource(kinds.APIServiceGVR).Delete(ctx, "v1beta2.custom.metrics.k8s.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "not registered", func() error {
		if got := s.MetricsAPI(); got.Available || !strings.HasPrefix(got.Why, "no APIService") {
			return fmt.Errorf("%+v", got)
		}
		return nil
	})
}

// poll checks cond until it holds or ctx ends.
func poll(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(10 * time.Millisecond): // poll interval
		}
	}
}
