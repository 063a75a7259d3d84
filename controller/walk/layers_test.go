package walk

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestPodStates: each pod counted once in the state kubectl would show, first by name.
func TestPodStates(t *testing.T) {
	terminating := readyPod("qwen3-7b6cd-p5")
	terminating.DeletionTimestamp = ptr.To(ago(time.Second))
	l := podsLayer([]*corev1.Pod{crashingPod("qwen3-7b6cd-p4"), readyPod("qwen3-7b6cd-p2"), unschedulablePod("qwen3-7b6cd-p3"),
		readyPod("qwen3-7b6cd-p1"), terminating}, t0)
	got := []StateCount{}
	got = append(got, l.States...)
	want := []StateCount{{"ready", 2, "qwen3-7b6cd-p1"}, {"crash looping", 1, "qwen3-7b6cd-p4"}, {"unschedulable", 1, "qwen3-7b6cd-p3"}, {"terminating", 1, "qwen3-7b6cd-p5"}}
	if l.Total != 5 || len(got) != len(want) {
		t.Fatalf("pods %+v, want %+v", l, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("state %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
