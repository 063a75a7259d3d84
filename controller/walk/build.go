// Package walk is the runbook's troubleshooting walk as one screen, for the kubectl-isvc plugin:
// each layer below an InferenceService with its numbers (isvc, HPA, Deployment, ReplicaSets,
// Pods), the first layer whose numbers do not add up, its events, the crashed container's last
// words and where to look next. The diagnosis is the controller's own (reconcile.Walk), run on
// what the plugin lists itself, so it also answers while the operator is down.
//
// Build and the renderers are pure; fetch.go is the I/O that fills their input.
package walk

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

// Layers, top down; Report.Marked names one of them.
const (
	LayerISVC       = "isvc"
	LayerHPA        = "HPA"
	LayerDeployment = "Deployment"
	LayerReplicaSet = "ReplicaSet"
	LayerPods       = "Pods"
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
	Events          []corev1.Event // the namespace's, filtered here by the marked layer's objects
	Operator        Operator
	Now             time.Time
}

// Operator is what the plugin could see of the operator: its leader Lease and its pods.
type Operator struct {
	// State is "up", "down" or "unknown" (nothing found where the manifests put it: an operator
	// run elsewhere is not seen, so it is not called down).
	State  string `json:"state"`
	Detail string `json:"detail"`
}

// OperatorState reads the leader Lease (nil if absent) and the operator's pods; err is why they
// could not be read (RBAC), which makes the state unknown rather than down.
func OperatorState(lease *coordinationv1.Lease, pods []*corev1.Pod, where string, err error, now time.Time) Operator {
	if err != nil {
		return Operator{"unknown", fmt.Sprintf("cannot read the operator's Lease or pods in %s: %v", where, err)}
	}
	ready := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil && reconcile.PodReady(p) {
			ready++
		}
	}
	if lease != nil {
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		dur := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 15)) * time.Second
		var renewed time.Time
		if lease.Spec.RenewTime != nil {
			renewed = lease.Spec.RenewTime.Time
		}
		switch {
		case holder == "":
			return Operator{"down", fmt.Sprintf("no leader: Lease %s/%s released, %d ready operator pods", lease.Namespace, lease.Name, ready)}
		case renewed.IsZero() || now.Sub(renewed) > dur:
			return Operator{"down", fmt.Sprintf("leader %s stopped renewing Lease %s/%s %s ago (lease %s), %d ready operator pods",
				holder, lease.Namespace, lease.Name, age(now, renewed), dur, ready)}
		}
		return Operator{"up", fmt.Sprintf("leader %s, Lease %s/%s renewed %s ago", holder, lease.Namespace, lease.Name, age(now, renewed))}
	}
	switch {
	case ready > 0:
		return Operator{"up", fmt.Sprintf("%d ready operator pods in %s (no leader Lease: leader election off)", ready, where)}
	case len(pods) > 0:
		return Operator{"down", fmt.Sprintf("%d operator pods in %s, none ready", len(pods), where)}
	}
	return Operator{"unknown", fmt.Sprintf("no operator pod and no leader Lease in %s (an operator run elsewhere is not seen: --operator-namespace)", where)}
}

// Report is the walk's outcome, what `why` prints and `--output json` encodes.
type Report struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Operator    Operator          `json:"operator"`
	ISVC        ISVCLayer         `json:"isvc"`
	HPA         *HPALayer         `json:"hpa,omitempty"`
	Deployment  *DeploymentLayer  `json:"deployment,omitempty"`
	ReplicaSets []ReplicaSetLayer `json:"replicaSets"`
	Pods        PodsLayer         `json:"pods"`
	// Marked is the first layer whose numbers do not add up; empty when the model serves as asked.
	Marked string `json:"marked,omitempty"`
	// Causes are the walk's findings, most blocking first.
	Causes []Finding `json:"causes,omitempty"`
	// Events are the marked layer's recent events, oldest first.
	Events  []Event  `json:"events,omitempty"`
	Crashed *Crashed `json:"crashed,omitempty"`
	Next    string   `json:"next,omitempty"`
}

// ISVCLayer is the top layer's numbers.
type ISVCLayer struct {
	Model              string `json:"model"`
	Desired            int32  `json:"desired"`
	Ready              int32  `json:"ready"`
	GPUsPerReplica     int32  `json:"gpusPerReplica"`
	Phase              string `json:"phase"`
	Reason             string `json:"reason"`
	Message            string `json:"message,omitempty"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	// Queue is what Kueue did with the pods, from the isvc's Admitted condition (the
	// LocalQueue, the status and reason, the operator's message); nil for a model not queued.
	Queue *QueueLayer `json:"queue,omitempty"`
}

// QueueLayer is the isvc's Admitted condition, in the walk as the layer Kueue adds above the pods.
type QueueLayer struct {
	LocalQueue string `json:"localQueue,omitempty"`
	Status     string `json:"status"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
}

