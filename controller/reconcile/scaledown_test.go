package reconcile

import (
	"strconv"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// hpaServerDefaults plays the API server's defaulting of an autoscaling/v2 HPA's behavior:
// once behavior is set, every rule it leaves out is filled in (scale up with no window, 4 pods
// or 100% per 15 s; scale down 100% per 15 s, its window left to the HPA controller's flag).
func hpaServerDefaults(h *autoscalingv2.HorizontalPodAutoscaler) {
	b := h.Spec.Behavior
	if b == nil {
		return
	}
	fill := func(r **autoscalingv2.HPAScalingRules, window *int32, policies []autoscalingv2.HPAScalingPolicy) {
		if *r == nil {
			*r = &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: window}
		}
		if (*r).SelectPolicy == nil {
			(*r).SelectPolicy = ptr.To(autoscalingv2.MaxChangePolicySelect)
		}
		if (*r).Policies == nil {
			(*r).Policies = policies
		}
	}
	fill(&b.ScaleUp, ptr.To[int32](0), []autoscalingv2.HPAScalingPolicy{
		{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15}, {Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}})
	fill(&b.ScaleDown, nil, []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}})
}

// scaleDownWindow is the live HPA's scale-down window; nil is the HPA controller's default.
func scaleDownWindow(h *autoscalingv2.HorizontalPodAutoscaler) *int32 {
	if h.Spec.Behavior == nil || h.Spec.Behavior.ScaleDown == nil {
		return nil
	}
	return h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds
}

func windowString(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}

// TestScaleDownDelay: spec.autoscaling.scaleDownDelaySeconds is the HPA's scale-down window;
// scale-up keeps the HPA's default (no window). A change of the field is one HPA update that
// carries only the window, a converged HPA gets no write, and the field removed leaves the
// window to the HPA controller again.
func TestScaleDownDelay(t *testing.T) {
	w := newWorld(2)
	w.ext = crd.SpecExtensions{Autoscaling: &crd.Autoscaling{MinReplicas: 2, MaxReplicas: 6, ScaleDownDelaySeconds: ptr.To[int32](600)}, ReplicasUnset: true}
	out := w.reconcile()
	var created *autoscalingv2.HorizontalPodAutoscaler
	for _, a := range out.Actions {
		if h, ok := a.Object.(*autoscalingv2.HorizontalPodAutoscaler); ok && a.Verb == Create {
			created = h
		}
	}
	if created == nil {
		t.Fatalf("no HPA created: %s", verbs(out.Actions))
	}
	if got := windowString(scaleDownWindow(created)); got != "600" || created.Spec.Behavior.ScaleUp != nil {
		t.Fatalf("created HPA: behavior %+v; want a scale-down window of 600 and the HPA's default scale-up", created.Spec.Behavior)
	}
	w.apply(out.Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged with the API server's behavior defaults: %s", verbs(out.Actions))
	}

	for _, step := range []struct {
		name  string
		delay *int32
	}{{"600 -> 900", ptr.To[int32](900)}, {"900 -> 0", ptr.To[int32](0)}, {"removed", nil}, {"set again", ptr.To[int32](120)}} {
		w.ext.Autoscaling.ScaleDownDelaySeconds = step.delay
		w.isvc.Generation++
		out := w.reconcile()
		if got := verbs(out.Actions); got != "update HorizontalPodAutoscaler" {
			t.Fatalf("%s: %s, want one HPA update", step.name, got)
		}
		patch, err := OwnedPatch(out.Actions[0].Cached, out.Actions[0].Object)
		if err != nil {
			t.Fatal(err)
		}
		if p := string(patch); !strings.Contains(p, `"stabilizationWindowSeconds"`) || strings.Contains(p, "policies") || strings.Contains(p, "minReplicas") || strings.Contains(p, "metrics") {
			t.Fatalf("%s: patch %s, want only the window", step.name, p)
		}
		w.apply(out.Actions)
		if got, want := windowString(scaleDownWindow(w.obs.HPA)), windowString(step.delay); got != want {
			t.Fatalf("%s: live window %s, want %s", step.name, got, want)
		}
		if b := w.obs.HPA.Spec.Behavior; b == nil || b.ScaleUp == nil || len(b.ScaleUp.Policies) != 2 || len(b.ScaleDown.Policies) != 1 {
			t.Fatalf("%s: the update dropped the API server's defaults: %+v", step.name, b)
		}
		if out := w.reconcile(); len(out.Actions) != 0 {
			t.Fatalf("%s: not converged: %s", step.name, verbs(out.Actions))
		}
	}

	// Hand edits: the window is restored; the rest of behavior is not the operator's.
	h := w.obs.HPA.DeepCopy()
	h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds = ptr.To[int32](30)
	w.obs.HPA = h
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update HorizontalPodAutoscaler" {
		t.Fatalf("window edited by hand: %s", got)
	}
	w.apply(out.Actions)
	if got := windowString(scaleDownWindow(w.obs.HPA)); got != "120" {
		t.Fatalf("window after restore %s, want 120", got)
	}
	h = w.obs.HPA.DeepCopy()
	h.Spec.Behavior.ScaleUp.Policies = []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}
	h.Spec.Behavior.ScaleDown.SelectPolicy = ptr.To(autoscalingv2.MinChangePolicySelect)
	w.obs.HPA = h
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("acts on behavior it does not own: %s", verbs(out.Actions))
	}
	h = w.obs.HPA.DeepCopy()
	h.Spec.Behavior = nil
	w.obs.HPA = h
	if got := verbs(w.reconcile().Actions); got != "update HorizontalPodAutoscaler" {
		t.Fatalf("behavior removed by hand: %s", got)
	}
}

