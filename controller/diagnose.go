package controller

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// Reasons found by the layer walk (Deployment -> ReplicaSet -> Pods), the runbook's table done
// by the controller. They are API, like the reasons in status.go.
const (
	// ReasonQuotaExceeded: a ResourceQuota refused the ReplicaSet's pods (FailedCreate).
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonLimitRangeRefused: a LimitRange refused the pods' requests or limits.
	ReasonLimitRangeRefused = "LimitRangeRefused"
	// ReasonPodCreationRefused: any other refusal of pod creation (admission webhook, PodSecurity...).
	ReasonPodCreationRefused = "PodCreationRefused"
	// ReasonInsufficientGPU: the scheduler finds no node with enough free GPUs.
	ReasonInsufficientGPU = "InsufficientGPU"
	// ReasonUnschedulable: the scheduler cannot place a pod for another reason (taints, affinity...).
	ReasonUnschedulable = "Unschedulable"
	// ReasonImagePullFailed: ErrImagePull, ImagePullBackOff or an invalid image name.
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonContainerCreateFailed: the kubelet cannot create the container (config, volumes).
	ReasonContainerCreateFailed = "ContainerCreateFailed"
	// ReasonOOMKilled: the model server was killed for exceeding its memory limit.
	ReasonOOMKilled = "OOMKilled"
	// ReasonCrashLoopBackOff: the model server keeps exiting.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonEvicted: pods were evicted from their node.
	ReasonEvicted = "Evicted"
	// ReasonReadinessProbeFailing: the server started but its readiness probe fails.
	ReasonReadinessProbeFailing = "ReadinessProbeFailing"
	// ReasonProgressDeadlineExceeded: the Deployment's rollout stopped progressing.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonStarting: pods are being created, scheduled, pulled or are loading weights
	// (their startup probe has not passed yet); not a failure.
	ReasonStarting = "Starting"
)

// Ranks of the walk's causes, between RankAPI and RankRollout: refusals before scheduling,
// scheduling before containers, crashes before probes.
const (
	RankPodCreation = 30
	RankScheduling  = 35
	RankImage       = 40
	RankContainer   = 42
	RankOOM         = 44
	RankCrash       = 45
	RankEvicted     = 46
	RankReadiness   = 48
	RankStuck       = 49
	RankStarting    = 60
)

// rolloutCauses walks the layers below a converged Deployment and returns why fewer than
// spec.replicas pods serve. The layers below are only examined while the model is short of
// ready pods or its rollout is stuck: a surplus pod the HPA added is not a reason to page.
func rolloutCauses(isvc *crd.InferenceService, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*corev1.Pod, now time.Time) []Cause {
	var causes []Cause
	want := isvc.Spec.Replicas
	desired := ptr.Deref(d.Spec.Replicas, 1)
	stuck := deploymentCondition(d, appsv1.DeploymentProgressing)
	isStuck := stuck != nil && stuck.Status == corev1.ConditionFalse && stuck.Reason == "ProgressDeadlineExceeded"
	switch {
	case isStuck:
		causes = append(causes, Cause{RankStuck, ReasonProgressDeadlineExceeded, fmt.Sprintf("Deployment %s: %s", d.Name, stuck.Message)})
	case d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < desired || d.Status.Replicas > d.Status.UpdatedReplicas:
		// No counts here: they move with every pod, and each move would be a status write.
		causes = append(causes, Cause{RankRollout, ReasonRolloutInProgress,
			fmt.Sprintf("Deployment %s: rolling out generation %d", d.Name, d.Generation)})
	}
	if d.Status.ReadyReplicas >= want && !isStuck {
		return causes
	}
	rsCauses := replicaSetCauses(d, rss)
	pCauses := podCauses(isvc, d, rss, pods, now)
	causes = append(causes, rsCauses...)
	causes = append(causes, pCauses...)
	if len(rsCauses) == 0 && len(pCauses) == 0 && (d.Status.ObservedGeneration < d.Generation || d.Status.Replicas == 0) && want > 0 {
		// A new Deployment whose pods do not exist yet is starting, like its pods will be.
		causes = append(causes, Cause{RankStarting, ReasonStarting, fmt.Sprintf("Deployment %s: creating pods", d.Name)})
	}
	if d.Status.ReadyReplicas < want {
		causes = append(causes, Cause{RankPods, ReasonReplicasNotReady,
			fmt.Sprintf("Deployment %s: %d/%d replicas ready", d.Name, d.Status.ReadyReplicas, want)})
	}
	return causes
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
			causes = append(causes, Cause{RankPodCreation, reason, fmt.Sprintf("ReplicaSet %s: %s", rs.Name, c.Message)})
		}
	}
	return causes
}

