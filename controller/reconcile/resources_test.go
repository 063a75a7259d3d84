package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

func TestDesiredResources(t *testing.T) {
	q := resource.MustParse
	cases := []struct {
		name     string
		spec     crd.InferenceServiceSpec
		req, lim map[string]string
	}{
		{"defaults", crd.InferenceServiceSpec{}, map[string]string{"cpu": "2", "memory": "10Gi", "nvidia.com/gpu": "1"}, map[string]string{"nvidia.com/gpu": "1"}},
		{"no gpus", crd.InferenceServiceSpec{GPUsPerReplica: ptr.To[int32](0)}, map[string]string{"cpu": "2", "memory": "10Gi"}, nil},
		{"memory limit below the default request", crd.InferenceServiceSpec{Resources: &crd.Resources{Limits: corev1.ResourceList{"memory": q("4Gi")}}},
			map[string]string{"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}, map[string]string{"memory": "4Gi", "nvidia.com/gpu": "1"}},
		{"limit above the default request", crd.InferenceServiceSpec{Resources: &crd.Resources{Limits: corev1.ResourceList{"cpu": q("8")}}},
			map[string]string{"cpu": "2", "memory": "10Gi", "nvidia.com/gpu": "1"}, map[string]string{"cpu": "8", "nvidia.com/gpu": "1"}},
		{"limit without any request", crd.InferenceServiceSpec{Resources: &crd.Resources{Limits: corev1.ResourceList{"ephemeral-storage": q("10Gi")}}},
			map[string]string{"cpu": "2", "memory": "10Gi", "ephemeral-storage": "10Gi", "nvidia.com/gpu": "1"}, map[string]string{"ephemeral-storage": "10Gi", "nvidia.com/gpu": "1"}},
		{"eight gpus", crd.InferenceServiceSpec{GPUsPerReplica: ptr.To[int32](8)}, map[string]string{"cpu": "2", "memory": "38Gi", "nvidia.com/gpu": "8"}, map[string]string{"nvidia.com/gpu": "8"}},
		{"user memory request", crd.InferenceServiceSpec{Resources: &crd.Resources{Requests: corev1.ResourceList{"memory": q("64Gi")}}},
			map[string]string{"cpu": "2", "memory": "64Gi", "nvidia.com/gpu": "1"}, map[string]string{"nvidia.com/gpu": "1"}},
		{"user requests and another gpu vendor", crd.InferenceServiceSpec{GPUsPerReplica: ptr.To[int32](2), Resources: &crd.Resources{GPUResourceName: "amd.com/gpu", Requests: corev1.ResourceList{"cpu": q("500m")}}},
			map[string]string{"cpu": "500m", "memory": "14Gi", "amd.com/gpu": "2"}, map[string]string{"amd.com/gpu": "2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := desiredResources(&c.spec)
			check := func(what string, have corev1.ResourceList, want map[string]string) {
				if len(have) != len(want) {
					t.Fatalf("%s: %v, want %v", what, have, want)
				}
				for k, v := range want {
					if h := have[corev1.ResourceName(k)]; h.Cmp(q(v)) != 0 {
						t.Fatalf("%s[%s] = %s, want %s", what, k, h.String(), v)
					}
				}
			}
			check("requests", got.Requests, c.req)
			check("limits", got.Limits, c.lim)
		})
	}
}
