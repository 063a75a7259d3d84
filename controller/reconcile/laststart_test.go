package reconcile

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/engine/vllm"
	"github.com/example/inferenceservice-operator/controller/engine/vllm/vllmtest"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// startedAt is when the tests' serving container started: vLLM's start log's.
var startedAt = vllmtest.StartedAt

func startPod(name string, ready bool, restarts int32) *corev1.Pod {
	created := metav1.NewTime(startedAt.Add(-12 * time.Second))
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name[len(name)-1:]), CreationTimestamp: created}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(startedAt.Add(-10 * time.Second))}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kinds.ContainerName, Ready: ready, RestartCount: restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}}}}
	return p
}

// TestStartsWanted: each ready model server run, once per restart; not a starting one.
func TestStartsWanted(t *testing.T) {
	starting := startPod("m-a", false, 0)
	serving := startPod("m-b", true, 0)
	restarted := startPod("m-c", true, 2)
	got := StartsWanted(Input{Observed: Observed{Pods: []*corev1.Pod{starting, serving, restarted}}})
	if len(got) != 2 || got[0].Pod != "m-b" || got[1].Pod != "m-c" {
		t.Fatalf("wanted %+v, want m-b and m-c", got)
	}
	if got[0].RunID == got[1].RunID || got[1].RunID != "uid-c/"+kinds.ContainerName+"/2" || !got[1].Restarted || got[0].Restarted {
		t.Errorf("run IDs %q %q, restarted %v %v", got[0].RunID, got[1].RunID, got[0].Restarted, got[1].Restarted)
	}
	if !got[0].Scheduled.Equal(startedAt.Add(-10*time.Second)) || !got[0].Created.Equal(startedAt.Add(-12*time.Second)) {
		t.Errorf("times %+v", got[0])
	}
}

// TestStartOfAddsUp: the pod's phases and vLLM's add up to creation -> serving within a
// second, named as vLLM's log says them, the slowest named.
func TestStartOfAddsUp(t *testing.T) {
	runs := StartsWanted(Input{Observed: Observed{Pods: []*corev1.Pod{startPod("m-b", true, 0)}}})
	phases := vllm.StartPhasesOf(strings.Join(vllmtest.KubeletStamped(vllmtest.Start, ".25"), "\n"), startedAt)
	rec := StartOf(runs[0], nil, phases)
	if rec == nil {
		t.Fatal("no start")
	}
	sum := 0.0
	var names []string
	for _, p := range rec.Phases {
		sum += p.Seconds
		names = append(names, p.Name)
	}
	if math.Abs(sum-rec.TotalSeconds) > 1 {
		t.Errorf("phases add up to %.3fs, the start took %.3fs", sum, rec.TotalSeconds)
	}
	want := []string{PhaseScheduled, PhaseContainerStarted, engine.PhaseProcessStart, engine.PhaseWeightsDownload, engine.PhaseWeightsLoad,
		engine.PhaseModelLoad, engine.PhaseCompile, engine.PhaseCUDAGraphs, engine.PhaseEngineInit, engine.PhaseAPIServer}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("phases %v, want %v", names, want)
	}
	if rec.TotalSeconds != 12+964.75 || rec.Started != "2026-12-05T13:59:48Z" || rec.ServingAt != "2026-12-05T14:16:04.750Z" || rec.Slowest != engine.PhaseWeightsDownload {
		t.Errorf("record %+v", rec)
	}
	// a restarted run counts from its own start; a log that does not say it serves tells nothing
	runs[0].Restarted = true
	if r := StartOf(runs[0], nil, phases); r.TotalSeconds != 964.75 || r.Phases[0].Name != engine.PhaseProcessStart {
		t.Errorf("restarted run: %+v", r)
	}
	if r := StartOf(runs[0], nil, vllm.StartPhasesOf(strings.Join(vllmtest.UpTo("Loading weights took"), "\n"), startedAt)); r != nil {
		t.Errorf("a start still loading: %+v", r)
	}
}