// starting is one message for every stage of a healthy start (scheduling, pulling, weights
// loading behind the startup probe): stages that move on their own are not worth a write each.
func starting(p *corev1.Pod) podFinding {
	return podFinding{RankStarting, ReasonStarting, fmt.Sprintf("Pod %s: starting since %s (scheduling, pulling the image or loading weights; the startup probe allows up to an hour)",
		p.Name, p.CreationTimestamp.UTC().Format(time.RFC3339))}
}

// podFinding is one pod's most blocking problem.
type podFinding struct {
	rank    int
	reason  string
	message string
}

// podCauses groups the pods' findings by reason: the first pod's message, and how many more.
func podCauses(isvc *crd.InferenceService, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*corev1.Pod, now time.Time) []Cause {
	owned := make(map[string]bool, len(rss))
	for _, rs := range rss {
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == d.UID {
			owned[string(rs.UID)] = true
		}
	}
	type group struct {
		first podFinding
		n     int
	}
	var order []string
	groups := map[string]*group{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(p); ref == nil || !owned[string(ref.UID)] {
			continue
		}
		f, ok := diagnosePod(isvc, p, now)
		if !ok {
			continue
		}
		g := groups[f.reason]
		if g == nil {
			g = &group{first: f}
			groups[f.reason] = g
			order = append(order, f.reason)
		}
		g.n++
	}
	causes := make([]Cause, 0, len(order))
	for _, r := range order {
		g := groups[r]
		msg := g.first.message
		if g.n > 1 {
			msg += fmt.Sprintf(" (and %d more pods)", g.n-1)
		}
		causes = append(causes, Cause{g.first.rank, r, msg})
	}
	return causes
}

// diagnosePod reads a pod the way the runbook says: PodScheduled, then each container's state
// and last state, then readiness; it returns the most blocking finding.
func diagnosePod(isvc *crd.InferenceService, p *corev1.Pod, now time.Time) (podFinding, bool) {
	prefix := "Pod " + p.Name
	if p.Status.Reason == "Evicted" {
		return podFinding{RankEvicted, ReasonEvicted, prefix + ": evicted: " + p.Status.Message}, true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			reason := ReasonUnschedulable
			if strings.Contains(c.Message, "Insufficient "+string(isvc.Spec.GPUResourceName())) {
				reason = ReasonInsufficientGPU
			}
			return podFinding{RankScheduling, reason, prefix + ": unschedulable: " + c.Message}, true
		}
	}
	if p.Spec.NodeName == "" {
		return starting(p), true
	}
	var best *podFinding
	consider := func(f podFinding) {
		if best == nil || f.rank < best.rank {
			best = &f
		}
	}
	for i := range p.Status.ContainerStatuses {
		if f, ok := diagnoseContainer(prefix, &p.Status.ContainerStatuses[i], now); ok {
			if f.reason == ReasonStarting {
				f = starting(p)
			}
			consider(f)
		}
	}
	if best == nil && len(p.Status.ContainerStatuses) == 0 {
		consider(starting(p))
	}
	if best == nil {
		return podFinding{}, false
	}
	return *best, true
}

