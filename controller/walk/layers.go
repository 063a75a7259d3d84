// Each layer's numbers, as the report shows them: the HPA's, the Deployment's ReplicaSets (or
// a LeaderWorkerSet's StatefulSets), the pods by state, the crashed container, and the gateway's
// way in (route, pool, picker).

package walk

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

func hpaLayer(h *autoscalingv2.HorizontalPodAutoscaler) *HPALayer {
	l := &HPALayer{Name: h.Name, Min: ptr.Deref(h.Spec.MinReplicas, 1), Max: h.Spec.MaxReplicas,
		Current: h.Status.CurrentReplicas, Desired: h.Status.DesiredReplicas}
	if len(h.Spec.Metrics) > 0 {
		l.Metric, l.Target = metricTarget(h.Spec.Metrics[0])
	}
	for _, m := range h.Status.CurrentMetrics {
		if name, v := metricValue(m); name == l.Metric {
			l.Value = v
		}
	}
	for _, c := range h.Status.Conditions {
		switch {
		case c.Type == autoscalingv2.ScalingActive && c.Status == corev1.ConditionFalse:
			l.Problem = c.Reason + ": " + c.Message
		case c.Type == autoscalingv2.ScalingLimited && c.Status == corev1.ConditionTrue:
			l.Limited = true
		}
	}
	return l
}

func metricTarget(m autoscalingv2.MetricSpec) (name, target string) {
	var t autoscalingv2.MetricTarget
	switch {
	case m.Pods != nil:
		name, t = m.Pods.Metric.Name, m.Pods.Target
	case m.External != nil:
		name, t = m.External.Metric.Name, m.External.Target
	case m.Object != nil:
		name, t = m.Object.Metric.Name, m.Object.Target
	case m.Resource != nil:
		name, t = string(m.Resource.Name), m.Resource.Target
	default:
		return string(m.Type), ""
	}
	return name, quantityOf(t.AverageValue, t.Value, t.AverageUtilization)
}

func metricValue(m autoscalingv2.MetricStatus) (name, value string) {
	var v autoscalingv2.MetricValueStatus
	switch {
	case m.Pods != nil:
		name, v = m.Pods.Metric.Name, m.Pods.Current
	case m.External != nil:
		name, v = m.External.Metric.Name, m.External.Current
	case m.Object != nil:
		name, v = m.Object.Metric.Name, m.Object.Current
	case m.Resource != nil:
		name, v = string(m.Resource.Name), m.Resource.Current
	default:
		return "", ""
	}
	return name, quantityOf(v.AverageValue, v.Value, v.AverageUtilization)
}

// quantityOf is a metric's target or reading, whichever of its forms is set: the average per
// pod, the total, or the utilization; "" for none.
func quantityOf(average, value *resource.Quantity, utilization *int32) string {
	switch {
	case average != nil:
		return average.String()
	case value != nil:
		return value.String()
	case utilization != nil:
		return fmt.Sprintf("%d%%", *utilization)
	}
	return ""
}

func owned(rss []*appsv1.ReplicaSet, uid types.UID) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == uid {
			out = append(out, rs)
		}
	}
	return out
}

func revision(rs *appsv1.ReplicaSet) int64 {
	v, _ := strconv.ParseInt(rs.Annotations[kinds.RevisionAnnotation], 10, 64)
	return v
}

// replicaSetLayers lists the ReplicaSets newest first, dropping old ones scaled to zero with no
// pods: the Deployment keeps ten of them, and they add nothing to the walk.
func replicaSetLayers(rss []*appsv1.ReplicaSet) []ReplicaSetLayer {
	var best int64 = -1
	for _, rs := range rss {
		best = max(best, revision(rs))
	}
	sorted := append([]*appsv1.ReplicaSet(nil), rss...)
	sort.SliceStable(sorted, func(a, b int) bool { return revision(sorted[a]) > revision(sorted[b]) })
	out := []ReplicaSetLayer{}
	for _, rs := range sorted {
		l := ReplicaSetLayer{Name: rs.Name, Revision: rs.Annotations[kinds.RevisionAnnotation], New: revision(rs) == best,
			Desired: ptr.Deref(rs.Spec.Replicas, 1), Current: rs.Status.Replicas, Ready: rs.Status.ReadyReplicas}
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
				l.Failure = c.Reason
			}
		}
		if !l.New && l.Desired == 0 && l.Current == 0 {
			continue
		}
		out = append(out, l)
	}
	return out
}

// statefulSetCounts fills the layers of a LeaderWorkerSet's StatefulSets, which the walk sees
// only through their pods: current and ready are the pods each controls, desired unknown (-1).
func statefulSetCounts(layers []ReplicaSetLayer, pods []*corev1.Pod) {
	for i := range layers {
		l := &layers[i]
		l.Desired, l.Current, l.Ready = -1, 0, 0
		for _, p := range pods {
			if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.Name == l.Name && p.DeletionTimestamp == nil {
				l.Current++
				if reconcile.PodReady(p) {
					l.Ready++
				}
			}
		}
	}
}

