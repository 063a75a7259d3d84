package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestUnevenGPUSplit: Qwen3-8B (32 attention heads) on 3 GPUs crashes in vLLM's own check of
// the tensor-parallel size; the isvc names it (ParallelismRefused, vLLM's words, the split that
// works), and spec.parallelism with that split serves.
func TestUnevenGPUSplit(t *testing.T) {
	ns := env.Namespace(t)
	w := useWebhookCRD(t)
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	apply := func(spec string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "three.yaml")
		if err := os.WriteFile(f, []byte("apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: three}\nspec:\n  baseModel: Qwen/Qwen3-8B\n  replicas: 1\n  gpusPerReplica: 3\n"+spec), 0o600); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	}
	apply("")
	var said string
	testenv.Eventually(t, 2*time.Minute, "three names the refused split", func() error {
		i, says := isvcSays(t, ns, "three")
		if i == nil || i.Status.Reason != reconcile.ReasonParallelismRefused || i.Status.Phase != crd.PhaseFailed ||
			!strings.Contains(says, "Total number of attention heads (32) must be divisible by tensor parallel size (3)") ||
			!strings.Contains(says, "spec.parallelism {tensorParallelSize: 1, pipelineParallelSize: 3}") {
			return fmt.Errorf("%s", says)
		}
		said = says
		return nil
	})
	t.Logf("3 GPUs: %s", said)
	apply("  parallelism: {tensorParallelSize: 1, pipelineParallelSize: 3}\n")
	testenv.Eventually(t, 2*time.Minute, "three Ready on 1 x 3", func() error {
		i, says := isvcSays(t, ns, "three")
		if i == nil || i.Status.Phase != crd.PhaseReady {
			return fmt.Errorf("%s", says)
		}
		return nil
	})
}
