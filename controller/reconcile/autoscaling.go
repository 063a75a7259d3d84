// The AutoscalingActive condition: whether the HPA can scale the model on its queue, read from
// the HPA's own conditions and current metric as the cache keeps them (StripHPA). The model
// serves either way, so it never touches Ready, the phase or the status reason.

package reconcile

import (
	"time"

	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// HPASyncGrace is how long after the model's first pod turns ready the HPA's failure to read
// the queue is put down to the HPA not having synced since (the controller's default period is
// 15s, and its status is written after the sync).
const HPASyncGrace = 30 * time.Second

// autoscaling is the AutoscalingActive condition's decision; present false removes it.
type autoscaling struct {
	present         bool
	status          metav1.ConditionStatus
	reason, message string
}

// decideAutoscaling reads the HPA the spec wants (want, nil when none) from its cached live
// version: False with the HPA's reason and message when it cannot read its metric or is held
// at its maximum above target, True while it reads it, Unknown until it says (False at once,
// FailedGetPodsMetric, when the custom metrics API is known not served), and Unknown
// while no pod has served for HPASyncGrace and the HPA's failure dates from before the first
// one did, unless the isvc already says False for the same reason (a rollout's new pods change
// nothing for the HPA) or the custom metrics API is not available (api: no pod changes that).
// recheck is when that grace ends (0: none pending).
func decideAutoscaling(isvc *crd.InferenceService, live, want *autoscalingv2.HorizontalPodAutoscaler, pods []*corev1.Pod, api kinds.MetricsAPI, now time.Time) (a autoscaling, recheck time.Duration) {
	if want == nil {
		return autoscaling{}, 0
	}
	metric := queueMetricOf(want)
	a = decideFromHPA(isvc, live, metric)
	if a.reason == ReasonAutoscalerNotReported && api.Known && !api.Available && metric != "" {
		// The HPA's verdict is foreseen: it reads its Pods metric through the custom metrics
		// API, which is not served. Said now, the model's first status carries it and the HPA's
		// report later (same status and reason) is no write of its own.
		return autoscaling{true, metav1.ConditionFalse, ReasonFailedGetPodsMetric,
			"the custom metrics API is not available (" + api.Why + "): the HorizontalPodAutoscaler cannot read " + metric}, 0
	}
	if a.status != metav1.ConditionFalse || a.reason == ReasonTooManyReplicas {
		return a, 0
	}
	// Already reported False for this reason: new pods (a rollout) change nothing for the HPA,
	// and an Unknown between two Falses would be two writes and a second Warning.
	if c := meta.FindStatusCondition(isvc.Status.Conditions, crd.ConditionAutoscalingActive); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == a.reason {
		return a, 0
	}
	// No adapter registered, or its APIService down: the HPA's failure is the API's, which no
	// pod turning ready mends; said at once, the first status or the Ready write carries it.
	if api.Known && !api.Available {
		return a, 0
	}
	first, ok := firstReady(pods)
	if !ok {
		return autoscaling{true, metav1.ConditionUnknown, ReasonAwaitingReadyPod,
			"no pod is ready to report " + metric + " yet"}, 0
	}
	// The HPA turned False after a pod served: it read (or tried) since, and the failure is real.
	if c := hpaCondition(live, autoscalingv2.ScalingActive); c != nil && !c.LastTransitionTime.Time.Before(first) {
		return a, 0
	}
	if wait := first.Add(HPASyncGrace).Sub(now); wait > 0 {
		return autoscaling{true, metav1.ConditionUnknown, ReasonAwaitingReadyPod,
			"the HorizontalPodAutoscaler has not read " + metric + " since the first pod turned ready"}, wait
	}
	return a, 0
}

// firstReady is when the earliest of the pods that serve the metric and are ready now turned
// ready. A multi-node group's workers serve no API: they have no probe, so they are ready as
// soon as they run, long before their leader serves, and the HPA has nothing to read from them.
func firstReady(pods []*corev1.Pod) (time.Time, bool) {
	var first time.Time
	for _, p := range pods {
		if w, ok := p.Labels[kinds.LWSWorkerLabel]; ok && w != "0" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && (first.IsZero() || c.LastTransitionTime.Time.Before(first)) {
				first = c.LastTransitionTime.Time
			}
		}
	}
	return first, !first.IsZero()
}

