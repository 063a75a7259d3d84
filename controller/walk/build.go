// Package walk is the runbook's troubleshooting walk as one screen, for the kubectl-isvc plugin:
// each layer below an InferenceService with its numbers (isvc, HPA, Deployment, ReplicaSets,
// Pods), the first layer whose numbers do not add up, its events, the crashed container's last
// words and where to look next. The diagnosis is the controller's own (reconcile.Diagnose), run on
// what the plugin lists itself, so it also answers while the operator is down.
//
// Build and the renderers are pure; fetch.go is the I/O that fills their input.
package walk

import (
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

// Objects is what the walk reads: one isvc and its children as listed from the API server.
type Objects struct {
	ISVC       *crd.InferenceService
	HPA        *autoscalingv2.HorizontalPodAutoscaler // nil when there is none (scaled to zero, KEDA without its HPA yet)
	Deployment *appsv1.Deployment
	// LeaderWorkerSet is a multi-node model's child in the Deployment's place (nil if none):
	// walked as reconcile.GroupView reads it, groups as replicas and StatefulSets as ReplicaSets.
	LeaderWorkerSet *unstructured.Unstructured
	ReplicaSets     []*appsv1.ReplicaSet
	Pods            []*corev1.Pod
	// HTTPRoute, InferencePool and Picker are the gateway layer's objects (nil when absent).
	HTTPRoute     *unstructured.Unstructured
	InferencePool *unstructured.Unstructured
	Picker        *appsv1.Deployment
	Events        []corev1.Event // the namespace's, filtered here by the marked layer's objects
	Operator      Operator
	Now           time.Time
}

// Build walks the layers of o. The crashed container's log is left for the caller to read
// (Report.Crashed names it) and set.
func Build(o Objects) Report {
	i := o.ISVC
	r := Report{Namespace: i.Namespace, Name: i.Name, Operator: o.Operator, ReplicaSets: []ReplicaSetLayer{}}
	r.ISVC = ISVCLayer{Model: i.Spec.Model, Desired: i.Spec.Replicas, Ready: i.Status.ReadyReplicas, GPUsPerReplica: i.Spec.GPUs(),
		Phase: string(i.Status.Phase), Reason: i.Status.Reason, Generation: i.Generation, ObservedGeneration: i.Status.ObservedGeneration}
	for _, c := range i.Status.Conditions {
		switch {
		case c.Type == crd.ConditionReady && (c.Status != metav1.ConditionTrue || c.Reason == reconcile.ReasonScaledToZero):
			r.ISVC.Message = c.Message // at zero, when it slept and what wakes it
		case c.Type == crd.ConditionAdmitted:
			r.ISVC.Queue = &QueueLayer{LocalQueue: i.Spec.QueueName, Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		}
	}
	if o.HPA != nil {
		r.HPA = hpaLayer(o.HPA)
	}
	var rss []*appsv1.ReplicaSet
	var pods []*corev1.Pod
	if o.Deployment == nil && o.LeaderWorkerSet != nil {
		o.Deployment, o.ReplicaSets = reconcile.GroupView(o.LeaderWorkerSet, o.Pods)
	}
	if d := o.Deployment; d != nil {
		r.Deployment = &DeploymentLayer{Name: d.Name, Desired: ptr.Deref(d.Spec.Replicas, 1), Current: d.Status.Replicas,
			UpToDate: d.Status.UpdatedReplicas, Ready: d.Status.ReadyReplicas, Available: d.Status.AvailableReplicas}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing {
				r.Deployment.Progressing = c.Reason
			}
		}
		rss = owned(o.ReplicaSets, d.UID)
		r.ReplicaSets = replicaSetLayers(rss)
		if d.Kind == reconcile.KindLeaderWorkerSet {
			r.Deployment.Kind = d.Kind
			statefulSetCounts(r.ReplicaSets, o.Pods)
		}
		uids := map[string]bool{}
		for _, rs := range rss {
			uids[string(rs.UID)] = true
		}
		for _, p := range o.Pods {
			if ref := metav1.GetControllerOfNoCopy(p); ref != nil && uids[string(ref.UID)] {
				pods = append(pods, p)
			}
		}
	}
	r.Pods = podsLayer(pods, o.Now)
	r.Route = routeLayer(o)

	var causes []reconcile.Cause
	var crashed []reconcile.CrashedRun
	if o.Deployment != nil && reconcile.ControlledBy(o.Deployment, i) {
		causes, crashed = reconcile.Diagnose(i, o.Deployment, rss, pods, o.Now)
	}
	sort.SliceStable(causes, func(a, b int) bool { return causes[a].Rank < causes[b].Rank })
	for _, c := range causes {
		r.Causes = append(r.Causes, Finding{c.Reason, c.Message})
	}
	r.Marked, r.Next = mark(r, o)
	r.Events = events(o.Events, r.Marked, o, rss, pods)
	if len(crashed) > 0 {
		r.Crashed = crashedOf(crashed[0], pods, o.Now)
	}
	if spec, st, err := crd.ExtensionsOf(i); err == nil && st.LastStart != nil {
		r.LastStart = &StartLayer{StartRecord: *st.LastStart}
		r.LastStart.SlowStart, _ = reconcile.SlowStart(st.LastStart, &spec)
	}
	if _, st, err := crd.ExtensionsOf(i); err == nil && st.Rollout != nil {
		r.Rollout = &RolloutLayer{RolloutStatus: *st.Rollout}
		if c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionRollout); c != nil {
			r.Rollout.Reason = c.Reason
		}
	}
	return r
}

