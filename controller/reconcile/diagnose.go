package reconcile

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// reasonPodFailed groups terminal pods that failed for another reason than an eviction; it is
// only ever mentioned (RankStale), never a status reason.
const reasonPodFailed = "PodFailed"

// rolloutCauses diagnoses the layers below a converged Deployment and returns why fewer than
// spec.replicas pods (or the fewer the HPA chose) serve, or, while they do, what blocks a rollout.
// The layers below are only examined while the model is short of ready pods or rolls out: a surplus
// pod the HPA added is not a reason to page.
func rolloutCauses(isvc *crd.InferenceService, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*corev1.Pod, ev evidence, now time.Time) []Cause {
	return diagnoseWith(isvc, d, rss, pods, ev, now).causes
}

// evidence is what the diagnosis reads beside the model's own objects: the nodes with GPU trouble,
// and the Events of pods still being created, with how long after scheduling they are read.
type evidence struct {
	nodes         map[string]*corev1.Node
	events        map[types.UID][]PodEvent
	creatingAfter time.Duration
	survey        []NodeGPUs
	lastWords     map[string]string
	gpusPerPod    int64 // what one pod asks: a multi-node replica's share of one node
	workloads     map[types.UID]kinds.Workload
	placement     []NodePlacement // the nodes' taints and labels, for a pod kept off by them
}

func evidenceOf(in Input) evidence {
	o := &in.Observed
	return evidence{o.Nodes, o.PodEvents, in.Features.CreatingEvidenceAfter, o.GPUSurvey, o.LastWords, int64(GPUsPerPod(in.ISVC, &in.Ext)), o.Workloads, o.PlacementSurvey}
}

// diagnosis is diagnose's outcome: the causes, when they next change with time alone (a readiness
// probe's failure window ending; zero if never), and the crashed runs their messages name.
type diagnosis struct {
	causes  []Cause
	next    time.Time
	crashed []CrashedRun
}

// diagnose is rolloutCauses, with when its outcome changes and the crashed runs it names, without
// the nodes' view.
func diagnose(isvc *crd.InferenceService, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*corev1.Pod, now time.Time) diagnosis {
	return diagnoseWith(isvc, d, rss, pods, evidence{}, now)
}

// diagnoseWith is diagnose, given what the I/O layer observed beside the model (evidenceOf).
func diagnoseWith(isvc *crd.InferenceService, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*corev1.Pod, ev evidence, now time.Time) diagnosis {
	var causes []Cause
	desired := ptr.Deref(d.Spec.Replicas, 1)
	// The model serves as asked once spec.replicas pods are ready, or as many as the HPA chose
	// when it scaled below them (its minimum is max(1, replicas/2)): an idle model at its
	// minimum is Ready, not short of pods. The operator keeps the count within the HPA's bounds.
	want := min(isvc.Spec.Replicas, desired)
	stuck := deploymentCondition(d, appsv1.DeploymentProgressing)
	isStuck := stuck != nil && stuck.Status == corev1.ConditionFalse && stuck.Reason == "ProgressDeadlineExceeded"
	rolling := d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < desired || d.Status.Replicas > d.Status.UpdatedReplicas
	switch {
	case isStuck:
		causes = append(causes, Cause{RankStuck, ReasonProgressDeadlineExceeded, fmt.Sprintf("%s %s: %s", kindOf(d), d.Name, stuck.Message)})
	case rolling:
		// No counts here: they move with every pod, and each move would be a status write.
		causes = append(causes, Cause{RankRollout, ReasonRolloutInProgress,
			fmt.Sprintf("%s %s: rolling out generation %d", kindOf(d), d.Name, d.Generation)})
	}
	if d.Status.ReadyReplicas >= want && want > 0 {
		if len(causes) == 0 {
			// Serving as asked: only pods evicted again and again are worth a look, the rest
			// of the diagnosis is for a model short of pods or a rollout.
			if c, until, ok := frequentEviction(d, rss, pods, now); ok {
				c.Rank += RankServing
				return diagnosis{causes: []Cause{c}, next: until}
			}
			return diagnosis{}
		}
		// The model serves from the pods it has; a rollout whose new pods cannot run must be
		// told at once, not after the progress hold or the Deployment's deadline: what blocks
		// it is reported, what only takes time is the rollout itself.
		pods := diagnosePods(isvc, d, rss, pods, ev, now)
		for _, c := range append(replicaSetCauses(d, rss), pods.decide...) {
			if IsFailing(c.Reason) {
				causes = append(causes, c)
			}
		}
		for i := range causes {
			causes[i].Rank += RankServing
		}
		return diagnosis{causes, pods.next, pods.crashed}
	}
	rsCauses := replicaSetCauses(d, rss)
	pc := diagnosePods(isvc, d, rss, pods, ev, now)
	causes = append(causes, rsCauses...)
	causes = append(causes, pc.decide...)
	if len(rsCauses) == 0 && len(pc.decide) == 0 && (d.Status.ObservedGeneration < d.Generation || d.Status.Replicas == 0) && want > 0 {
		// A new Deployment whose pods do not exist yet is starting, like its pods will be.
		causes = append(causes, Cause{RankStarting, ReasonStarting, fmt.Sprintf("%s %s: creating pods", kindOf(d), d.Name)})
	}
	if d.Status.ReadyReplicas < want {
		causes = append(causes, Cause{RankPods, ReasonReplicasNotReady,
			fmt.Sprintf("%s %s: %d/%d replicas ready", kindOf(d), d.Name, d.Status.ReadyReplicas, want)})
	}
	causes = append(causes, pc.stale...)
	return diagnosis{causes, pc.next, pc.crashed}
}

