// Where a start's minutes went, the pure half (issue 36): which container runs to read the
// start log of (StartsWanted, for the I/O layer, once per run when it first serves), the start
// those reads tell with the pod's own times and the kubelet's Pulled Event (StartOf: scheduled,
// image pulled, container started, then the model server's phases from its engine's
// StartPhases), and the status's last start and its SlowStart (slowstart.go).

package reconcile

import (
	"fmt"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// The phases a start has before its model server prints anything, read from the pod.
const (
	// PhaseScheduled is the pod's creation to its PodScheduled condition: queueing, admission,
	// the scheduler.
	PhaseScheduled = "scheduled"
	// PhaseImagePulled is the model server image's pull, as the kubelet's Pulled Event of the
	// container says it (0 when the image was present); absent when no such Event was read
	// (Events expire after an hour), and the pull stays in PhaseContainerStarted.
	PhaseImagePulled = "image pulled"
	// PhaseContainerStarted is the rest of the pod's scheduling to its model server container's
	// start: volumes, the sandbox, the container's creation, and the pull when not told apart.
	PhaseContainerStarted = "container started"
)

// SlowStartAfter is the longest start that is not reported as slow: the Deployment's default
// progressDeadlineSeconds (10m), past which a rollout waiting for it is reported stuck, and a
// start an autoscaler's decision no longer waits for. A shorter startup budget lowers it to
// half the budget: a start that slow is one slow link away from being killed by its probe.
const SlowStartAfter = 10 * time.Minute

// StartRun is one run of a model server container that serves: the log to read, once.
type StartRun struct {
	Namespace, Pod string
	PodUID         types.UID
	Container      string
	// RunID names the run: the pod, the container and its restart count. The cache keeps no
	// container ID for a running container; the count moves with every run.
	RunID string
	// Created, Scheduled and StartedAt are the pod's creation, its PodScheduled condition's
	// time and the run's start (to the API's second); Scheduled is zero when not known.
	Created, Scheduled, StartedAt time.Time
	// Restarted is true when the run is not the pod's first: the pod's creation and scheduling
	// are another run's, and the start counts from the run's own start.
	Restarted bool
	// Engine is the model server's engine, whose start log it is ("": engine.VLLM).
	Engine string
}

// StartsWanted are the model's serving container runs whose start log tells where their start's
// time went: each ready model server container that runs. The I/O layer reads each once.
func StartsWanted(in Input) []StartRun {
	var out []StartRun
	for _, p := range in.Observed.Pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			if cs.Name != kinds.ContainerName || !cs.Ready || cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() {
				continue
			}
			run := StartRun{Namespace: p.Namespace, Pod: p.Name, PodUID: p.UID, Container: cs.Name, Engine: engineOf(in.ISVC).Name(),
				RunID:   fmt.Sprintf("%s/%s/%d", p.UID, cs.Name, cs.RestartCount),
				Created: p.CreationTimestamp.Time, StartedAt: cs.State.Running.StartedAt.Time, Restarted: cs.RestartCount > 0}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
					run.Scheduled = c.LastTransitionTime.Time
				}
			}
			out = append(out, run)
		}
	}
	return out
}

// StartOf is run's start: the pod's phases (the image's pull from its pod's events, when they
// have the container's Pulled), then its model server's (phases, from the engine's StartPhases
// on the run's log), timed so that they add up to creation -> serving. nil when the log does not say the
// server serves (a log cut short, a server that prints nothing vLLM prints).
func StartOf(run StartRun, events []PodEvent, phases []engine.Phase) *crd.StartRecord {
	var serving *engine.Phase
	for i := range phases {
		if phases[i].Name == engine.PhaseServing && !phases[i].Going {
			serving = &phases[i]
		}
	}
	if serving == nil {
		return nil
	}
	began := run.Created
	if run.Restarted || began.IsZero() {
		began = run.StartedAt
	}
	servingAt := run.StartedAt.Add(time.Duration(serving.Seconds * float64(time.Second)))
	rec := &crd.StartRecord{Pod: run.Pod, Started: began.UTC().Format(time.RFC3339),
		ServingAt: servingAt.UTC().Format(stampFormat), TotalSeconds: round3(servingAt.Sub(began).Seconds())}
	add := func(name string, secs float64) {
		rec.Phases = append(rec.Phases, crd.StartPhase{Name: name, Seconds: round3(math.Max(0, secs))})
	}
	if !run.Restarted {
		sched := run.Scheduled
		if sched.IsZero() || sched.Before(began) || sched.After(run.StartedAt) {
			sched = began // not seen: its time goes to the container's start, which includes it
		} else {
			add(PhaseScheduled, sched.Sub(began).Seconds())
		}
		gap := run.StartedAt.Sub(sched)
		if pull, ok := ImagePullOf(events, run.Container); ok {
			// the API's whole seconds can make the gap shorter than the kubelet's measured pull:
			// the pull is then all of it, so that the phases still add up
			pull = min(pull, gap)
			add(PhaseImagePulled, pull.Seconds())
			gap -= pull
		}
		add(PhaseContainerStarted, gap.Seconds())
	}
	for _, p := range phases {
		if p.Name != engine.PhaseServing {
			add(p.Name, p.Seconds)
		}
	}
	slowest := 0.0
	for _, p := range rec.Phases {
		if p.Seconds > slowest {
			slowest, rec.Slowest = p.Seconds, p.Name
		}
	}
	return rec
}

