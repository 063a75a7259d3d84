// One pod's diagnosis, the bottom layer of the diagnosis in diagnose.go: its scheduling, each
// container's state and last state, and its readiness, as the runbook reads them.

package reconcile

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// starting is one message for every stage of a healthy start (scheduling, pulling, weights
// loading behind the startup probe): stages that move on their own are not worth a write each.
func starting(p *corev1.Pod) podFinding {
	return podFinding{rank: RankStarting, reason: ReasonStarting, message: fmt.Sprintf("Pod %s: starting since %s (scheduling, pulling the image or loading weights; the startup probe allows up to an hour)",
		p.Name, p.CreationTimestamp.UTC().Format(time.RFC3339))}
}

// podFinding is one pod's most blocking problem; until, when set, is when it changes with time
// alone.
type podFinding struct {
	rank    int
	reason  string
	message string
	until   time.Time
	pod     string
	// crashed is the crashed run a crash finding's message is about, for its log to be read.
	crashed *CrashedRun
}

// diagnoseTerminal reads a pod that ended: an eviction, or another failure the kubelet reported.
func diagnoseTerminal(p *corev1.Pod) (podFinding, bool) {
	prefix := "Pod " + p.Name
	switch {
	case p.Status.Reason == "Evicted":
		return podFinding{reason: ReasonEvicted, message: prefix + ": evicted: " + firstLine(p.Status.Message)}, true
	case p.Status.Phase == corev1.PodFailed:
		return podFinding{reason: reasonPodFailed, message: strings.TrimSuffix(fmt.Sprintf("%s: failed: %s %s", prefix, p.Status.Reason, firstLine(p.Status.Message)), " ")}, true
	}
	return podFinding{}, false
}

