// The last words of a crashed container, the pure half of `kubectl logs --previous`: which
// crashed runs the diagnosis would quote (LastWordsWanted, for the I/O layer to read), the line
// of a log tail that says why a run died (the engine's DecisiveLine, through LastWordsOf); the line reaches the message through
// Observed.LastWords, keyed by the run.

package reconcile

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// CrashedRun is one crashed run of one container, whose log the diagnosis would quote.
type CrashedRun struct {
	Namespace, Pod string
	PodUID         types.UID
	Container      string
	// RunID is the terminated run's container ID, unique per run: the key a log read is
	// remembered by, so each restart is read once.
	RunID string
	// Previous is true when the run is the container's previous one (kubectl logs --previous):
	// the kubelet is backing off or has restarted it. False while the run that just exited is
	// still the container's current one.
	Previous bool
	// StartedAt and FinishedAt are when the run began and ended, to the API's second: lines
	// stamped before it began, or a second or more after it ended, are another run's.
	StartedAt, FinishedAt time.Time
	// Engine is the model server's engine, whose log it is ("": engine.VLLM).
	Engine string
}

// LastWordsWanted names the crashed runs whose log the status would quote: per crash reason
// (CrashLoopBackOff, OOMKilled), the run of the pod its message names, among the pods that
// decide. Nothing for a model with no crashed container, which is checked first and costs one
// pass over the pods' container statuses.
func LastWordsWanted(in Input) []CrashedRun {
	if !anyCrashed(in.Observed.Pods) {
		return nil
	}
	d, rss, ok := runningView(&in)
	if !ok {
		return nil
	}
	runs := diagnoseWith(in.ISVC, d, rss, in.Observed.Pods, evidenceOf(in), in.Now.Time).crashed
	for i := range runs {
		runs[i].Engine = engineOf(in.ISVC).Name()
	}
	return runs
}

func anyCrashed(pods []*corev1.Pod) bool {
	for _, p := range pods {
		for i := range p.Status.ContainerStatuses {
			if crashedRun(p, &p.Status.ContainerStatuses[i]) != nil {
				return true
			}
		}
	}
	return false
}

// crashedRun is the run of cs a crash finding is about: the current one when it just exited,
// else the last terminated one; nil when there is none or the kubelet gave it no container ID
// (it never ran, and has no log). Only crash findings (diagnoseContainer) read it.
func crashedRun(p *corev1.Pod, cs *corev1.ContainerStatus) *CrashedRun {
	t, previous := cs.State.Terminated, false
	if t == nil {
		t, previous = cs.LastTerminationState.Terminated, true
	}
	if t == nil || t.ContainerID == "" {
		return nil
	}
	return &CrashedRun{Namespace: p.Namespace, Pod: p.Name, PodUID: p.UID, Container: cs.Name,
		RunID: t.ContainerID, Previous: previous, StartedAt: t.StartedAt.Time, FinishedAt: t.FinishedAt.Time}
}

// lastWords is the decisive line the I/O layer read for run (Observed.LastWords); "" when
// none was read for that very run, so a line read for an earlier run is never quoted for a
// later one.
func lastWords(words map[string]string, run *CrashedRun) string {
	if run == nil {
		return ""
	}
	return words[run.RunID]
}

// LastWordsOf is the decisive line of a log tail read with timestamps for run, among its
// RunLines, as run's engine reads it. ok is false when no line was the run's.
func LastWordsOf(tail string, run CrashedRun) (string, bool) {
	line := engine.For(run.Engine).DecisiveLine(RunLines(tail, run))
	return line, line != ""
}

// RunLines are the lines of a log tail read with timestamps, without their stamps, but for
// those stamped outside run: read in the moment the kubelet restarted the container, the
// current run is already the next one, and the previous one the run before. Unstamped lines
// are kept.
func RunLines(tail string, run CrashedRun) []string {
	end := run.FinishedAt.Add(time.Second) // the API's times are truncated to the second
	var kept []string
	for _, l := range strings.Split(tail, "\n") {
		stamp, rest, found := strings.Cut(l, " ")
		if ts, err := time.Parse(time.RFC3339Nano, stamp); found && err == nil {
			if !run.FinishedAt.IsZero() && !ts.Before(end) || ts.Before(run.StartedAt) {
				continue
			}
			l = rest
		}
		kept = append(kept, l)
	}
	return kept
}
