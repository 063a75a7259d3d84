package engine_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/example/inferenceservice-operator/controller/engine"
	_ "github.com/example/inferenceservice-operator/controller/engine/sglang"
	_ "github.com/example/inferenceservice-operator/controller/engine/vllm"
)

// TestEnginesAreLeaves keeps the engines' knowledge pure: this package and every engine import
// only the standard library and each other, so crd (the API, a leaf) may import them and the
// decision and the I/O read the same words.
func TestEnginesAreLeaves(t *testing.T) {
	const root = "github.com/example/inferenceservice-operator/controller/engine"
	out, err := exec.Command("go", "list", "-deps", "./...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && dep != root && !strings.HasPrefix(dep, root+"/") {
			t.Errorf("an engine depends on %s", dep)
		}
	}
}

// TestRegistry: vLLM and SGLang are registered under their names, vLLM is the default.
func TestRegistry(t *testing.T) {
	if e := engine.For(""); e == nil || e.Name() != engine.VLLM || engine.For(engine.VLLM) != e {
		t.Fatalf("For(\"\") = %v, want vLLM", e)
	}
	if engine.For("no-such-engine") != nil {
		t.Fatal("an unknown engine is found")
	}
	if e := engine.For("sglang"); e == nil || e.Name() != "sglang" {
		t.Fatalf("For(\"sglang\") = %v", e)
	}
	if names := engine.Names(); len(names) != 2 || names[0] != "sglang" || names[1] != engine.VLLM {
		t.Fatalf("Names() = %v", names)
	}
}