// Pod states, in the order the runbook looks at them.
var stateOrder = []string{"ready", "not ready", "crash looping", "image pull failing", "waiting", "unschedulable", "pending", "terminating", "failed", "succeeded"}

// podState is one pod's state as `kubectl get pods` would make it read.
func podState(p *corev1.Pod) string {
	switch {
	case p.DeletionTimestamp != nil:
		return "terminating"
	case p.Status.Phase == corev1.PodFailed:
		return "failed"
	case p.Status.Phase == corev1.PodSucceeded:
		return "succeeded"
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "unschedulable"
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "CrashLoopBackOff":
				return "crash looping"
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				return "image pull failing"
			}
			return "waiting"
		}
		// A server's exit is a crash whatever its code (SGLang exits 0 when a scheduler dies).
		if t := cs.State.Terminated; t != nil {
			return "crash looping"
		}
		if t := cs.LastTerminationState.Terminated; t != nil && !cs.Ready {
			return "crash looping" // restarted and not serving yet: the walk calls it the crash loop too
		}
	}
	switch {
	case p.Spec.NodeName == "" || p.Status.Phase == corev1.PodPending:
		return "pending"
	case reconcile.PodReady(p):
		return "ready"
	}
	return "not ready"
}

func podsLayer(pods []*corev1.Pod, now time.Time) PodsLayer {
	counts := map[string]*StateCount{}
	for _, p := range pods {
		s := podState(p)
		c := counts[s]
		if c == nil {
			c = &StateCount{State: s, Pod: p.Name}
			counts[s] = c
		}
		c.Count++
		if p.Name < c.Pod {
			c.Pod = p.Name
		}
	}
	l := PodsLayer{Total: len(pods), States: []StateCount{}}
	for _, s := range stateOrder {
		if c := counts[s]; c != nil {
			l.States = append(l.States, *c)
		}
	}
	return l
}

func crashedOf(run reconcile.CrashedRun, pods []*corev1.Pod, now time.Time) *Crashed {
	for _, p := range pods {
		if p.Name != run.Pod {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != run.Container {
				continue
			}
			t := cs.LastTerminationState.Terminated
			if !run.Previous {
				t = cs.State.Terminated
			}
			if t == nil {
				return nil
			}
			return &Crashed{Pod: run.Pod, Container: run.Container, Previous: run.Previous, ExitCode: t.ExitCode, Reason: t.Reason,
				Message: firstLine(t.Message), Restarts: cs.RestartCount, Finished: age(now, t.FinishedAt.Time), run: run}
		}
	}
	return nil
}

// routeLayer reads the gateway layer: the route's backend and its Gateway's verdict, the pool's
// verdict and the picker's replicas, and the isvc's Routed condition, which says what they add
// up to. nil for a model without an HTTPRoute or the condition.
func routeLayer(o Objects) *RouteLayer {
	c := meta.FindStatusCondition(o.ISVC.Status.Conditions, crd.ConditionRouted)
	if o.HTTPRoute == nil && c == nil {
		return nil
	}
	l := &RouteLayer{Route: "-"}
	if c != nil {
		l.Status, l.Reason, l.Message = string(c.Status), c.Reason, c.Message
	}
	if r := o.HTTPRoute; r != nil {
		l.Route = r.GetName()
		rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
		if len(rules) > 0 {
			if refs, _, _ := unstructured.NestedSlice(rules[0].(map[string]interface{}), "backendRefs"); len(refs) > 0 {
				ref, _ := refs[0].(map[string]interface{})
				l.Backend = fmt.Sprint(ref["kind"], "/", ref["name"])
			}
		}
		parents, _, _ := unstructured.NestedSlice(r.Object, "status", "parents")
		for _, p := range parents {
			conds, _, _ := unstructured.NestedSlice(p.(map[string]interface{}), "conditions")
			for _, c := range conds {
				if cm, ok := c.(map[string]interface{}); ok && cm["type"] == "Accepted" && cm["status"] == "True" {
					l.Accepted = true
				}
			}
		}
	}
	if p := o.InferencePool; p != nil {
		pl := &PoolLayer{Name: p.GetName(), Picker: reconcile.PickerName(o.ISVC.Name), PickerMissing: o.Picker == nil}
		parents, _, _ := unstructured.NestedSlice(p.Object, "status", "parents")
		for _, pa := range parents {
			conds, _, _ := unstructured.NestedSlice(pa.(map[string]interface{}), "conditions")
			for _, c := range conds {
				if cm, ok := c.(map[string]interface{}); ok && cm["type"] == "Accepted" {
					pl.Accepted = fmt.Sprint(cm["status"])
				}
			}
		}
		if d := o.Picker; d != nil {
			pl.PickerDesired, pl.PickerAvailable = ptr.Deref(d.Spec.Replicas, 1), d.Status.AvailableReplicas
		}
		l.Pool = pl
	}
	return l
}