// ImagePullOf is how long the kubelet took to pull container's image, from the first Pulled
// Event about that container: the time including the wait for other pulls, 0 when the image
// was present; ok is false when the events have no Pulled of the container in words it prints.
func ImagePullOf(events []PodEvent, container string) (time.Duration, bool) {
	path := "spec.containers{" + container + "}"
	var first *PodEvent
	for i := range events {
		if e := &events[i]; e.Reason == "Pulled" && e.FieldPath == path && (first == nil || e.First.Before(first.First)) {
			first = e
		}
	}
	if first == nil {
		return 0, false
	}
	return pullTookOf(first.Message)
}

// pullTookOf reads a Pulled Event's message as the kubelet (v1.30 to v1.37) prints it:
// `Successfully pulled image "i" in 1.1s (1.2s including waiting). Image size: N bytes.` or
// `Container image "i" already present on machine` (and more words).
func pullTookOf(msg string) (time.Duration, bool) {
	if strings.HasPrefix(msg, "Container image ") && strings.Contains(msg, " already present on machine") {
		return 0, true
	}
	head, _, ok := strings.Cut(msg, " including waiting)")
	if !strings.HasPrefix(msg, "Successfully pulled image ") || !ok {
		return 0, false
	}
	d, err := time.ParseDuration(head[strings.LastIndexByte(head, '(')+1:])
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// stampFormat is RFC 3339 to the millisecond, fixed width.
const stampFormat = "2006-01-02T15:04:05.000Z07:00"

// round3 is seconds to the millisecond, as the status shows them.
func round3(s float64) float64 { return math.Round(s*1000) / 1000 }

// lastStartOf is the status's last start: the latest of the runs read (Observed.Starts), or
// the one stored when none is later (the pod that started may be gone).
func lastStartOf(in Input) *crd.StartRecord {
	last := in.Observed.StoredLastStart
	at := func(r *crd.StartRecord) time.Time {
		t, _ := time.Parse(time.RFC3339Nano, r.ServingAt)
		return t
	}
	for _, r := range in.Observed.Starts {
		if r != nil && (last == nil || at(r).After(at(last))) {
			last = r
		}
	}
	return last
}

// slowStartAfter is the model's SlowStartAfter: half its startup budget when that is shorter.
func slowStartAfter(ext *crd.SpecExtensions) time.Duration {
	return min(SlowStartAfter, time.Duration(startupBudget(ext))*time.Second/2)
}

// SlowStart is what to say of a start that took longer than the model's SlowStartAfter:
// "SlowStart: weights download 14m of 17m"; ok is false for a start that was not slow.
func SlowStart(rec *crd.StartRecord, ext *crd.SpecExtensions) (string, bool) {
	if rec == nil || time.Duration(rec.TotalSeconds*float64(time.Second)) <= slowStartAfter(ext) {
		return "", false
	}
	var phases []engine.Phase
	for _, p := range rec.Phases {
		phases = append(phases, engine.Phase{Name: p.Name, Seconds: p.Seconds})
	}
	phases = append(phases, engine.Phase{Name: engine.PhaseServing, Seconds: rec.TotalSeconds})
	_, msg, ok := SlowestPhase(phases)
	return msg, ok
}

// withSlowStart adds a slow last start's SlowStart to a serving model's Ready message: what
// to shorten before the next scale-up waits as long.
func withSlowStart(st *crd.InferenceServiceStatus, rec *crd.StartRecord, ext *crd.SpecExtensions) {
	msg, ok := SlowStart(rec, ext)
	if !ok {
		return
	}
	if c := meta.FindStatusCondition(st.Conditions, crd.ConditionReady); c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonAvailable {
		c.Message += "; " + msg
	}
}

// SlowStartWarning is the SlowStart to warn of once: a slow start the stored status did not
// hold yet.
func SlowStartWarning(stored, next *crd.StatusExtensions, ext *crd.SpecExtensions) (string, bool) {
	if next.LastStart == nil || stored.LastStart != nil && stored.LastStart.ServingAt == next.LastStart.ServingAt &&
		stored.LastStart.Pod == next.LastStart.Pod {
		return "", false
	}
	return SlowStart(next.LastStart, ext)
}
