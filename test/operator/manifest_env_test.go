package operator

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/inferenceservice-operator/test/cluster"
)

// TestManifestEnv: the bench runs the operator with the shipped Deployment's env, the
// downward API's resource fields resolved from its limits.
func TestManifestEnv(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	env, err := ManifestEnv(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "GOGC=25") || !slices.Contains(env, "MEMORY_LIMIT=268435456") {
		t.Fatalf("env %v, want GOGC=25 and MEMORY_LIMIT of the 256Mi limit from manifests/operator/deployment.yaml", env)
	}
}

func TestResourceFieldValue(t *testing.T) {
	c := &corev1.Container{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("256Mi"), corev1.ResourceCPU: resource.MustParse("1500m")}}}
	for _, tc := range []struct {
		ref  corev1.ResourceFieldSelector
		want string
	}{
		{corev1.ResourceFieldSelector{Resource: "limits.memory"}, "268435456"},
		{corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}, "256"},
		{corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("100Mi")}, "3"},
		{corev1.ResourceFieldSelector{Resource: "limits.cpu"}, "2"},
	} {
		if got, err := resourceFieldValue(&tc.ref, c); err != nil || got != tc.want {
			t.Errorf("%s / %s: %q %v, want %q", tc.ref.Resource, tc.ref.Divisor.String(), got, err, tc.want)
		}
	}
	if _, err := resourceFieldValue(&corev1.ResourceFieldSelector{Resource: "requests.memory"}, c); err == nil {
		t.Error("an unresolved field must be an error, not an empty value")
	}
}
