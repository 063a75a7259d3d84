package kinds

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeaf keeps this package below both its readers: informers and reconcile import it, so it
// may import neither of them, nor anything of the operator's but crd (with the engines it
// reads its refused flags from, leaves themselves), nor a client.
func TestLeaf(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	const module = "github.com/example/inferenceservice-operator/"
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/client-go/") ||
			strings.HasPrefix(dep, module) && dep != module+"crd" && dep != module+"informers/kinds" &&
				dep != module+"controller/engine" && !strings.HasPrefix(dep, module+"controller/engine/") {
			t.Errorf("depends on %s", dep)
		}
	}
}