// queueMetricOf is the queue metric the desired HPA scales on: its engine's (desiredHPAOn).
func queueMetricOf(want *autoscalingv2.HorizontalPodAutoscaler) string {
	for _, m := range want.Spec.Metrics {
		if m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil {
			return m.Pods.Metric.Name
		}
	}
	return ""
}

// decideFromHPA is the condition as the HPA alone tells it, metric being the queue metric it
// scales on.
func decideFromHPA(isvc *crd.InferenceService, live *autoscalingv2.HorizontalPodAutoscaler, metric string) autoscaling {
	unknown := autoscaling{true, metav1.ConditionUnknown, ReasonAutoscalerNotReported,
		"the HorizontalPodAutoscaler has not reported whether it reads " + metric + " yet"}
	if live == nil || !ControlledBy(live, isvc) {
		return unknown
	}
	active := hpaCondition(live, autoscalingv2.ScalingActive)
	if active == nil || active.Status == corev1.ConditionUnknown || active.Reason == "" {
		return unknown
	}
	cur, target, seen := queueOf(live, metric)
	reading := ""
	if seen {
		reading = queueReading(metric, cur, target)
	}
	if active.Status == corev1.ConditionFalse {
		return autoscaling{true, metav1.ConditionFalse, active.Reason, joinMessage(active.Message, reading)}
	}
	if lim := hpaCondition(live, autoscalingv2.ScalingLimited); lim != nil && lim.Status == corev1.ConditionTrue &&
		lim.Reason == ReasonTooManyReplicas && (!seen || cur.Cmp(target) > 0) {
		return autoscaling{true, metav1.ConditionFalse, lim.Reason, joinMessage(lim.Message, reading)}
	}
	if reading == "" {
		reading = active.Message
	}
	return autoscaling{true, metav1.ConditionTrue, active.Reason, reading}
}

// set writes the condition on st, or removes it.
func (a autoscaling) set(st *crd.InferenceServiceStatus, isvc *crd.InferenceService, now metav1.Time) {
	setOptionalCondition(st, a.present, metav1.Condition{Type: crd.ConditionAutoscalingActive, Status: a.status, Reason: a.reason, Message: a.message,
		ObservedGeneration: isvc.Generation, LastTransitionTime: now})
}