// TestScaleDownDelayUnsetWritesNothing: an HPA created before the field existed (no behavior)
// and a spec without it agree: no write, in either version.
func TestScaleDownDelayUnsetWritesNothing(t *testing.T) {
	for name, ext := range map[string]crd.SpecExtensions{
		"v1alpha1": {},
		"v1beta1":  {Autoscaling: &crd.Autoscaling{MinReplicas: 2, MaxReplicas: 6}, ReplicasUnset: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(2)
			w.ext = ext
			w.apply(w.reconcile().Actions)
			w.podsReady()
			if out := w.reconcile(); len(out.Actions) != 0 || w.obs.HPA.Spec.Behavior != nil {
				t.Fatalf("%s, behavior %+v", verbs(out.Actions), w.obs.HPA.Spec.Behavior)
			}
		})
	}
}

// TestScaleDownDelaySetThenNotDrifted is TestSetThenNotDrifted for the window, from an HPA
// without behavior and from one with another window and the server's defaults.
func TestScaleDownDelaySetThenNotDrifted(t *testing.T) {
	w := newWorld(2)
	for _, delay := range []*int32{nil, ptr.To[int32](0), ptr.To[int32](300), ptr.To[int32](crd.MaxScaleDownDelaySeconds)} {
		ext := &crd.SpecExtensions{Autoscaling: &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4, ScaleDownDelaySeconds: delay}}
		want := DesiredChildren(w.isvc, ext, Features{}).HPA
		other := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](77)}}}}
		hpaServerDefaults(other)
		for _, live := range []*autoscalingv2.HorizontalPodAutoscaler{{}, other} {
			setHPA(live, want)
			if hpaDrifted(live, want) {
				t.Fatalf("delay %s: drifted after set: %+v", windowString(delay), live.Spec.Behavior)
			}
			if got := windowString(scaleDownWindow(live)); got != windowString(delay) {
				t.Fatalf("delay %s: set wrote window %s", windowString(delay), got)
			}
		}
	}
}

// TestStripHPAKeepsTheWindow: the cache keeps the HPA's spec whole, so the window is compared
// against what is stored, never against a cache that dropped it.
func TestStripHPAKeepsTheWindow(t *testing.T) {
	h := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](600)}}}}
	hpaServerDefaults(h)
	got, _ := kinds.StripHPA(h.DeepCopy())
	if w := windowString(scaleDownWindow(got.(*autoscalingv2.HorizontalPodAutoscaler))); w != "600" {
		t.Fatalf("cached window %s, want 600", w)
	}
}
