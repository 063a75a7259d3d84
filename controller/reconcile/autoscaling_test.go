package reconcile

import (
	"fmt"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine/vllm"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// conditionAutoscaling is spelled out so this file's tests compile against the code before
// the condition existed, and fail there.
const conditionAutoscaling = "AutoscalingActive"

// blindMessage is what the HPA controller reports on a cluster that serves no custom metrics.
const blindMessage = "the HPA was unable to compute the replica count: unable to get metric num_requests_waiting: unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered"

// hpaStatus is an HPA's status as the HPA controller writes it: ScalingActive, optionally
// ScalingLimited, and the current queue per pod when it read one (milli < 0: none).
func hpaStatus(active corev1.ConditionStatus, reason, msg string, limited string, milli int64) autoscalingv2.HorizontalPodAutoscalerStatus {
	st := autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: 2, DesiredReplicas: 2, LastScaleTime: &metav1.Time{},
		Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
			{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale", Message: "recommended size matches current size", LastTransitionTime: metav1.Now()},
			{Type: autoscalingv2.ScalingActive, Status: active, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()},
		},
	}
	if limited != "" {
		st.Conditions = append(st.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
			Type: autoscalingv2.ScalingLimited, Status: corev1.ConditionTrue, Reason: limited, Message: "the desired replica count is more than the maximum replica count"})
	}
	if milli >= 0 {
		st.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
			Metric: autoscalingv2.MetricIdentifier{Name: vllm.QueueMetric}, Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(milli, resource.DecimalSI)}}}}
	}
	return st
}

// servingWorld is a converged model at 2 replicas whose HPA exists.
func servingWorld(t *testing.T) *world {
	w := newWorld(2)
	w.apply(w.reconcile().Actions)
	w.podsReady()
	w.obs.Pods = []*corev1.Pod{readyPod("qwen3-0", w.now().Add(-time.Hour)), readyPod("qwen3-1", w.now().Add(-time.Hour))}
	if out := w.reconcile(); len(out.Actions) != 0 || w.obs.HPA == nil {
		t.Fatalf("not converged: %s", verbs(out.Actions))
	}
	return w
}

// readyPod is a model pod that turned ready at since (zero: not ready).
func readyPod(name string, since time.Time) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{kinds.InstanceLabel: "qwen3"}}}
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}
	if !since.IsZero() {
		ready.Status, ready.LastTransitionTime = corev1.ConditionTrue, metav1.NewTime(since)
	}
	p.Status.Conditions = []corev1.PodCondition{ready}
	return p
}

// TestAutoscalingWhileStarting: before a pod serves, and until the HPA has had a sync after the
// first one did, its failure to read the queue is the model starting: Unknown, no Warning, and
// a recheck when the grace ends; after it, False with the HPA's reason.
func TestAutoscalingWhileStarting(t *testing.T) {
	w := servingWorld(t)
	for _, c := range []struct {
		name     string
		since    []time.Duration // how long ago each pod turned ready; negative: not ready
		hpaFalse time.Duration   // how long ago the HPA's ScalingActive turned False
		status   metav1.ConditionStatus
		reason   string
		recheck  time.Duration
		api      kinds.MetricsAPI // zero: not watched
	}{
		{"no pod ready", []time.Duration{-1, -1}, time.Minute, metav1.ConditionUnknown, ReasonAwaitingReadyPod, 0, kinds.MetricsAPI{}},
		{"first ready 10s ago", []time.Duration{10 * time.Second, -1}, time.Minute, metav1.ConditionUnknown, ReasonAwaitingReadyPod, HPASyncGrace - 10*time.Second, kinds.MetricsAPI{}},
		{"first ready a grace ago", []time.Duration{HPASyncGrace, 5 * time.Second}, time.Minute, metav1.ConditionFalse, "FailedGetPodsMetric", 0, kinds.MetricsAPI{}},
		// It read after the pod served, then lost the metric: no grace.
		{"turned False after a pod served", []time.Duration{20 * time.Second, -1}, 5 * time.Second, metav1.ConditionFalse, "FailedGetPodsMetric", 0, kinds.MetricsAPI{}},
		// No adapter registered, or its APIService down: no pod turning ready mends that.
		{"no pod ready, no metrics API", []time.Duration{-1, -1}, time.Minute, metav1.ConditionFalse, "FailedGetPodsMetric", 0, kinds.MetricsAPI{Known: true, Why: "no APIService"}},
		{"first ready 10s ago, metrics API down", []time.Duration{10 * time.Second, -1}, time.Minute, metav1.ConditionFalse, "FailedGetPodsMetric", 0, kinds.MetricsAPI{Known: true, Why: "MissingEndpoints"}},
		{"no pod ready, metrics API available", []time.Duration{-1, -1}, time.Minute, metav1.ConditionUnknown, ReasonAwaitingReadyPod, 0, kinds.MetricsAPI{Known: true, Available: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", "the HPA was unable to compute the replica count: unable to get metric num_requests_waiting: no metrics returned from custom metrics API", "", -1)
			st.Conditions[1].LastTransitionTime = metav1.NewTime(w.now().Add(-c.hpaFalse))
			w.setHPAStatus(st)
			stored := w.isvc.Status
			w.obs.Pods = nil
			for i, ago := range c.since {
				since := time.Time{}
				if ago >= 0 {
					since = w.now().Add(-ago)
				}
				w.obs.Pods = append(w.obs.Pods, readyPod(fmt.Sprint("qwen3-", i), since))
			}
			obs := w.cached()
			obs.MetricsAPI = c.api
			out := Reconcile(Input{ISVC: w.isvc, Observed: obs, Now: w.now()})
			got := meta.FindStatusCondition(out.Status.Conditions, conditionAutoscaling)
			if got == nil || got.Status != c.status || got.Reason != c.reason {
				t.Fatalf("condition %+v, want %s %s", got, c.status, c.reason)
			}
			if _, warn := AutoscalingWarning(w.isvc, &stored, &out.Status); warn != (c.status == metav1.ConditionFalse) {
				t.Fatalf("warning %v for %s", warn, c.status)
			}
			if c.recheck > 0 && (out.Recheck <= 0 || out.Recheck > c.recheck) {
				t.Fatalf("recheck %s, want within %s (when the grace ends)", out.Recheck, c.recheck)
			}
		})
	}
}