func diagnoseContainer(prefix string, cs *corev1.ContainerStatus, now time.Time) (podFinding, bool) {
	where := fmt.Sprintf("%s container %s", prefix, cs.Name)
	last := cs.LastTerminationState.Terminated
	if t := cs.State.Terminated; t != nil {
		last = t // the container just exited; the kubelet is about to back off
	}
	lastText := func() string {
		if last == nil {
			return ""
		}
		s := fmt.Sprintf("; last terminated: exit code %d (%s)", last.ExitCode, last.Reason)
		if last.Message != "" {
			s += ": " + firstLine(last.Message)
		}
		return s + fmt.Sprintf(", %d restarts", cs.RestartCount)
	}
	if w := cs.State.Waiting; w != nil {
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
			return podFinding{RankImage, ReasonImagePullFailed, fmt.Sprintf("%s: %s: %s", where, w.Reason, w.Message)}, true
		case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			return podFinding{RankContainer, ReasonContainerCreateFailed, fmt.Sprintf("%s: %s: %s", where, w.Reason, w.Message)}, true
		case "CrashLoopBackOff":
			if last != nil && last.Reason == "OOMKilled" {
				return podFinding{RankOOM, ReasonOOMKilled, where + ": OOMKilled, raise spec.resources.limits.memory" + lastText()}, true
			}
			return podFinding{RankCrash, ReasonCrashLoopBackOff, where + ": CrashLoopBackOff" + lastText()}, true
		case "ContainerCreating", "PodInitializing":
			return podFinding{RankStarting, ReasonStarting, fmt.Sprintf("%s: %s", where, w.Reason)}, true
		}
		return podFinding{RankStarting, ReasonStarting, fmt.Sprintf("%s: waiting: %s %s", where, w.Reason, w.Message)}, true
	}
	if t := cs.State.Terminated; t != nil && (t.ExitCode != 0 || t.Reason == "OOMKilled") {
		// Between an exit and the back-off the status reads Error or OOMKilled; reporting the
		// crash loop already keeps the reason steady while the container cycles.
		if t.Reason == "OOMKilled" {
			return podFinding{RankOOM, ReasonOOMKilled, where + ": OOMKilled, raise spec.resources.limits.memory" + lastText()}, true
		}
		return podFinding{RankCrash, ReasonCrashLoopBackOff, where + ": exited" + lastText()}, true
	}
	if r := cs.State.Running; r != nil && !cs.Ready {
		since := now.Sub(r.StartedAt.Time)
		if last != nil && cs.RestartCount > 0 && (last.ExitCode != 0 || last.Reason == "OOMKilled") && since < crashLoopMemory {
			// Restarted after a crash and not ready yet: still the crash loop, not a new cause.
			if last.Reason == "OOMKilled" {
				return podFinding{RankOOM, ReasonOOMKilled, where + ": OOMKilled, raise spec.resources.limits.memory" + lastText()}, true
			}
			return podFinding{RankCrash, ReasonCrashLoopBackOff, where + ": restarted after a crash" + lastText()}, true
		}
		if !ptr.Deref(cs.Started, false) {
			// The startup probe has not passed: weights are still loading. Not a failure.
			return podFinding{RankStarting, ReasonStarting, where + ": startup probe not passed yet (loading weights)"}, true
		}
		// A timestamp, not a duration: the message must not change while nothing does.
		return podFinding{RankReadiness, ReasonReadinessProbeFailing, fmt.Sprintf("%s: running since %s but not ready: readiness probe on /health port %d failing",
			where, r.StartedAt.UTC().Format(time.RFC3339), Port)}, true
	}
	return podFinding{}, false
}

// crashLoopMemory is how long a restarted container that is not ready still counts as crash
// looping; the kubelet forgets its back-off after 10 minutes of running.
const crashLoopMemory = 10 * time.Minute

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
