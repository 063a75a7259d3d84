package reconcile

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// TestLastWordsOfDropsLaterRuns: read while the kubelet restarted the container, the current
// run's log is another run's: lines stamped after the crashed run ended are not its words.
func TestLastWordsOfDropsLaterRuns(t *testing.T) {
	finished := t0 // the API's one-second precision: the run ended within [t0, t0+1s)
	run := CrashedRun{StartedAt: t0.Add(-time.Minute), FinishedAt: finished}
	stamp := func(d time.Duration, line string) string {
		return finished.Add(d).Format(time.RFC3339Nano) + " " + line + "\n"
	}
	ours := stamp(-time.Second, "usage: vllm serve [model_tag] [options]") + stamp(900*time.Millisecond, "vllm serve: error: unrecognized arguments: --foo")
	if got, ok := LastWordsOf(ours, run); !ok || got != "vllm serve: error: unrecognized arguments: --foo" {
		t.Fatalf("its own run: %q %v", got, ok)
	}
	next := stamp(3*time.Second, "(APIServer pid=1) INFO 12-03 15:04:05 [api_server.py:1842] vLLM API server version 0.11.0")
	if got, ok := LastWordsOf(next, run); ok {
		t.Fatalf("the next run's log taken as the crashed run's: %q", got)
	}
	if got, ok := LastWordsOf(ours+next, run); !ok || got != "vllm serve: error: unrecognized arguments: --foo" {
		t.Fatalf("both runs: %q %v", got, ok)
	}
	before := stamp(-2*time.Minute, "(APIServer pid=1) ValueError: the run before")
	if got, ok := LastWordsOf(before, run); ok {
		t.Fatalf("the run before's log taken as the crashed run's: %q", got)
	}
	if got, ok := LastWordsOf("", run); ok {
		t.Fatalf("an empty log: %q", got)
	}
}

// TestRunLines: the stamps go, other runs' lines go with them, unstamped lines stay.
func TestRunLines(t *testing.T) {
	run := CrashedRun{StartedAt: t0.Add(-time.Minute), FinishedAt: t0}
	stamp := func(d time.Duration, line string) string { return t0.Add(d).Format(time.RFC3339Nano) + " " + line }
	tail := strings.Join([]string{stamp(-2*time.Minute, "the run before"), stamp(-time.Second, "ours"), "unstamped",
		stamp(900*time.Millisecond, "ours, within the second"), stamp(time.Second, "the next run")}, "\n")
	got, want := RunLines(tail, run), []string{"ours", "unstamped", "ours, within the second"}
	if !slices.Equal(got, want) {
		t.Fatalf("RunLines %q, want %q", got, want)
	}
}

// crashPod is a pod whose vllm container crashed (its log would be read), in the state the
// kubelet shows between a crash and the restart, or after the back-off began.
func crashPod(name string, waiting bool, restarts int32) *corev1.Pod {
	return pod(name, func(p *corev1.Pod) {
		run := &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", ContainerID: "containerd://" + name + "-run",
			StartedAt: metav1.NewTime(t0.Add(-time.Minute)), FinishedAt: metav1.NewTime(t0.Add(-time.Second))}
		cs := corev1.ContainerStatus{Name: "vllm", RestartCount: restarts, State: corev1.ContainerState{Terminated: run}}
		if waiting {
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			cs.LastTerminationState.Terminated = run
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	})
}

// TestLastWordsWanted: only the crashed run whose pod the message names is read, once the
// container has just exited (its current run) or after (its previous one).
func TestLastWordsWanted(t *testing.T) {
	w, _ := diagnosisWorld(t, 2, 0)
	w.obs.Pods = []*corev1.Pod{crashPod("qwen3-7b6cd-b", true, 3), crashPod("qwen3-7b6cd-a", false, 2)}
	in := Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}
	got := LastWordsWanted(in)
	want := CrashedRun{Namespace: "default", Pod: "qwen3-7b6cd-a", PodUID: "qwen3-7b6cd-a", Container: "vllm",
		RunID: "containerd://qwen3-7b6cd-a-run", Previous: false, StartedAt: t0.Add(-time.Minute), FinishedAt: t0.Add(-time.Second), Engine: engine.VLLM}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v\nwant [%+v]: one read, for the pod the message names (the first by name)", got, want)
	}
	// The message names that pod whatever the order the cache lists them in.
	w.obs.Pods[0], w.obs.Pods[1] = w.obs.Pods[1], w.obs.Pods[0]
	if again := LastWordsWanted(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}); len(again) != 1 || again[0] != want {
		t.Fatalf("another cache order: %+v", again)
	}
	w.obs.Pods = []*corev1.Pod{crashPod("qwen3-7b6cd-a", true, 3)}
	if got := LastWordsWanted(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}); len(got) != 1 || !got[0].Previous {
		t.Fatalf("in back-off the crashed run is the previous one: %+v", got)
	}
	// A healthy model reads nothing.
	w.obs.Pods = []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{running(true, true, time.Hour)}
	})}
	if got := LastWordsWanted(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}); len(got) != 0 {
		t.Fatalf("a serving pod: %+v", got)
	}
}

// TestLastWordsInMessage: the line the I/O layer read is quoted for the run it was read from,
// never for a later one.
func TestLastWordsInMessage(t *testing.T) {
	w, _ := diagnosisWorld(t, 1, 0)
	line := "vllm serve: error: unrecognized arguments: --foo"
	for _, c := range []struct {
		name   string
		words  map[string]string
		quoted bool
	}{
		{"its run", map[string]string{"containerd://qwen3-7b6cd-a-run": line}, true},
		{"an earlier run", map[string]string{"containerd://earlier": line}, false},
		{"not read", nil, false},
	} {
		for _, waiting := range []bool{false, true} {
			w.obs.Pods = []*corev1.Pod{crashPod("qwen3-7b6cd-a", waiting, 3)}
			w.obs.LastWords = c.words
			out := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)})
			msg := findCond(out.Status.Conditions, "Ready").Message
			if out.Status.Reason != ReasonCrashLoopBackOff || strings.Contains(msg, line) != c.quoted {
				t.Errorf("%s (waiting %v): reason %s message %q, quoted %v", c.name, waiting, out.Status.Reason, msg, c.quoted)
			}
		}
	}
}