// diagnosePod reads a pod the way the runbook says: PodScheduled, then each container's state
// and last state, then readiness; it returns the most blocking finding.
func diagnosePod(isvc *crd.InferenceService, p *corev1.Pod, ev evidence, now time.Time) (podFinding, bool) {
	prefix := "Pod " + p.Name
	if p.Spec.NodeName == "" && len(p.Spec.SchedulingGates) > 0 {
		// Held before the scheduler by an admission system (Kueue, or another gate owner): the
		// model is queued, not failing; the gate's owner removes it on admission.
		return podFinding{rank: RankAdmission, reason: ReasonWaitingForAdmission, message: admissionMessage(isvc, p, ev.workloads)}, true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			gpu := isvc.Spec.GPUResourceName()
			reason := unschedulableReason(c.Message, string(gpu))
			msg := prefix + ": unschedulable: " + c.Message
			if reason == ReasonInsufficientGPU {
				perPod := ev.gpusPerPod
				if perPod == 0 {
					perPod = int64(isvc.Spec.GPUs())
				}
				if frag, ok := fragmentation(ev.survey, perPod); ok {
					reason, msg = ReasonGPUFragmented, prefix+": unschedulable: "+frag+"; the scheduler: "+c.Message
				}
				msg += notAllocatable(ev.nodes, gpu)
			}
			if ev.placement != nil {
				switch reason {
				case ReasonUntoleratedTaint:
					msg += untoleratedTaints(p, ev.placement)
				case ReasonNodeSelectorMismatch:
					msg += unmatchedSelector(p, ev.placement)
				}
			}
			return podFinding{rank: RankScheduling, reason: reason, message: msg}, true
		}
	}
	if p.Spec.NodeName == "" {
		return starting(p), true
	}
	var best *podFinding
	var until time.Time // the earliest change by time alone, whichever finding wins
	consider := func(f podFinding) {
		if !f.until.IsZero() && (until.IsZero() || f.until.Before(until)) {
			until = f.until
		}
		if best == nil || f.rank < best.rank {
			best = &f
		}
	}
	for i := range p.Status.ContainerStatuses {
		if f, ok := diagnoseContainer(engineOf(isvc), p, &p.Status.ContainerStatuses[i], ev.lastWords, now); ok {
			if f.reason == ReasonStarting {
				f.rank, f.reason, f.message = RankStarting, ReasonStarting, starting(p).message
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
	if at, ok := creatingSince(p); ok && best.reason == ReasonStarting && ev.creatingAfter > 0 {
		// Still being created: past the threshold its events say why; before it, wake then.
		if due := at.Add(ev.creatingAfter); now.Before(due) {
			if until.IsZero() || due.Before(until) {
				until = due
			}
		} else if f, ok := creatingFinding(p, ev.events); ok {
			best = &f
		}
	}
	best.until = until
	if n, ok := ev.nodes[p.Spec.NodeName]; ok && onSickNode[best.reason] {
		if trouble := kinds.NodeTrouble(n, isvc.Spec.GPUResourceName()); trouble != "" {
			// Failing on a node whose GPUs are known bad: the node is the cause to act on.
			advice := ": cordon the node and delete the pod so it runs elsewhere"
			if best.reason == ReasonGPUError {
				advice = "" // the crash's own line already says it
			}
			best.rank, best.reason = RankGPU, ReasonGPUError
			best.message = fmt.Sprintf("%s on node %s: the node's GPUs are unhealthy (%s)%s; %s",
				prefix, p.Spec.NodeName, trouble, advice, best.message)
		}
	}
	return *best, true
}

func diagnoseContainer(eng engine.Engine, p *corev1.Pod, cs *corev1.ContainerStatus, words map[string]string, now time.Time) (podFinding, bool) {
	where := fmt.Sprintf("Pod %s container %s", p.Name, cs.Name)
	last := cs.LastTerminationState.Terminated
	if t := cs.State.Terminated; t != nil {
		last = t // the container just exited; the kubelet is about to back off
	}
	run := crashedRun(p, cs)
	lastText := func() string {
		if last == nil {
			return ""
		}
		s := fmt.Sprintf("; last terminated: exit code %d (%s)", last.ExitCode, last.Reason)
		if last.Message != "" {
			s += ": " + firstLine(last.Message)
		}
		s += fmt.Sprintf(", %d restarts", cs.RestartCount)
		if line := lastWords(words, run); line != "" {
			s += "; log: " + line
		}
		return s
	}
	found := func(rank int, reason, msg string) (podFinding, bool) {
		if reason == ReasonCrashLoopBackOff {
			// A crash whose log blames the GPU is the node's, not the model's.
			if fault, advice := eng.GPUFault(lastWords(words, run)); fault != "" {
				rank, reason = RankGPU, ReasonGPUError
				msg = fmt.Sprintf("%s on node %s: %s: %s", where, p.Spec.NodeName, fault, advice) + lastText()
			} else if refusal := eng.ParallelismRefusal(lastWords(words, run)); refusal != "" {
				// The model's shape refuses the GPU split: the spec's to change, not a crash to wait out.
				rank, reason = RankParallelism, ReasonParallelismRefused
				msg = where + ": " + refusal + lastText()
			}
		}
		f := podFinding{rank: rank, reason: reason, message: msg}
		if reason == ReasonCrashLoopBackOff || reason == ReasonOOMKilled || reason == ReasonGPUError || reason == ReasonParallelismRefused {
			f.crashed = run
		}
		return f, true
	}
	if w := cs.State.Waiting; w != nil {
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
			return found(RankImage, ReasonImagePullFailed, fmt.Sprintf("%s: %s: %s", where, w.Reason, w.Message))
		case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			return found(RankContainer, ReasonContainerCreateFailed, fmt.Sprintf("%s: %s: %s", where, w.Reason, w.Message))
		case "CrashLoopBackOff":
			if last != nil && last.Reason == "OOMKilled" {
				return found(RankOOM, ReasonOOMKilled, where+": OOMKilled, raise spec.resources.limits.memory"+lastText())
			}
			return found(RankCrash, ReasonCrashLoopBackOff, where+": CrashLoopBackOff"+lastText())
		case "ContainerCreating", "PodInitializing":
			return found(RankStarting, ReasonStarting, fmt.Sprintf("%s: %s", where, w.Reason))
		}
		return found(RankStarting, ReasonStarting, fmt.Sprintf("%s: waiting: %s %s", where, w.Reason, w.Message))
	}
	// A model server never exits on its own: any end of its run is a crash, exit 0 included
	// (SGLang's launcher kills its process tree on a scheduler's death, then exits 0).
	if t := cs.State.Terminated; t != nil {
		// Between an exit and the back-off the status reads Error or OOMKilled; reporting the
		// crash loop already keeps the reason steady while the container cycles.
		if t.Reason == "OOMKilled" {
			return found(RankOOM, ReasonOOMKilled, where+": OOMKilled, raise spec.resources.limits.memory"+lastText())
		}
		return found(RankCrash, ReasonCrashLoopBackOff, where+": exited"+lastText())
	}
	if r := cs.State.Running; r != nil && !cs.Ready {
		since := now.Sub(r.StartedAt.Time)
		if last != nil && cs.RestartCount > 0 && since < crashLoopMemory {
			// Restarted after a crash and not ready yet: still the crash loop, not a new cause.
			f, _ := found(RankCrash, ReasonCrashLoopBackOff, where+": restarted after a crash"+lastText())
			if last.Reason == "OOMKilled" {
				f, _ = found(RankOOM, ReasonOOMKilled, where+": OOMKilled, raise spec.resources.limits.memory"+lastText())
			}
			f.until = r.StartedAt.Add(crashLoopMemory)
			return f, true
		}
		if !ptr.Deref(cs.Started, false) {
			// The startup probe has not passed: weights are still loading. Not a failure.
			return found(RankStarting, ReasonStarting, where+": startup probe not passed yet (loading weights)")
		}
		if due := readinessDue(p, cs); now.Before(due) {
			// Started, and the readiness probe has not had its failure window yet: a kubelet
			// sets started before the first readiness probe runs.
			f, _ := found(RankStarting, ReasonStarting, where+": started, readiness probe not passed yet")
			f.until = due
			return f, true
		}
		// A timestamp, not a duration: the message must not change while nothing does.
		return found(RankReadiness, ReasonReadinessProbeFailing, fmt.Sprintf("%s: running since %s but not ready: readiness probe on /health port %d failing",
			where, r.StartedAt.UTC().Format(time.RFC3339), Port))
	}
	return podFinding{}, false
}

// readinessDue is when a started container that is still not ready has had its readiness
// probe's failure window: initialDelaySeconds from the container's start, then
// failureThreshold periods (and the last probe's timeout) after it became started. When it
// became started is the cache's stamp (StartedSinceAnnotation); without one (the
// operator first saw it started) the container's start. Without a readiness probe the kubelet
// reports ready once started: due at once.
func readinessDue(p *corev1.Pod, cs *corev1.ContainerStatus) time.Time {
	start := cs.State.Running.StartedAt.Time
	since := start
	if v, ok := p.Annotations[kinds.StartedSinceAnnotation+cs.Name]; ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil && t.After(since) {
			since = t
		}
	}
	var probe *corev1.Probe
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == cs.Name {
			probe = p.Spec.Containers[i].ReadinessProbe
		}
	}
	if probe == nil {
		return since
	}
	// The API server's defaults, for a probe that did not come from it.
	orDefault := func(v, d int32) time.Duration {
		if v <= 0 {
			v = d
		}
		return time.Duration(v) * time.Second
	}
	if first := start.Add(time.Duration(probe.InitialDelaySeconds) * time.Second); first.After(since) {
		since = first
	}
	threshold := time.Duration(max(probe.FailureThreshold, 0))
	if threshold == 0 {
		threshold = 3
	}
	return since.Add(threshold*orDefault(probe.PeriodSeconds, 10) + orDefault(probe.TimeoutSeconds, 1))
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
