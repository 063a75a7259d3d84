package reconcile

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
)

// A crash whose last words are a GPU fault is GPUError with the node and the advice, and its
// log keeps being read (LastWordsWanted) so the line stays current; a crash of the software
// (an illegal memory access) or of the spec (CUDA out of memory) stays a crash loop.
func TestGPUErrorFromLastWords(t *testing.T) {
	for _, c := range []struct {
		line, reason, contains string
	}{
		{"RuntimeError: CUDA error: uncorrectable ECC error encountered", ReasonGPUError, "on node fake-node-0: uncorrectable ECC error (faulty GPU memory): cordon the node"},
		{"RuntimeError: No CUDA GPUs are available", ReasonGPUError, "the GPU is gone"},
		{"RuntimeError: The NVIDIA driver on your system is too old (found version 11040).", ReasonGPUError, "older than the image's CUDA: use an image built for the node's driver"},
		{"RuntimeError: CUDA error: an illegal memory access was encountered", ReasonCrashLoopBackOff, "illegal memory access"},
		{"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", ReasonCrashLoopBackOff, "CUDA out of memory"},
	} {
		w, _ := diagnosisWorld(t, 1, 0)
		w.obs.Pods = []*corev1.Pod{crashPod("qwen3-7b6cd-a", true, 3)}
		w.obs.LastWords = map[string]string{"containerd://qwen3-7b6cd-a-run": c.line}
		in := Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}
		out := Reconcile(in)
		msg := findCond(out.Status.Conditions, crd.ConditionReady).Message
		if out.Status.Reason != c.reason || out.Status.Phase != crd.PhaseFailed || !strings.Contains(msg, c.contains) || !strings.Contains(msg, c.line) {
			t.Errorf("%q: %s/%s: %s", c.line, out.Status.Phase, out.Status.Reason, msg)
		}
		if got := LastWordsWanted(in); len(got) != 1 {
			t.Errorf("%q: the crashed run's log is no longer read: %+v", c.line, got)
		}
	}
}