// mark finds the first layer that does not add up, and where to look next. The diagnosis's
// most blocking cause names it; without one, the isvc's own reason (a conflict, RBAC, the
// spec), a missing Deployment, or an autoscaler that cannot read its metric.
func mark(r Report, o Objects) (layer, next string) {
	reason := ""
	switch {
	case o.ISVC.Status.Reason != "" && layerOf(o.ISVC.Status.Reason) == LayerISVC && reconcile.IsFailing(o.ISVC.Status.Reason):
		reason = o.ISVC.Status.Reason
	case weightsReason(o.ISVC.Status.Reason):
		// No Deployment by design while the cache fills: the isvc's message has the progress.
		return LayerISVC, runbook[o.ISVC.Status.Reason]
	case o.Deployment == nil:
		if r.ISVC.Desired == 0 {
			return "", ""
		}
		return LayerDeployment, runbookMissingDeployment
	case len(r.Causes) > 0:
		reason = r.Causes[0].Reason
	case r.HPA != nil && r.HPA.Problem != "":
		return LayerHPA, hpaRunbook(r.HPA.Metric)
	case r.Route != nil && r.Route.Status == string(metav1.ConditionFalse) && r.ISVC.Ready > 0:
		// The pods serve; the gateway's way to them does not.
		return LayerRoute, runbook[r.Route.Reason]
	case r.ISVC.Ready < min(r.ISVC.Desired, deref(r.Deployment)):
		// The cluster serves as asked but the status says otherwise: the operator has not
		// written what it now sees.
		return LayerISVC, runbook[reasonStale]
	default:
		return "", ""
	}
	return layerOf(reason), runbook[reason]
}

// weightsReason is a managed weights cache's reason (reconcile/cache.go).
func weightsReason(reason string) bool {
	return reason == reconcile.ReasonWeightsDownloading || reason == reconcile.ReasonWeightsDownloadFailed
}

func deref(d *DeploymentLayer) int32 {
	if d == nil {
		return 0
	}
	return d.Desired
}

// layerOf is where the runbook finds a reason.
func layerOf(reason string) string {
	switch reason {
	case reconcile.ReasonQuotaExceeded, reconcile.ReasonLimitRangeRefused, reconcile.ReasonPodCreationRefused:
		return LayerReplicaSet
	case reconcile.ReasonInsufficientGPU, reconcile.ReasonUnschedulable, reconcile.ReasonUntoleratedTaint,
		reconcile.ReasonNodeSelectorMismatch, reconcile.ReasonVolumeClaimUnbound, reconcile.ReasonWaitingForAdmission,
		reconcile.ReasonImagePullFailed, reconcile.ReasonPullingImage, reconcile.ReasonVolumeMountFailed,
		reconcile.ReasonContainerCreateFailed, reconcile.ReasonGPUError, reconcile.ReasonOOMKilled, reconcile.ReasonCrashLoopBackOff, reconcile.ReasonParallelismRefused,
		reconcile.ReasonEvicted, reconcile.ReasonFrequentEviction, reconcile.ReasonReadinessProbeFailing, reconcile.ReasonStarting:
		return LayerPods
	case reconcile.ReasonProgressDeadlineExceeded, reconcile.ReasonRolloutInProgress, reconcile.ReasonReplicasNotReady:
		return LayerDeployment
	}
	return LayerISVC
}

// age is kubectl's short duration: 5s, 3m, 2h, 4d.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
