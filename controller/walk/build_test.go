package walk

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine/vllm"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(-d)) }

// model is an isvc "qwen3" in team-a with its Deployment (desired replicas, ready) and one
// ReplicaSet, before any pod.
func model(replicas, ready int32) Objects {
	isvc := &crd.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "team-a", UID: "isvc-uid", Generation: 1},
		Spec:   crd.InferenceServiceSpec{Model: "Qwen/Qwen3-8B", Replicas: replicas, GPUsPerReplica: ptr.To[int32](2)},
		Status: crd.InferenceServiceStatus{ObservedGeneration: 1, ReadyReplicas: ready, Phase: crd.PhaseReady}}
	ctl := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "x", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "team-a", UID: "deploy-uid", Generation: 1,
		OwnerReferences: ctl(crd.Kind, "qwen3", "isvc-uid")},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: ready, AvailableReplicas: ready,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "qwen3-7b6cd", Namespace: "team-a", UID: "rs-uid",
		Annotations: map[string]string{kinds.RevisionAnnotation: "2"}, OwnerReferences: ctl("Deployment", "qwen3", "deploy-uid")},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}, Status: appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: ready}}
	old := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "qwen3-5f4aa", Namespace: "team-a", UID: "old-uid",
		Annotations: map[string]string{kinds.RevisionAnnotation: "1"}, OwnerReferences: ctl("Deployment", "qwen3", "deploy-uid")},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0)}}
	h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "team-a"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To(max(1, replicas/2)), MaxReplicas: 3 * replicas,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: vllm.QueueMetric},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(5, resource.DecimalSI)}}}}},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: replicas, DesiredReplicas: replicas,
			CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
				Metric:  autoscalingv2.MetricIdentifier{Name: vllm.QueueMetric},
				Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewQuantity(1, resource.DecimalSI)}}}}}}
	return Objects{ISVC: isvc, HPA: h, Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{rs, old}, Now: t0,
		Operator: Operator{"up", "leader op-0, Lease inferenceservice-system/inferenceservice-operator renewed 2s ago"}}
}

func (o Objects) withPods(pods ...*corev1.Pod) Objects {
	o.Pods = append(o.Pods, pods...)
	return o
}

func (o Objects) failed(reason string) Objects {
	o.ISVC.Status.Phase, o.ISVC.Status.Reason = crd.PhaseFailed, reason
	return o
}

func readyPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID(name),
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "qwen3-7b6cd", UID: "rs-uid", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "node-0"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "vllm", Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(time.Hour)}}}}}}
}

func unschedulablePod(name string) *corev1.Pod {
	p := readyPod(name)
	p.Spec.NodeName = ""
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}}}
	return p
}

func crashingPod(name string) *corev1.Pod {
	p := readyPod(name)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", RestartCount: 4,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 1m20s"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			ContainerID: "fake://run-4", StartedAt: ago(40 * time.Second), FinishedAt: ago(30 * time.Second)}}}}
	return p
}

func warning(kind, name, reason, msg string, at time.Duration, count int32) corev1.Event {
	return corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name + "." + reason, Namespace: "team-a"},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name}, Type: corev1.EventTypeWarning, Reason: reason, Message: msg,
		FirstTimestamp: ago(at + time.Minute), LastTimestamp: ago(at), Count: count}
}

func quota(o Objects) Objects {
	rs := o.ReplicaSets[0]
	rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
		Message: `pods "qwen3-7b6cd-x2x9z" is forbidden: exceeded quota: team-a, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4`}}
	rs.Status.Replicas = 2
	o.Deployment.Status.Replicas, o.Deployment.Status.UpdatedReplicas = 2, 2
	o.Events = []corev1.Event{
		warning("ReplicaSet", "qwen3-7b6cd", "FailedCreate", `Error creating: pods "qwen3-7b6cd-a" is forbidden: exceeded quota: team-a`, 3*time.Minute, 1),
		warning("ReplicaSet", "qwen3-7b6cd", "FailedCreate", `(combined from similar events): Error creating: pods "qwen3-7b6cd-b" is forbidden: exceeded quota: team-a`, 5*time.Second, 11),
		warning("Pod", "qwen3-7b6cd-p1", "Unhealthy", "Readiness probe failed", time.Hour, 1), // another layer
		{InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", Name: "qwen3-7b6cd"}, Type: corev1.EventTypeNormal, Reason: "SuccessfulCreate"},
	}
	return o.withPods(readyPod("qwen3-7b6cd-p1"), readyPod("qwen3-7b6cd-p2")).failed(reconcile.ReasonQuotaExceeded)
}