// HPALayer is the autoscaler's numbers: bounds, replicas and the queue metric against its target.
type HPALayer struct {
	Name    string `json:"name"`
	Min     int32  `json:"min"`
	Max     int32  `json:"max"`
	Current int32  `json:"current"`
	Desired int32  `json:"desired"`
	Metric  string `json:"metric,omitempty"`
	Value   string `json:"value,omitempty"` // empty when the HPA has no reading
	Target  string `json:"target,omitempty"`
	Problem string `json:"problem,omitempty"` // ScalingActive=False's reason and message
	Limited bool   `json:"limited,omitempty"` // ScalingLimited=True: at a bound
}

// DeploymentLayer is the Deployment's numbers, as `kubectl get deploy` shows them.
type DeploymentLayer struct {
	// Kind is "LeaderWorkerSet" for a multi-node model (replicas are its groups), else empty.
	Kind        string `json:"kind,omitempty"`
	Name        string `json:"name"`
	Desired     int32  `json:"desired"`
	Current     int32  `json:"current"`
	UpToDate    int32  `json:"upToDate"`
	Ready       int32  `json:"ready"`
	Available   int32  `json:"available"`
	Progressing string `json:"progressing,omitempty"` // the Progressing condition's reason
}

// ReplicaSetLayer is one ReplicaSet of the Deployment, new (highest revision) or old.
type ReplicaSetLayer struct {
	Name     string `json:"name"`
	Revision string `json:"revision"`
	New      bool   `json:"new"`
	Desired  int32  `json:"desired"`
	Current  int32  `json:"current"`
	Ready    int32  `json:"ready"`
	Failure  string `json:"failure,omitempty"` // ReplicaFailure's reason
}

// PodsLayer counts the pods by state, in the walk's order.
type PodsLayer struct {
	Total  int          `json:"total"`
	States []StateCount `json:"states"`
}

// StateCount is how many pods are in one state, and the first of them by name.
type StateCount struct {
	State string `json:"state"`
	Count int    `json:"count"`
	Pod   string `json:"pod"`
}

