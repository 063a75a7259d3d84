package reconcile

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
)

// vLLM refusing the GPU split (heads not divisible by the tensor-parallel size) is its own
// reason, Failed, with the split that works; another crash stays a crash loop.
func TestParallelismRefusedFromLastWords(t *testing.T) {
	for _, c := range []struct {
		line, reason, contains string
	}{
		{"ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (6).", ReasonParallelismRefused,
			"vLLM refuses tensor parallel size 6: the model has 32 attention heads; split the 6 GPUs as spec.parallelism {tensorParallelSize: 2, pipelineParallelSize: 3}"},
		{"ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3).", ReasonParallelismRefused,
			"split the 3 GPUs as spec.parallelism {tensorParallelSize: 1, pipelineParallelSize: 3}"},
		{"ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (16).", ReasonParallelismRefused,
			"{tensorParallelSize: 8, pipelineParallelSize: 2}"},
		{"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", ReasonCrashLoopBackOff, "CUDA out of memory"},
	} {
		w, _ := diagnosisWorld(t, 1, 0)
		w.obs.Pods = []*corev1.Pod{crashPod("qwen3-7b6cd-a", true, 3)}
		w.obs.LastWords = map[string]string{"containerd://qwen3-7b6cd-a-run": c.line}
		out := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)})
		msg := findCond(out.Status.Conditions, crd.ConditionReady).Message
		if out.Status.Reason != c.reason || out.Status.Phase != crd.PhaseFailed || !strings.Contains(msg, c.contains) || !strings.Contains(msg, c.line) {
			t.Errorf("%q: %s/%s: %s", c.line, out.Status.Phase, out.Status.Reason, msg)
		}
	}
}