// TestStartOfImagePulled: the kubelet's Pulled Event of the model server container splits
// "container started" in two, the sum unchanged; without one the start says what it said.
func TestStartOfImagePulled(t *testing.T) {
	run := StartsWanted(Input{Observed: Observed{Pods: []*corev1.Pod{startPod("m-b", true, 0)}}})[0] // scheduled 10s before its start
	phases := vllm.StartPhasesOf(strings.Join(vllmtest.KubeletStamped(vllmtest.Start, ".25"), "\n"), startedAt)
	ctr := "spec.containers{" + kinds.ContainerName + "}"
	pulled := func(path, msg string) []PodEvent {
		return []PodEvent{{Type: corev1.EventTypeNormal, Reason: "Scheduled", Message: "Successfully assigned ns/m-b to node-0"},
			{Type: corev1.EventTypeNormal, Reason: "Pulled", FieldPath: path, Message: msg, First: startedAt.Add(-time.Second)}}
	}
	for _, c := range []struct {
		name   string
		events []PodEvent
		want   string // the pod's phases with their seconds
	}{
		{"pulled", pulled(ctr, `Successfully pulled image "vllm/vllm-openai:v0.11.0" in 1.1s (1.2s including waiting). Image size: 10286551171 bytes.`),
			"scheduled=2 image pulled=1.2 container started=8.8"},
		{"pulled in ms", pulled(ctr, `Successfully pulled image "docker.io/vllm/vllm-openai:v0.11.0" in 300ms (312ms including waiting). Image size: 4212134 bytes.`),
			"scheduled=2 image pulled=0.312 container started=9.688"},
		{"already present", pulled(ctr, `Container image "vllm/vllm-openai:v0.11.0" already present on machine`),
			"scheduled=2 image pulled=0 container started=10"},
		{"present, accessible", pulled(ctr, `Container image "vllm/vllm-openai:v0.11.0" already present on machine and can be accessed by the pod`),
			"scheduled=2 image pulled=0 container started=10"},
		// the API's seconds cut the gap short of the kubelet's millisecond clock: the pull is the gap
		{"pull longer than the gap", pulled(ctr, `Successfully pulled image "vllm/vllm-openai:v0.11.0" in 1m2.4s (1m2.5s including waiting). Image size: 1 bytes.`),
			"scheduled=2 image pulled=10 container started=0"},
		{"no event", nil, "scheduled=2 container started=10"},
		{"another container's", pulled("spec.initContainers{fetch}", `Container image "busybox" already present on machine`), "scheduled=2 container started=10"},
		{"a message not the kubelet's", pulled(ctr, `Pulled it`), "scheduled=2 container started=10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := StartOf(run, c.events, phases)
			var got []string
			sum := 0.0
			for _, p := range rec.Phases {
				if p.Name == PhaseScheduled || p.Name == PhaseImagePulled || p.Name == PhaseContainerStarted {
					sum += p.Seconds
					got = append(got, fmt.Sprintf("%s=%g", p.Name, p.Seconds))
				}
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("pod's phases %q, want %q", strings.Join(got, " "), c.want)
			}
			if math.Abs(sum-12) > 0.001 || rec.TotalSeconds != 12+964.75 {
				t.Errorf("the pod's phases add up to %.3fs, not its 12s from creation to start (total %.3fs)", sum, rec.TotalSeconds)
			}
		})
	}
	// a restarted run's start has no pod phases: a Pulled Event says nothing of it
	run.Restarted = true
	if r := StartOf(run, pulled(ctr, `Container image "x" already present on machine`), phases); r.Phases[0].Name != engine.PhaseProcessStart {
		t.Errorf("restarted run: %+v", r.Phases)
	}
}

// TestSlowStart: past 10 minutes, or half a shorter startup budget, a start names its slowest
// phase, once per start.
func TestSlowStart(t *testing.T) {
	rec := &crd.StartRecord{Pod: "m-b", ServingAt: "2026-12-05T14:17:00.000Z", TotalSeconds: 17 * 60,
		Phases: []crd.StartPhase{{Name: engine.PhaseProcessStart, Seconds: 60}, {Name: engine.PhaseWeightsDownload, Seconds: 14 * 60}, {Name: engine.PhaseWeightsLoad, Seconds: 120}}}
	if msg, ok := SlowStart(rec, &crd.SpecExtensions{}); !ok || msg != "SlowStart: weights download 14m of 17m" {
		t.Errorf("17m start: %q %v", msg, ok)
	}
	quick := &crd.StartRecord{TotalSeconds: 9 * 60, Phases: rec.Phases}
	if msg, ok := SlowStart(quick, &crd.SpecExtensions{}); ok {
		t.Errorf("a 9m start is not slow: %q", msg)
	}
	if _, ok := SlowStart(quick, &crd.SpecExtensions{StartupTimeoutSeconds: ptr.To[int32](600)}); !ok {
		t.Errorf("a 9m start of a 10m budget is slow")
	}
	st := crd.InferenceServiceStatus{Conditions: []metav1.Condition{{Type: crd.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonAvailable, Message: "2/2 replicas ready"}}}
	withSlowStart(&st, quick, &crd.SpecExtensions{})
	withSlowStart(&st, rec, &crd.SpecExtensions{})
	if m := st.Conditions[0].Message; m != "2/2 replicas ready; SlowStart: weights download 14m of 17m" {
		t.Errorf("Ready message %q", m)
	}
	stored, next := &crd.StatusExtensions{}, &crd.StatusExtensions{LastStart: rec}
	if _, ok := SlowStartWarning(stored, next, &crd.SpecExtensions{}); !ok {
		t.Errorf("a new slow start is warned of")
	}
	if _, ok := SlowStartWarning(next, next, &crd.SpecExtensions{}); ok {
		t.Errorf("a slow start stored already was warned of")
	}
}

// TestLastStartOf: the latest start read, or the stored one when none is later.
func TestLastStartOf(t *testing.T) {
	old := &crd.StartRecord{Pod: "a", ServingAt: "2026-12-05T14:00:09.000Z"}
	newer := &crd.StartRecord{Pod: "b", ServingAt: "2026-12-05T14:00:10Z"}
	if got := lastStartOf(Input{Observed: Observed{StoredLastStart: old, Starts: map[string]*crd.StartRecord{"r": newer, "x": nil}}}); got != newer {
		t.Errorf("got %+v, want the later start", got)
	}
	if got := lastStartOf(Input{Observed: Observed{StoredLastStart: newer, Starts: map[string]*crd.StartRecord{"r": old}}}); got != newer {
		t.Errorf("got %+v, want the stored, later start", got)
	}
}