// Finding is one cause of the walk.
type Finding struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Event is one Event of the marked layer's objects.
type Event struct {
	Age     string `json:"age"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Object  string `json:"object"`
	Message string `json:"message"`
	Count   int32  `json:"count"`
}

// Crashed is the crashed container the causes name: its last state and its previous log's tail.
type Crashed struct {
	Pod       string   `json:"pod"`
	Container string   `json:"container"`
	Previous  bool     `json:"previous"`
	ExitCode  int32    `json:"exitCode"`
	Reason    string   `json:"reason"`
	Message   string   `json:"message,omitempty"`
	Restarts  int32    `json:"restarts"`
	Finished  string   `json:"finished"` // how long ago the run ended
	Log       []string `json:"log,omitempty"`
	// Decisive is the line of the log that says why the run died, as the operator quotes it.
	Decisive string `json:"decisive,omitempty"`
	LogError string `json:"logError,omitempty"`
	// run is what the log read is checked against: lines stamped outside it are another run's.
	run reconcile.CrashedRun
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
		case c.Type == crd.ConditionReady && c.Status != metav1.ConditionTrue:
			r.ISVC.Message = c.Message
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

	var causes []reconcile.Cause
	var crashed []reconcile.CrashedRun
	if o.Deployment != nil && reconcile.ControlledBy(o.Deployment, i) {
		causes, crashed = reconcile.Walk(i, o.Deployment, rss, pods, o.Now)
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
	return r
}

// mark finds the first layer that does not add up, and where to look next. The walk's most
// blocking cause names it; without one, the isvc's own reason (a conflict, RBAC, the spec), a
// missing Deployment, or an autoscaler that cannot read its metric.
func mark(r Report, o Objects) (layer, next string) {
	reason := ""
	switch {
	case o.ISVC.Status.Reason != "" && layerOf(o.ISVC.Status.Reason) == LayerISVC && reconcile.IsFailing(o.ISVC.Status.Reason):
		reason = o.ISVC.Status.Reason
	case o.Deployment == nil:
		if r.ISVC.Desired == 0 {
			return "", ""
		}
		return LayerDeployment, runbookMissingDeployment
	case len(r.Causes) > 0:
		reason = r.Causes[0].Reason
	case r.HPA != nil && r.HPA.Problem != "":
		return LayerHPA, runbook[reasonHPA]
	case r.ISVC.Ready < min(r.ISVC.Desired, deref(r.Deployment)):
		// The cluster serves as asked but the status says otherwise: the operator has not
		// written what it now sees.
		return LayerISVC, runbook[reasonStale]
	default:
		return "", ""
	}
	return layerOf(reason), runbook[reason]
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
	v, _ := strconv.ParseInt(rs.Annotations[reconcile.RevisionAnnotation], 10, 64)
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
		l := ReplicaSetLayer{Name: rs.Name, Revision: rs.Annotations[reconcile.RevisionAnnotation], New: revision(rs) == best,
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
	switch {
	case t.AverageValue != nil:
		return name, t.AverageValue.String()
	case t.Value != nil:
		return name, t.Value.String()
	case t.AverageUtilization != nil:
		return name, fmt.Sprintf("%d%%", *t.AverageUtilization)
	}
	return name, ""
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
	switch {
	case v.AverageValue != nil:
		return name, v.AverageValue.String()
	case v.Value != nil:
		return name, v.Value.String()
	case v.AverageUtilization != nil:
		return name, fmt.Sprintf("%d%%", *v.AverageUtilization)
	}
	return name, ""
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
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return "crash looping"
		}
		if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 && !cs.Ready {
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

// events are the Warning Events of the marked layer's objects (the isvc's for the isvc layer),
// one per object and reason with their counts summed and the latest message, in the order they
// first happened, the last maxEvents of them. Normal events (Scheduled, Pulled, Started) say
// nothing the layer's numbers do not.
func events(all []corev1.Event, layer string, o Objects, rss []*appsv1.ReplicaSet, pods []*corev1.Pod) []Event {
	kind, names := "", map[string]bool{}
	switch layer {
	case "":
		return nil
	case LayerISVC:
		kind, names[o.ISVC.Name] = crd.Kind, true
	case LayerHPA:
		kind, names[o.HPA.Name] = "HorizontalPodAutoscaler", true
	case LayerDeployment:
		kind, names[o.ISVC.Name] = "Deployment", true
		if o.LeaderWorkerSet != nil {
			kind = reconcile.KindLeaderWorkerSet
		}
	case LayerReplicaSet:
		kind = "ReplicaSet"
		if o.LeaderWorkerSet != nil {
			kind = "StatefulSet"
		}
		for _, rs := range rss {
			names[rs.Name] = true
		}
	case LayerPods:
		kind = "Pod"
		for _, p := range pods {
			names[p.Name] = true
		}
	}
	type group struct {
		first, last time.Time
		e           corev1.Event
		count       int32
	}
	groups := map[string]*group{}
	for _, e := range all {
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != kind || !names[e.InvolvedObject.Name] {
			continue
		}
		k := e.InvolvedObject.Name + "/" + e.Reason
		first := e.FirstTimestamp.Time
		if first.IsZero() {
			first = lastSeen(e)
		}
		g := groups[k]
		if g == nil {
			g = &group{first: first}
			groups[k] = g
		}
		if first.Before(g.first) {
			g.first = first
		}
		if l := lastSeen(e); !l.Before(g.last) {
			g.last, g.e = l, e
		}
		g.count += max(e.Count, 1)
		if e.Series != nil {
			g.count += e.Series.Count - 1
		}
	}
	sorted := make([]*group, 0, len(groups))
	for _, g := range groups {
		sorted = append(sorted, g)
	}
	sort.Slice(sorted, func(a, b int) bool {
		if !sorted[a].first.Equal(sorted[b].first) {
			return sorted[a].first.Before(sorted[b].first)
		}
		return sorted[a].e.Reason < sorted[b].e.Reason
	})
	if len(sorted) > maxEvents {
		sorted = sorted[len(sorted)-maxEvents:]
	}
	var evs []Event
	for _, g := range sorted {
		e := g.e
		evs = append(evs, Event{Age: age(o.Now, g.last), Type: e.Type, Reason: e.Reason,
			Object: strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name, Message: strings.TrimPrefix(firstLine(e.Message), combined), Count: g.count})
	}
	return evs
}

// combined is how the event recorder prefixes an event that stands for several similar ones:
// the count already says so.
const combined = "(combined from similar events): "

// maxEvents keeps the screen to one: the most recent say what is happening now.
const maxEvents = 6

// lastSeen is when an Event last happened, whichever API wrote it.
func lastSeen(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
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
