package reconcile

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
)

func creatingPod(scheduledAgo time.Duration) *corev1.Pod {
	return pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-scheduledAgo))}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	})
}

// A pod still being created is a plain start until the threshold, when its Events are wanted
// and a reconcile is due; past it, a FailedMount is VolumeMountFailed (failing), a pull without
// its Pulled is PullingImage (not failing), anything else stays Starting.
func TestContainerCreatingForLong(t *testing.T) {
	w, _ := diagnosisWorld(t, 1, 0)
	after := 2 * time.Minute
	in := func(ago time.Duration, events ...PodEvent) Input {
		w.obs.Pods = []*corev1.Pod{creatingPod(ago)}
		w.obs.PodEvents = map[types.UID][]PodEvent{"qwen3-7b6cd-a": events}
		return Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0), Features: Features{CreatingEvidenceAfter: after}}
	}
	early := in(30 * time.Second)
	if got := CreatingPods(early); len(got) != 0 {
		t.Fatalf("events wanted before the threshold: %d", len(got))
	}
	if st := Reconcile(early).Status; st.Reason != ReasonStarting {
		t.Fatalf("before the threshold: %s", st.Reason)
	}
	if got := diagnosisRecheck(early); got != 90*time.Second {
		t.Fatalf("recheck in %s, want 90s (when the threshold passes)", got)
	}
	mount := PodEvent{Type: corev1.EventTypeWarning, Reason: "FailedMount", First: t0.Add(-2 * time.Minute), Last: t0,
		Message: `MountVolume.SetUp failed for volume "weights-pv" : mount failed: exit status 32`}
	pulling := PodEvent{Type: corev1.EventTypeNormal, Reason: "Pulling", Message: `Pulling image "vllm/vllm-openai:v0.11.0"`, First: t0.Add(-3 * time.Minute), Last: t0.Add(-3 * time.Minute)}
	pulled := PodEvent{Type: corev1.EventTypeNormal, Reason: "Pulled", Message: `Successfully pulled image`, First: t0.Add(-time.Minute), Last: t0.Add(-time.Minute)}
	for _, c := range []struct {
		name   string
		events []PodEvent
		reason string
		phase  crd.Phase
		want   string
	}{
		{"mount", []PodEvent{pulling, mount}, ReasonVolumeMountFailed, crd.PhaseFailed, `Pod qwen3-7b6cd-a on node fake-node-0: volumes not mounted since 2026-01-01T11:58:00Z: FailedMount: MountVolume.SetUp failed for volume "weights-pv"`},
		{"pulling", []PodEvent{pulling}, ReasonPullingImage, crd.PhaseProgressing, `Pulling image "vllm/vllm-openai:v0.11.0" since 2026-01-01T11:57:00Z`},
		{"pulled", []PodEvent{pulling, pulled}, ReasonStarting, crd.PhaseProgressing, "starting since"},
		{"no events", nil, ReasonStarting, crd.PhaseProgressing, "starting since"},
	} {
		late := in(5*time.Minute, c.events...)
		if got := CreatingPods(late); len(got) != 1 {
			t.Fatalf("%s: events not wanted past the threshold", c.name)
		}
		st := Reconcile(late).Status
		if msg := findCond(st.Conditions, crd.ConditionReady).Message; st.Reason != c.reason || st.Phase != c.phase || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %s/%s: %s", c.name, st.Phase, st.Reason, msg)
		}
	}
	off := in(5*time.Minute, mount)
	off.Features.CreatingEvidenceAfter = 0
	if got := CreatingPods(off); len(got) != 0 || Reconcile(off).Status.Reason != ReasonStarting {
		t.Fatalf("with the feature off: %d wanted, %s", len(got), Reconcile(off).Status.Reason)
	}
}
