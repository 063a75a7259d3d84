package reconcile

import (
	"strings"
	"testing"

	"github.com/example/inferenceservice-operator/controller/purity"
)

// TestPure keeps this package a decision: it may not reach a client, take a context or read the
// clock (time is an input: Input.Now), so every behaviour in it is a table test away; nor may it
// depend on the project's packages beyond the API, the kinds, the engines and the rollout.
func TestPure(t *testing.T) {
	purity.Check(t, func(dep string) bool {
		return strings.HasPrefix(dep, "github.com/example/inferenceservice-operator/") && dep != "github.com/example/inferenceservice-operator/crd" &&
			!strings.HasSuffix(dep, "/informers/kinds") && !strings.HasSuffix(dep, "/controller/reconcile") && !isEngine(dep) &&
			!strings.HasSuffix(dep, "/controller/rollout")
	})
}

// controller/rollout is the canary's decision, held to the same rule by its own TestPure.

// isEngine is a package of the engines' knowledge (controller/engine and each engine's), pure
// and standard-library-only itself (TestEnginesAreLeaves in package engine).
func isEngine(dep string) bool {
	const root = "github.com/example/inferenceservice-operator/controller/engine"
	return dep == root || strings.HasPrefix(dep, root+"/")
}