// setHPAStatus replaces the live HPA's status, as the HPA controller's status update does.
func (w *world) setHPAStatus(st autoscalingv2.HorizontalPodAutoscalerStatus) {
	h := w.obs.HPA.DeepCopy()
	h.Status = st
	w.obs.HPA = h
}

// TestAutoscalingCondition: the condition says what the HPA says, read through the cache,
// and never claims what the HPA has not reported; the model's phase is untouched.
func TestAutoscalingCondition(t *testing.T) {
	for _, c := range []struct {
		name           string
		hpa            *autoscalingv2.HorizontalPodAutoscalerStatus // nil: the HPA has no status yet
		status         metav1.ConditionStatus
		reason, prefix string
		message        string // exact when set
	}{
		{name: "not reported", status: metav1.ConditionUnknown, reason: ReasonAutoscalerNotReported},
		{name: "blind", hpa: ptrTo(hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", blindMessage, "", -1)),
			status: metav1.ConditionFalse, reason: "FailedGetPodsMetric", message: blindMessage},
		{name: "reads its metric", hpa: ptrTo(hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from pods metric num_requests_waiting", "", 7400)),
			status: metav1.ConditionTrue, reason: "ValidMetricFound", message: "num_requests_waiting 7/5 per pod"},
		{name: "at its maximum above target", hpa: ptrTo(hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", ReasonTooManyReplicas, 9000)),
			status: metav1.ConditionFalse, reason: ReasonTooManyReplicas,
			message: "the desired replica count is more than the maximum replica count; num_requests_waiting 9/5 per pod"},
		{name: "at its maximum, queue back under target", hpa: ptrTo(hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", ReasonTooManyReplicas, 3000)),
			status: metav1.ConditionTrue, reason: "ValidMetricFound", message: "num_requests_waiting 3/5 per pod"},
		{name: "at its minimum idle", hpa: ptrTo(hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", "TooFewReplicas", 0)),
			status: metav1.ConditionTrue, reason: "ValidMetricFound", message: "num_requests_waiting 0/5 per pod"},
		{name: "reads it, no value yet", hpa: ptrTo(hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count", "", -1)),
			status: metav1.ConditionTrue, reason: "ValidMetricFound", message: "the HPA was able to successfully calculate a replica count"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := servingWorld(t)
			if c.hpa != nil {
				w.setHPAStatus(*c.hpa)
			}
			out := w.reconcile()
			got := meta.FindStatusCondition(out.Status.Conditions, conditionAutoscaling)
			if got == nil {
				t.Fatalf("no %s condition: %+v", conditionAutoscaling, out.Status.Conditions)
			}
			if got.Status != c.status || got.Reason != c.reason || c.message != "" && got.Message != c.message {
				t.Fatalf("got %s %s %q, want %s %s %q", got.Status, got.Reason, got.Message, c.status, c.reason, c.message)
			}
			if out.Status.Phase != "Ready" || out.Status.Reason != "" || len(out.Actions) != 0 {
				t.Fatalf("the model serves: phase %s reason %q actions %s", out.Status.Phase, out.Status.Reason, verbs(out.Actions))
			}
		})
	}
	t.Run("no HPA at zero replicas", func(t *testing.T) {
		w := servingWorld(t)
		w.setHPAStatus(hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", blindMessage, "", -1))
		w.reconcile()
		w.isvc.Spec.Replicas, w.isvc.Generation = 0, 2
		w.apply(w.reconcile().Actions)
		if out := w.reconcile(); meta.FindStatusCondition(out.Status.Conditions, conditionAutoscaling) != nil || w.obs.HPA != nil {
			t.Fatalf("condition without an HPA: %+v", out.Status.Conditions)
		}
	})
}

// TestAutoscalingWrites: an HPA's status changes every sync period; the isvc's status is
// written only for a new status or reason, or a queue reading that moved, and one Warning
// goes out per transition to False.
func TestAutoscalingWrites(t *testing.T) {
	w := servingWorld(t)
	var writes, warnings int
	step := func(st autoscalingv2.HorizontalPodAutoscalerStatus) {
		t.Helper()
		w.setHPAStatus(st)
		stored := w.isvc.Status
		out := Reconcile(Input{ISVC: w.isvc, Observed: w.cached(), Now: w.now()})
		if len(out.Actions) != 0 {
			t.Fatalf("actions on an HPA status change: %s", verbs(out.Actions))
		}
		if _, ok := AutoscalingWarning(w.isvc, &stored, &out.Status); ok {
			warnings++
		}
		if WorthWriting(&stored, &out.Status) {
			writes++
			w.isvc.Status = out.Status
		}
		w.rv++
	}
	blind := hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", blindMessage, "", -1)
	step(blind)
	if writes != 1 || warnings != 1 {
		t.Fatalf("turning blind: %d writes, %d warnings, want 1 and 1", writes, warnings)
	}
	for range 5 { // resyncs, and the HPA rewriting its status with new times
		blind.Conditions[1].LastTransitionTime = metav1.NewTime(w.now().Add(1))
		step(blind)
	}
	reworded := hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", blindMessage+" (retrying)", "", -1)
	step(reworded)
	if writes != 1 || warnings != 1 {
		t.Fatalf("blind at rest: %d writes, %d warnings, want 1 and 1", writes, warnings)
	}

	// The metric comes back: one write; the queue moving by less than half the target, none.
	reading := func(milli int64) autoscalingv2.HorizontalPodAutoscalerStatus {
		return hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", "", milli)
	}
	for _, m := range []int64{0, 400, 1200, 0, 1000} {
		step(reading(m))
	}
	if writes != 2 || warnings != 1 {
		t.Fatalf("queue 0..1: %d writes, %d warnings, want 2 and 1", writes, warnings)
	}
	step(reading(3000)) // half the target or more
	step(reading(6000)) // above the target
	step(reading(5600)) // still above, less than half the target away
	if writes != 4 {
		t.Fatalf("queue 3, 6, 6: %d writes, want 4", writes)
	}
	if c := meta.FindStatusCondition(w.isvc.Status.Conditions, conditionAutoscaling); c.Message != "num_requests_waiting 6/5 per pod" {
		t.Fatalf("written reading %q", c.Message)
	}
	// At its maximum above target: a new reason, one write and one Warning.
	limited := hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", ReasonTooManyReplicas, 9000)
	step(limited)
	step(limited)
	if writes != 5 || warnings != 2 {
		t.Fatalf("at max: %d writes, %d warnings, want 5 and 2", writes, warnings)
	}
}

// TestQueueMoved pins the write threshold of the queue reading.
func TestQueueMoved(t *testing.T) {
	r := func(cur, target int64) string {
		return queueReading(vllm.QueueMetric, *resource.NewQuantity(cur, resource.DecimalSI), *resource.NewQuantity(target, resource.DecimalSI))
	}
	for _, c := range []struct {
		stored, next string
		want         bool
	}{
		{"a", "b", false},                   // the HPA's wording alone
		{"a", r(0, 5), true},                // a reading appears
		{r(0, 5), "a", true},                // and goes
		{r(0, 5), r(1, 5), false},           // less than half the target
		{r(0, 5), r(2, 5), true},            // half the target (rounded down)
		{r(5, 5), r(6, 5), true},            // crosses the target
		{r(6, 5), r(7, 5), false},           // above, close
		{r(0, 5), r(0, 8), true},            // a new target
		{r(0, 1), r(1, 1), true},            // a target of 1: every step
		{"x; " + r(3, 10), r(7, 10), false}, // the reading is read at the end
	} {
		if got := queueMoved(c.stored, c.next); got != c.want {
			t.Errorf("queueMoved(%q, %q) = %v, want %v", c.stored, c.next, got, c.want)
		}
	}
}

// TestStripHPAKeepsConditionsAndQueue: the cache keeps what the condition reads (not
// AbleToScale; ScalingActive's transition time, for the starting grace) and no more.
func TestStripHPAKeepsConditionsAndQueue(t *testing.T) {
	h := &autoscalingv2.HorizontalPodAutoscaler{Status: hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", ReasonTooManyReplicas, 7000)}
	h.Status.ObservedGeneration = ptrTo[int64](3)
	since := h.Status.Conditions[1].LastTransitionTime // ScalingActive's
	o, _ := kinds.StripHPA(h)
	got := o.(*autoscalingv2.HorizontalPodAutoscaler).Status
	if len(got.Conditions) != 2 || got.Conditions[0].Reason != "ValidMetricFound" || got.Conditions[1].Message == "" || len(got.CurrentMetrics) != 1 {
		t.Fatalf("dropped what is read: %+v", got)
	}
	if !got.Conditions[0].LastTransitionTime.Equal(&since) {
		t.Fatalf("dropped ScalingActive's transition time: %+v", got.Conditions[0])
	}
	if got.LastScaleTime != nil || got.CurrentReplicas != 0 || got.ObservedGeneration != nil {
		t.Fatalf("kept what is never read: %+v", got)
	}
}

// TestIdleAtTheHPAMinimumIsReady: with a working HPA an idle model sits at the HPA's minimum,
// max(1, replicas/2): that is the model serving as asked, not short of pods, and the operator
// leaves the HPA's count alone.
func TestIdleAtTheHPAMinimumIsReady(t *testing.T) {
	w := newWorld(4) // HPA 2..12
	w.apply(w.reconcile().Actions)
	w.podsReady()
	w.reconcile()
	d := w.obs.Deployment.DeepCopy()
	d.Spec.Replicas = ptrTo[int32](2) // the HPA's scale write
	d.Generation++
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	w.obs.Deployment = d
	out := w.reconcile()
	if len(out.Actions) != 0 {
		t.Fatalf("fought the HPA: %s", verbs(out.Actions))
	}
	if out.Status.Phase != crd.PhaseReady || out.Status.Reason != "" {
		t.Fatalf("idle at the HPA's minimum: phase %s reason %q, conditions %+v", out.Status.Phase, out.Status.Reason, out.Status.Conditions)
	}
	// Below the HPA's choice is still short of pods.
	d = d.DeepCopy()
	d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1
	w.obs.Deployment = d
	if out := w.reconcile(); out.Status.Phase == crd.PhaseReady {
		t.Fatalf("1 of the 2 the HPA chose is Ready: %+v", out.Status.Conditions)
	}
}

// A multi-node group's worker, ready as soon as it runs (it has no probe), is not a pod that
// reports the queue: until its leader serves, the HPA's failure to read is the model starting.
func TestFirstReadyIsALeader(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	worker := readyPod("big-0-1", now.Add(-2*time.Minute))
	worker.Labels = map[string]string{kinds.LWSWorkerLabel: "1"}
	leader := readyPod("big-0", time.Time{})
	leader.Labels = map[string]string{kinds.LWSWorkerLabel: "0"}
	if at, ok := firstReady([]*corev1.Pod{worker, leader}); ok {
		t.Fatalf("a worker counted as the first serving pod (%s)", at)
	}
	leader = readyPod("big-0", now.Add(-time.Minute))
	leader.Labels = map[string]string{kinds.LWSWorkerLabel: "0"}
	if at, ok := firstReady([]*corev1.Pod{worker, leader}); !ok || !at.Equal(now.Add(-time.Minute)) {
		t.Fatalf("first ready %s %v, want the leader's", at, ok)
	}
}

// TestAutoscalingBlindThroughRollout: an HPA already reported blind stays False when a
// rollout replaces every pod (the earliest ready pod is then new): nothing changed for the
// HPA, so no Unknown between two Falses, no second write and no second Warning.
func TestAutoscalingBlindThroughRollout(t *testing.T) {
	w := servingWorld(t)
	st := hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", "the HPA was unable to compute the replica count: unable to get metric num_requests_waiting: no metrics returned from custom metrics API", "", -1)
	st.Conditions[1].LastTransitionTime = metav1.NewTime(w.now().Add(-time.Hour))
	w.setHPAStatus(st)
	w.obs.Pods = []*corev1.Pod{readyPod("qwen3-0", w.now().Add(-time.Hour))}
	blind := Reconcile(Input{ISVC: w.isvc, Observed: w.cached(), Now: w.now()})
	if c := meta.FindStatusCondition(blind.Status.Conditions, conditionAutoscaling); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("before the rollout: %+v", c)
	}
	w.isvc.Status = blind.Status

	w.obs.Pods = []*corev1.Pod{readyPod("qwen3-new-0", w.now().Add(-5*time.Second))}
	out := Reconcile(Input{ISVC: w.isvc, Observed: w.cached(), Now: w.now()})
	c := meta.FindStatusCondition(out.Status.Conditions, conditionAutoscaling)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "FailedGetPodsMetric" {
		t.Fatalf("a rollout's new pod moved a blind HPA's condition to %+v", c)
	}
	if _, warn := AutoscalingWarning(w.isvc, &w.isvc.Status, &out.Status); warn {
		t.Fatal("a second Warning for the same blindness")
	}
}

// TestAutoscalingVerdictKnownWithoutTheAPI: with the custom metrics API known not to be
// served, the HPA's verdict is foreseen before it reports (FailedGetPodsMetric, the HPA
// controller's reason for a Pods metric it cannot get), so the model's first status carries
// it; the HPA's own report later, same status and reason, is no status write and no second
// Warning (issue 55: the third write at 1,000 models came from that report).
func TestAutoscalingVerdictKnownWithoutTheAPI(t *testing.T) {
	w := servingWorld(t)
	api := kinds.MetricsAPI{Known: true, Why: "no APIService for custom.metrics.k8s.io"}
	w.setHPAStatus(autoscalingv2.HorizontalPodAutoscalerStatus{}) // not reported yet
	stored := w.isvc.Status
	obs := w.cached()
	obs.MetricsAPI = api
	first := Reconcile(Input{ISVC: w.isvc, Observed: obs, Now: w.now()})
	got := meta.FindStatusCondition(first.Status.Conditions, conditionAutoscaling)
	if got == nil || got.Status != metav1.ConditionFalse || got.Reason != ReasonFailedGetPodsMetric {
		t.Fatalf("before the HPA reports, without the API: %+v, want False %s", got, ReasonFailedGetPodsMetric)
	}
	if _, warn := AutoscalingWarning(w.isvc, &stored, &first.Status); !warn {
		t.Fatal("no Warning with the verdict")
	}
	w.isvc.Status = first.Status
	w.setHPAStatus(hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", blindMessage, "", -1))
	obs = w.cached()
	obs.MetricsAPI = api
	next := Reconcile(Input{ISVC: w.isvc, Observed: obs, Now: w.now()})
	if WorthWriting(&w.isvc.Status, &next.Status) {
		t.Fatalf("the HPA's own report of the foreseen verdict is a status write:\n%+v\n->\n%+v", w.isvc.Status.Conditions, next.Status.Conditions)
	}
	if _, warn := AutoscalingWarning(w.isvc, &w.isvc.Status, &next.Status); warn {
		t.Fatal("a second Warning for the same verdict")
	}
	// The API served: nothing is foreseen, the HPA is waited for as before.
	w.setHPAStatus(autoscalingv2.HorizontalPodAutoscalerStatus{})
	obs = w.cached()
	obs.MetricsAPI = kinds.MetricsAPI{Known: true, Available: true}
	out := Reconcile(Input{ISVC: w.isvc, Observed: obs, Now: w.now()})
	if c := meta.FindStatusCondition(out.Status.Conditions, conditionAutoscaling); c == nil || c.Status != metav1.ConditionUnknown {
		t.Fatalf("with the API served: %+v, want Unknown until the HPA reports", c)
	}
}