// diagnosisRecheck is how long until the status computed from in changes with time alone (a
// started pod's readiness window ends with no event to say so); 0 if it never does. Rounded up
// to a second: in.Now is the API's one-second precision.
func diagnosisRecheck(in Input) time.Duration {
	d, rss, ok := runningView(&in)
	if !ok {
		return 0
	}
	next := diagnoseWith(in.ISVC, d, rss, in.Observed.Pods, evidenceOf(in), in.Now.Time).next
	if next.IsZero() || !next.After(in.Now.Time) {
		return 0
	}
	return (next.Sub(in.Now.Time) + time.Second - 1).Truncate(time.Second)
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// replicaSetCauses reads the ReplicaFailure condition the ReplicaSet controller sets when pod
// creation is refused: where quota and LimitRange errors surface, not on the Deployment.
func replicaSetCauses(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) []Cause {
	var causes []Cause
	for _, rs := range rss {
		if ref := metav1.GetControllerOfNoCopy(rs); ref == nil || ref.UID != d.UID {
			continue
		}
		for _, c := range rs.Status.Conditions {
			if c.Type != appsv1.ReplicaSetReplicaFailure || c.Status != corev1.ConditionTrue {
				continue
			}
			reason := ReasonPodCreationRefused
			switch {
			case strings.Contains(c.Message, "exceeded quota") || strings.Contains(c.Message, "failed quota"):
				reason = ReasonQuotaExceeded
			case strings.Contains(c.Message, "usage per Container") || strings.Contains(c.Message, "usage per Pod") || strings.Contains(c.Message, "LimitRange"):
				reason = ReasonLimitRangeRefused
			}
			kind := "ReplicaSet"
			if rs.Kind != "" { // a multi-node group's StatefulSet (groupView)
				kind = rs.Kind
			}
			msg := fmt.Sprintf("%s %s: %s", kind, rs.Name, c.Message)
			if strings.Contains(c.Message, "error looking up service account") {
				// The ServiceAccount admission plugin's refusal: spec.serviceAccountName's account is missing.
				msg += " [create the ServiceAccount in the namespace, or change the InferenceService's spec.serviceAccountName]"
			}
			causes = append(causes, Cause{RankPodCreation, reason, msg})
		}
	}
	return causes
}

// podCauses are the pods' findings grouped by reason (the message of the pod first by name,
// whatever order the cache lists them in, and how many more): decide from the pods that count
// for the current rollout, stale from those that no longer count; next is the earliest time a
// finding changes by itself; crashed are the crashed runs the deciding messages name.
type podCauses struct {
	decide, stale []Cause
	next          time.Time
	crashed       []CrashedRun
}

// currentReplicaSets are the Deployment's ReplicaSets with the highest revision: the pods that
// count for the current rollout are theirs (several only when revisions are unknown).
func currentReplicaSets(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (owned, current map[string]bool) {
	owned, current = make(map[string]bool, len(rss)), map[string]bool{}
	best := int64(-1)
	for _, rs := range rss {
		if ref := metav1.GetControllerOfNoCopy(rs); ref == nil || ref.UID != d.UID {
			continue
		}
		owned[string(rs.UID)] = true
		rev, _ := strconv.ParseInt(rs.Annotations[kinds.RevisionAnnotation], 10, 64)
		switch {
		case rev > best:
			best = rev
			current = map[string]bool{string(rs.UID): true}
		case rev == best:
			current[string(rs.UID)] = true
		}
	}
	return owned, current
}

// diagnosePods diagnoses the Deployment's pods. Only live pods of the current ReplicaSet decide:
// a pod evicted an hour ago was replaced, and the previous revision's pods are on their way
// out; they are mentioned.
func diagnosePods(isvc *crd.InferenceService, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*corev1.Pod, ev evidence, now time.Time) podCauses {
	owned, current := currentReplicaSets(d, rss)
	type group struct {
		first podFinding
		n     int
	}
	var out podCauses
	var order []string
	groups := map[string]*group{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil || !owned[string(ref.UID)] {
			continue
		}
		terminal := p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		var f podFinding
		var ok bool
		if terminal {
			f, ok = diagnoseTerminal(p)
		} else {
			f, ok = diagnosePod(isvc, p, ev, now)
		}
		if !ok {
			continue
		}
		key := f.reason
		switch {
		case terminal:
			f.rank, key = RankStale, "stale/"+f.reason
			f.message += " (terminated, replaced: not counted)"
		case !current[string(ref.UID)]:
			f.rank, key = RankStale, "stale/"+f.reason
			f.message += " (previous revision: not counted)"
		case !f.until.IsZero() && (out.next.IsZero() || f.until.Before(out.next)):
			out.next = f.until
		}
		f.pod = p.Name
		g := groups[key]
		switch {
		case g == nil:
			g = &group{first: f}
			groups[key] = g
			order = append(order, key)
		case f.pod < g.first.pod:
			g.first = f
		}
		g.n++
	}
	if c, until, ok := frequentEviction(d, rss, pods, now); ok {
		out.decide = append(out.decide, c)
		if out.next.IsZero() || until.Before(out.next) {
			out.next = until
		}
	}
	for _, k := range order {
		g := groups[k]
		msg := g.first.message
		if g.n > 1 {
			msg += fmt.Sprintf(" (and %d more pods)", g.n-1)
		}
		c := Cause{g.first.rank, g.first.reason, msg}
		if c.Rank == RankStale {
			out.stale = append(out.stale, c)
			continue
		}
		out.decide = append(out.decide, c)
		if g.first.crashed != nil {
			out.crashed = append(out.crashed, *g.first.crashed)
		}
	}
	return out
}
