package reconcile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

func TestDecideRaise(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	fixed := Scale{Replicas: 6, Min: 3, Max: 18, Fixed: true}
	ann := func(applied, raised string) map[string]string {
		a := map[string]string{ReplicasAnnotation: applied}
		if raised != "" {
			a[RaisedAnnotation] = raised
		}
		return a
	}
	ready := func(n int, ago time.Duration) []*corev1.Pod {
		var ps []*corev1.Pod
		for i := range n {
			ps = append(ps, readyPod(fmt.Sprint("p", i), now.Add(-ago)))
		}
		return ps
	}
	for _, tc := range []struct {
		name  string
		ann   map[string]string
		sc    Scale
		pods  []*corev1.Pod
		held  int32
		until time.Time
	}{
		{"no anchor yet", nil, fixed, nil, 0, time.Time{}},
		{"a raise 3 -> 6, pods loading", ann("3", ""), fixed, ready(3, time.Hour), 6, time.Time{}},
		{"held, 5 of 6 ready", ann("6", "6"), fixed, ready(5, time.Minute), 6, time.Time{}},
		{"held, 6 ready for a minute", ann("6", "6"), fixed, ready(6, time.Minute), 6, now.Add(4 * time.Minute)},
		{"held, 6 ready for a window: ends", ann("6", "6"), fixed, ready(6, DefaultRaiseHold), 0, time.Time{}},
		{"lowered since: ends", ann("6", "6"), Scale{Replicas: 4, Min: 2, Max: 12, Fixed: true}, nil, 0, time.Time{}},
		{"a raise 1 -> 2 above the minimum 1", ann("1", ""), Scale{Replicas: 2, Min: 1, Max: 6, Fixed: true}, nil, 2, time.Time{}},
		{"a raise to 1 from 0 holds nothing", ann("0", ""), Scale{Replicas: 1, Min: 1, Max: 3, Fixed: true}, nil, 0, time.Time{}},
		{"v1beta1 autoscaling: no user's count", ann("3", ""), Scale{Replicas: 6, Min: 3, Max: 18}, nil, 0, time.Time{}},
		{"no raise: applied is current", ann("6", ""), fixed, nil, 0, time.Time{}},
		{"raise beyond max is held at max", ann("3", ""), Scale{Replicas: 6, Min: 3, Max: 5, Fixed: true}, nil, 5, time.Time{}},
	} {
		got := decideRaise(tc.ann, tc.sc, tc.pods, DefaultRaiseHold, now)
		if got.held != tc.held || !got.until.Equal(tc.until) {
			t.Errorf("%s: held %d until %v, want %d until %v", tc.name, got.held, got.until, tc.held, tc.until)
		}
	}
}

// A raise of spec.replicas keeps the HPA's minimum at it while the new pods load and for a
// window after they serve; then the minimum goes back, the hold's mark is removed, and the
// count the HPA then chooses is never fought.
func TestRaiseHeldThenReleased(t *testing.T) {
	w := newWorld(3)
	w.apply(w.reconcile().Actions)
	w.podsReady()
	w.apply(w.reconcile().Actions)

	w.isvc.Spec.Replicas, w.isvc.Generation = 6, 2
	out := w.reconcile()
	w.apply(out.Actions)
	if d, h := w.obs.Deployment, w.obs.HPA; *d.Spec.Replicas != 6 || d.Annotations[RaisedAnnotation] != "6" || *h.Spec.MinReplicas != 6 {
		t.Fatalf("after the raise: replicas %d, mark %q, HPA minimum %d", *d.Spec.Replicas, d.Annotations[RaisedAnnotation], *h.Spec.MinReplicas)
	}
	w.obs.HPA = hpaReading(w.obs.HPA)
	c := meta.FindStatusCondition(w.reconcile().Status.Conditions, crd.ConditionAutoscalingActive)
	if c == nil || !strings.Contains(c.Message, "holding the HPA's minimum at 6 (spec.replicas raised) until those pods are ready") {
		t.Fatalf("AutoscalingActive while loading: %+v", c)
	}

	// Six pods ready a minute ago: held, no write, a recheck when the window ends.
	w.podsReady()
	for i := range 6 {
		w.obs.Pods = append(w.obs.Pods, readyPod(fmt.Sprint("qwen3-", i), w.now().Add(-time.Minute)))
	}
	out = w.reconcile()
	if len(out.Actions) != 0 || out.Recheck <= 0 || out.Recheck > DefaultRaiseHold {
		t.Fatalf("held with pods serving: %s, recheck %v", verbs(out.Actions), out.Recheck)
	}
	if c := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionAutoscalingActive); c == nil || !strings.Contains(c.Message, "then the autoscaler decides") {
		t.Fatalf("AutoscalingActive while held: %+v", c)
	}

	// The window has passed: the minimum goes back to 3 and the mark goes.
	for _, p := range w.obs.Pods {
		p.Status.Conditions[0].LastTransitionTime.Time = w.now().Add(-DefaultRaiseHold)
	}
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment, update HorizontalPodAutoscaler" {
		t.Fatalf("hold ended: %s", got)
	}
	w.apply(out.Actions)
	if d, h := w.obs.Deployment, w.obs.HPA; *d.Spec.Replicas != 6 || d.Annotations[RaisedAnnotation] != "" || *h.Spec.MinReplicas != 3 {
		t.Fatalf("released: replicas %d, mark %q, HPA minimum %d", *d.Spec.Replicas, d.Annotations[RaisedAnnotation], *h.Spec.MinReplicas)
	}

	// The HPA scales to 3 on an empty queue: kept, and no new hold.
	d := w.obs.Deployment.DeepCopy()
	d.Spec.Replicas = ptr.To[int32](3)
	w.obs.Deployment = d
	w.obs.Pods = w.obs.Pods[:3]
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("fights the HPA after the hold: %s", verbs(out.Actions))
	}
}

// hpaReading is h reporting that it reads the queue.
func hpaReading(h *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	h = h.DeepCopy()
	h.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue, Reason: "ValidMetricFound", Message: "the HPA was able to successfully calculate a replica count"}}
	return h
}
