package operator

import (
	"slices"
	"testing"

	"github.com/example/inferenceservice-operator/test/cluster"
)

// TestManifestEnv: the bench runs the operator with the shipped Deployment's env.
func TestManifestEnv(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	env, err := ManifestEnv(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "GOGC=50") {
		t.Fatalf("env %v, want GOGC=50 from manifests/operator/deployment.yaml", env)
	}
}