// setOptionalCondition sets c on st (its transition time kept while its status holds), or
// removes a condition of its type when it is not present: one a model has only in some setups.
func setOptionalCondition(st *crd.InferenceServiceStatus, present bool, c metav1.Condition) {
	if !present {
		meta.RemoveStatusCondition(&st.Conditions, c.Type)
		return
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func hpaCondition(h *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range h.Status.Conditions {
		if h.Status.Conditions[i].Type == t {
			return &h.Status.Conditions[i]
		}
	}
	return nil
}

// queueOf returns the queue per pod the HPA last read of metric and its target; seen is false
// while the HPA reports no current value (a blind HPA reports none).
func queueOf(h *autoscalingv2.HorizontalPodAutoscaler, metric string) (cur, target resource.Quantity, seen bool) {
	var haveTarget bool
	for _, m := range h.Spec.Metrics {
		if m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil && m.Pods.Metric.Name == metric && m.Pods.Target.AverageValue != nil {
			target, haveTarget = *m.Pods.Target.AverageValue, true
		}
	}
	for _, m := range h.Status.CurrentMetrics {
		if m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil && m.Pods.Metric.Name == metric && m.Pods.Current.AverageValue != nil {
			return *m.Pods.Current.AverageValue, target, haveTarget
		}
	}
	return cur, target, false
}

// queueReading is what kubectl describe shows: the metric per pod, rounded, against the
// target; a KV-cache metric (spec.autoscaling.metric kvCache) in percent, as its target is set:
// "kv_cache_usage_perc 82%/70% per pod".
func queueReading(metric string, cur, target resource.Quantity) string {
	if isKVCacheMetric(metric) {
		return fmt.Sprintf("%s %d%%/%d%% per pod", metric, percent(cur), percent(target))
	}
	if isTTFTMetric(metric) {
		return ttftReading(cur, target)
	}
	return fmt.Sprintf("%s %d/%d per pod", metric, rounded(cur), rounded(target))
}

func rounded(q resource.Quantity) int64 { return (q.MilliValue() + 500) / 1000 }

// percent is a fraction of 1 in whole percent, rounded.
func percent(q resource.Quantity) int64 { return (q.MilliValue() + 5) / 10 }

// isKVCacheMetric reports whether metric is an engine's KV-cache metric, as the HPA names it.
func isKVCacheMetric(metric string) bool {
	for _, n := range engine.Names() {
		if engine.For(n).Metrics().KVCacheName == metric {
			return true
		}
	}
	return false
}

func joinMessage(msg, reading string) string {
	if reading == "" {
		return msg
	}
	if msg == "" {
		return reading
	}
	return msg + "; " + reading
}

// parseReading finds queueReading's numbers at the end of a condition message, whichever
// engine's queue or KV-cache metric it names (the stored message may predate a change of
// engine or of spec.autoscaling.metric).
func parseReading(msg string) (cur, target int64, ok bool) {
	at, name, format := -1, "", ""
	for _, n := range engine.Names() {
		m := engine.For(n).Metrics()
		if i := strings.LastIndex(msg, m.QueueName+" "); i > at {
			at, name, format = i, m.QueueName, "%d/%d per pod"
		}
		if i := strings.LastIndex(msg, m.KVCacheName+" "); m.KVCacheName != "" && i > at {
			at, name, format = i, m.KVCacheName, "%d%%/%d%% per pod"
		}
	}
	if i := strings.LastIndex(msg, ttftReadingPrefix); i > at {
		at, name, format = i, strings.TrimSuffix(ttftReadingPrefix, " "), "%d ms against a target of %d ms per pod"
	}
	if at < 0 {
		return 0, 0, false
	}
	n, err := fmt.Sscanf(msg[at+len(name)+1:], format, &cur, &target)
	return cur, target, err == nil && n == 2
}

// queueMoved decides whether a new AutoscalingActive message, under the same status and
// reason, is worth a status write: the HPA reads the queue every sync period and it moves
// with every request, so only a reading that appears or goes, a new target, a crossing of the
// target, or a move of at least half the target (at least 1) is written. The HPA's own wording
// changing alone is not.
func queueMoved(stored, next string) bool {
	oc, ot, ook := parseReading(stored)
	nc, nt, nok := parseReading(next)
	switch {
	case !ook && !nok:
		return false
	case ook != nok || ot != nt || (oc > ot) != (nc > nt):
		return true
	}
	d := nc - oc
	if d < 0 {
		d = -d
	}
	return d >= max(1, nt/2)
}

// sameButQueue reports whether next differs from stored only in an AutoscalingActive message
// whose reading did not move enough to be written (queueMoved).
func sameButQueue(stored, next *crd.InferenceServiceStatus) bool {
	o := meta.FindStatusCondition(stored.Conditions, crd.ConditionAutoscalingActive)
	i := indexCondition(next.Conditions, crd.ConditionAutoscalingActive)
	if o == nil || i < 0 {
		return false
	}
	n := &next.Conditions[i]
	if n.Message == o.Message || n.Status != o.Status || n.Reason != o.Reason || queueMoved(o.Message, n.Message) {
		return false
	}
	s := *next
	s.Conditions = append([]metav1.Condition(nil), next.Conditions...)
	s.Conditions[i].Message = o.Message
	return statusEqual(stored, &s)
}

func indexCondition(cs []metav1.Condition, t string) int {
	for i := range cs {
		if cs[i].Type == t {
			return i
		}
	}
	return -1
}

// AutoscalingWarning returns the Warning Event's message when next's AutoscalingActive turns
// False, or False for a new reason, over stored: one per transition, none while it stays. It
// names the queue metric of isvc's engine.
func AutoscalingWarning(isvc *crd.InferenceService, stored, next *crd.InferenceServiceStatus) (message string, ok bool) {
	n := meta.FindStatusCondition(next.Conditions, crd.ConditionAutoscalingActive)
	if n == nil || n.Status != metav1.ConditionFalse {
		return "", false
	}
	if o := meta.FindStatusCondition(stored.Conditions, crd.ConditionAutoscalingActive); o != nil && o.Status == n.Status && o.Reason == n.Reason {
		return "", false
	}
	return "the HorizontalPodAutoscaler cannot scale on " + engineOf(isvc).Metrics().QueueName + " (" + n.Reason + "): " + n.Message, true
}
