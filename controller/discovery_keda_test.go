package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// TestDiscoverAutoscaler: keda with its CRD served watches ScaledObjects; without it the HPAs
// stay and the models are told; a bad flag stops the start with a message naming the flag.
func TestDiscoverAutoscaler(t *testing.T) {
	keda := metav1.APIResourceList{GroupVersion: reconcile.ScaledObjectGVR.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: reconcile.ScaledObjectGVR.Resource}}}
	const prom = "http://prometheus-operated.monitoring.svc:9090"

	var f reconcile.Features
	watch, err := DiscoverAutoscaler(discoveryServing(keda), AutoscalerKEDA, prom, &f)
	if err != nil || !f.ScaledObjects || f.KEDAUnserved || f.KEDAPrometheus != prom || len(watch) != 1 || watch[0] != reconcile.ScaledObjectGVR {
		t.Fatalf("keda served: %+v %v %v", f, watch, err)
	}
	f = reconcile.Features{}
	if watch, err := DiscoverAutoscaler(discoveryServing(), AutoscalerKEDA, prom, &f); err != nil || f.ScaledObjects || !f.KEDAUnserved || len(watch) != 0 {
		t.Fatalf("keda not served: %+v %v %v", f, watch, err)
	}
	f = reconcile.Features{}
	if watch, err := DiscoverAutoscaler(discoveryServing(keda), AutoscalerHPA, "", &f); err != nil || f != (reconcile.Features{}) || len(watch) != 0 {
		t.Fatalf("hpa with KEDA served: %+v %v %v", f, watch, err)
	}
	for _, c := range []struct{ autoscaler, prom, wantErr string }{
		{"vpa", prom, `--autoscaler="vpa": want hpa or keda`},
		{AutoscalerKEDA, "", "--autoscaler=keda needs --keda-prometheus-address"},
		{AutoscalerKEDA, "prometheus:9090", "--autoscaler=keda needs --keda-prometheus-address"},
		{AutoscalerKEDA, "ftp://prometheus:9090", "--autoscaler=keda needs --keda-prometheus-address"},
	} {
		if _, err := DiscoverAutoscaler(discoveryServing(keda), c.autoscaler, c.prom, &reconcile.Features{}); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("--autoscaler=%s --keda-prometheus-address=%q: %v, want %q", c.autoscaler, c.prom, err, c.wantErr)
		}
	}
}
