// The last words of a crashed container, the pure half of `kubectl logs --previous`: which
// crashed runs the diagnosis would quote (LastWordsWanted, for the I/O layer to read), the line
// of a log tail that says why a run died (DecisiveLine); the line reaches the message through
// Observed.LastWords, keyed by the run.

package reconcile

import (
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MaxLastWords bounds the quoted line, in bytes: enough for an exception and its message's
// start, short enough for a status message and an Event note.
const MaxLastWords = 200

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
	return walkWith(in.ISVC, d, rss, in.Observed.Pods, evidenceOf(in), in.Now.Time).crashed
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
// RunLines. ok is false when no line was the run's.
func LastWordsOf(tail string, run CrashedRun) (string, bool) {
	line := decisive(RunLines(tail, run))
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

// DecisiveLine is the line of a crashed model server's log tail that says why it died: the
// exception that ended the last Python traceback (the root cause when that exception only
// points "above" to it, as vLLM's engine start-up and engine death do), else argparse's error
// (an unknown argument), else the last line (a process killed by the kernel stops mid-line of
// whatever it was doing). At most MaxLastWords bytes.
func DecisiveLine(log string) string {
	return decisive(strings.Split(log, "\n"))
}

// processPrefix is how vLLM tags the lines of its processes: "(APIServer pid=1) ",
// "(EngineCore_DP0 pid=250) ", in v0.11 always between colour codes ("\x1b[1;36m(...)\x1b[0;0m ",
// vllm/utils _add_prefix), which a log read through pods/log keeps.
var processPrefix = regexp.MustCompile(`^(?:\x1b\[[0-9;]*m)?\([A-Za-z0-9_]+ pid=\d+\)(?:\x1b\[[0-9;]*m)? `)

// argparseError is argparse's last line: "vllm serve: error: unrecognized arguments: --foo".
var argparseError = regexp.MustCompile(`^[\w./ -]+: error: `)

func decisive(raw []string) string {
	lines := make([]string, 0, len(raw))
	for _, l := range raw {
		l = strings.TrimRight(processPrefix.ReplaceAllString(l, ""), " \t\r")
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	// An exception line is the first unindented line after a traceback's frames (indented,
	// with at least one `File "..."` line; a tail may begin inside them).
	var exceptions []string
	inFrames := false
	for i, l := range lines {
		indented := l[0] == ' ' || l[0] == '\t'
		switch {
		case indented:
			inFrames = inFrames || strings.HasPrefix(strings.TrimSpace(l), "File \"") || strings.HasPrefix(strings.TrimSpace(l), "raise ")
		case inFrames:
			exceptions = append(exceptions, pydanticCause(l, lines[i+1:]))
			inFrames = false
		}
	}
	for i := len(exceptions) - 1; i >= 0; i-- {
		if i == 0 || !strings.Contains(exceptions[i], "root cause") {
			return bounded(exceptions[i])
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if argparseError.MatchString(lines[i]) {
			return bounded(lines[i])
		}
	}
	return bounded(strings.TrimSpace(lines[len(lines)-1]))
}

// pydanticCause is the error a pydantic ValidationError wraps, which vLLM's config classes
// raise for their own checks: "pydantic_core._pydantic_core.ValidationError: 1 validation error
// for VllmConfig" says nothing, the next line "  Value error, Total number of attention heads
// (32) must be divisible by tensor parallel size (3). [type=value_error, ...]" says why. Other
// exception lines are themselves.
func pydanticCause(exc string, rest []string) string {
	if !strings.Contains(exc, "ValidationError: ") || len(rest) == 0 {
		return exc
	}
	msg, ok := strings.CutPrefix(strings.TrimSpace(rest[0]), "Value error, ")
	if !ok {
		return exc
	}
	if i := strings.LastIndex(msg, " [type="); i > 0 {
		msg = msg[:i]
	}
	return "ValueError: " + msg
}

// bounded cuts s to MaxLastWords bytes on a character boundary.
func bounded(s string) string {
	if len(s) <= MaxLastWords {
		return s
	}
	cut := MaxLastWords - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