// TestBuildMarks: the first layer that does not add up, the cause, and where to look next, for
// each way a model fails, from the controller's own diagnosis.
func TestBuildMarks(t *testing.T) {
	cases := []struct {
		name         string
		objects      Objects
		marked       string
		reason, next string
		events       int
	}{
		{"healthy", model(2, 2).withPods(readyPod("qwen3-7b6cd-p1"), readyPod("qwen3-7b6cd-p2")), "", "", "", 0},
		{"quota", quota(model(3, 2)), LayerReplicaSet, reconcile.ReasonQuotaExceeded, "kubectl describe resourcequota -n team-a", 1},
		{"GPUs", model(1, 0).withPods(unschedulablePod("qwen3-7b6cd-p1")).failed(reconcile.ReasonInsufficientGPU), LayerPods, reconcile.ReasonInsufficientGPU, "nodes", 0},
		{"crash loop", model(1, 0).withPods(crashingPod("qwen3-7b6cd-p1")).failed(reconcile.ReasonCrashLoopBackOff), LayerPods, reconcile.ReasonCrashLoopBackOff, "kubectl logs qwen3-7b6cd-p1 -n team-a --previous", 0},
		{"weights filling", func() Objects {
			o := model(1, 0)
			o.Deployment = nil
			o.ISVC.Status.Reason = reconcile.ReasonWeightsDownloading
			o.ISVC.Status.Conditions = []metav1.Condition{{Type: crd.ConditionReady, Status: metav1.ConditionFalse, Reason: reconcile.ReasonWeightsDownloading,
				Message: "downloading Qwen/Qwen3-8B: 6.2 GB of 16.4 GB (37%), 210.0 MB/s, about 48s left"}}
			return o
		}(), LayerISVC, "", "the cache is filled once", 0},
		{"no Deployment", func() Objects { o := model(1, 0); o.Deployment = nil; return o }(), LayerDeployment, "", "the operator has not created the Deployment", 0},
		{"conflict", func() Objects {
			o := model(1, 0).failed("ChildConflict")
			o.Deployment.OwnerReferences = nil // someone else's
			return o
		}(), LayerISVC, "", "the isvc does not own", 0},
		{"HPA blind", func() Objects {
			o := model(2, 2).withPods(readyPod("qwen3-7b6cd-p1"), readyPod("qwen3-7b6cd-p2"))
			o.HPA.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse,
				Reason: "FailedGetPodsMetric", Message: "unable to get metric num_requests_waiting"}}
			return o
		}(), LayerHPA, "", "custom.metrics.k8s.io) or Prometheus does not serve num_requests_waiting", 0},
		{"an SGLang model's HPA blind", func() Objects {
			o := model(2, 2).withPods(readyPod("qwen3-7b6cd-p1"), readyPod("qwen3-7b6cd-p2"))
			o.HPA.Spec.Metrics[0].Pods.Metric.Name = "num_queue_reqs"
			o.HPA.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse,
				Reason: "FailedGetPodsMetric", Message: "unable to get metric num_queue_reqs"}}
			return o
		}(), LayerHPA, "", "custom.metrics.k8s.io) or Prometheus does not serve num_queue_reqs", 0},
		{"status lags", func() Objects {
			o := model(2, 2).withPods(readyPod("qwen3-7b6cd-p1"), readyPod("qwen3-7b6cd-p2"))
			o.ISVC.Status.ReadyReplicas = 0
			return o
		}(), LayerISVC, "", "the status lags", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Build(c.objects)
			if r.Marked != c.marked {
				t.Errorf("marked %q, want %q (causes %+v)", r.Marked, c.marked, r.Causes)
			}
			if c.reason != "" && (len(r.Causes) == 0 || r.Causes[0].Reason != c.reason) {
				t.Errorf("causes %+v, want %s first", r.Causes, c.reason)
			}
			if !strings.Contains(r.next(), c.next) {
				t.Errorf("next %q, want it to contain %q", r.next(), c.next)
			}
			if len(r.Events) != c.events {
				t.Errorf("events %+v, want %d", r.Events, c.events)
			}
		})
	}
}

// TestEveryFailingReasonHasANextStep: each reason the walk or the isvc's status can end on (the
// controller's constants, listed here) has a runbook line for "Look here next".
func TestEveryFailingReasonHasANextStep(t *testing.T) {
	for _, reason := range []string{
		reconcile.ReasonQuotaExceeded, reconcile.ReasonLimitRangeRefused, reconcile.ReasonPodCreationRefused,
		reconcile.ReasonInsufficientGPU, reconcile.ReasonUnschedulable, reconcile.ReasonUntoleratedTaint,
		reconcile.ReasonNodeSelectorMismatch, reconcile.ReasonVolumeClaimUnbound, reconcile.ReasonWaitingForAdmission,
		reconcile.ReasonImagePullFailed, reconcile.ReasonPullingImage, reconcile.ReasonVolumeMountFailed,
		reconcile.ReasonContainerCreateFailed, reconcile.ReasonGPUError, reconcile.ReasonOOMKilled, reconcile.ReasonCrashLoopBackOff,
		reconcile.ReasonEvicted, reconcile.ReasonFrequentEviction, reconcile.ReasonReadinessProbeFailing, reconcile.ReasonStarting,
		reconcile.ReasonProgressDeadlineExceeded, reconcile.ReasonRolloutInProgress, reconcile.ReasonReplicasNotReady,
		reconcile.ReasonWeightsDownloading, reconcile.ReasonWeightsDownloadFailed,
		reconcile.ReasonChildConflict, reconcile.ReasonForbidden, reconcile.ReasonAdmissionDenied, reconcile.ReasonInvalidSpec, reconcile.ReasonReconcileError,
	} {
		if runbook[reason] == "" {
			t.Errorf("%s (layer %s): no runbook line", reason, layerOf(reason))
		}
	}
}

// TestRouteLayer: a serving model whose picker is down is marked at the route layer, with the
// picker's numbers, the route's backend and the runbook's next step; once Routed is True the
// walk has nothing to mark.
func TestRouteLayer(t *testing.T) {
	o := model(2, 2)
	o.ISVC.Status.Conditions = []metav1.Condition{{Type: crd.ConditionRouted, Status: metav1.ConditionFalse, Reason: reconcile.ReasonPickerUnavailable,
		Message: "endpoint picker team-a/qwen3-epp has 0 of 1 replicas available"}}
	o.HTTPRoute = &unstructured.Unstructured{Object: map[string]interface{}{
		"metadata": map[string]interface{}{"name": "qwen3"},
		"spec": map[string]interface{}{"rules": []interface{}{map[string]interface{}{
			"backendRefs": []interface{}{map[string]interface{}{"kind": "Service", "name": "qwen3"}}}}},
		"status": map[string]interface{}{"parents": []interface{}{map[string]interface{}{
			"conditions": []interface{}{map[string]interface{}{"type": "Accepted", "status": "True"}}}}},
	}}
	o.InferencePool = &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"name": "qwen3"}}}
	o.Picker = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "qwen3-epp"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	r := Build(o)
	if r.Marked != LayerRoute || !strings.Contains(r.Next, "kubectl logs deploy/NAME-epp") {
		t.Fatalf("marked %q, next %q", r.Marked, r.Next)
	}
	var b strings.Builder
	if err := RenderWhy(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">> Route", "HTTPRoute qwen3", "to Service/qwen3, accepted; Routed False PickerUnavailable", "InferencePool qwen3", "picker qwen3-epp available 0 of 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("why lacks %q:\n%s", want, b.String())
		}
	}
	o.ISVC.Status.Conditions[0].Status, o.ISVC.Status.Conditions[0].Reason = metav1.ConditionTrue, reconcile.ReasonPoolRoute
	if r := Build(o); r.Marked != "" {
		t.Fatalf("routed through the pool, marked %q", r.Marked)
	}
}

// TestScaledToZeroIsNoFault: a model its idle window put to sleep marks no layer, and the walk
// shows when it slept and what wakes it.
func TestScaledToZeroIsNoFault(t *testing.T) {
	o := model(0, 0)
	o.HPA = nil
	msg := "scaled to zero at 2026-01-01T00:00:00Z after 5m0s without a request (no request seen): no pods run and no GPUs are held; the next request through the activator ns/a wakes it"
	o.ISVC.Status.Reason = reconcile.ReasonScaledToZero
	o.ISVC.Status.Conditions = []metav1.Condition{{Type: crd.ConditionReady, Status: metav1.ConditionTrue, Reason: reconcile.ReasonScaledToZero, Message: msg}}
	r := Build(o)
	if r.Marked != "" || r.ISVC.Message != msg {
		t.Fatalf("marked %q, message %q", r.Marked, r.ISVC.Message)
	}
}
