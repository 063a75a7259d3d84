// Package rollout decides a canary rollout (spec.rollout.strategy Canary), pure: from the spec,
// the stored status.rollout, what the caches show of the stable and canary Deployments, the
// metrics window of the current step and the time, it decides the canary's route weight,
// whether the canary runs, whether the stable keeps its old template, and the next status.
// It cannot reach a client or read the clock; the reconcile (controller/reconcile/canary.go)
// turns the plan into children, the controller's I/O layer reads the pods' metrics.
package rollout

import (
	"fmt"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/crd"
)

// Reasons of the Rollout condition and of the Events of a rollout's transitions.
const (
	ReasonProgressing       = "Progressing"
	ReasonStepPassed        = "StepPassed"
	ReasonPromoted          = "Promoted"
	ReasonRolledBack        = "RolledBack"
	ReasonCanaryUnsupported = "CanaryUnsupported"
)

// Facts are what one decision reads.
type Facts struct {
	Spec *crd.Rollout
	// Stored is status.rollout as stored; nil before the first rollout.
	Stored *crd.RolloutStatus
	// Desired is the revision of the pod template the spec asks for; Stable the stable
	// Deployment's (its revision annotation, "" before it has one).
	Desired, Stable string
	// Drifted: the stable Deployment's template differs from the desired one.
	Drifted bool
	// StableRolledOut: the stable Deployment runs its current template on every pod.
	StableRolledOut bool
	// CanaryReady and CanaryWant are the canary Deployment's ready pods and the pods it wants.
	CanaryReady, CanaryWant int32
	// CanarySince is when the canary Deployment of this revision was made (zero: not yet);
	// ReadyWithin how long its pods may take to be ready before the rollout fails (0: forever).
	CanarySince time.Time
	ReadyWithin time.Duration
	// Window is the current step's metrics, from the snapshots taken at its start; nil while
	// none is read (the step's traffic has not started, or the pods did not answer).
	Window *Window
	// WindowWaiting is why Window is nil when its read failed (a Prometheus query's error or
	// empty answer): the step waits, and its message says why.
	WindowWaiting string
	// Unsupported says why a canary cannot run on this cluster (the pool route); "" when it can.
	Unsupported string
	Now         time.Time
}

// Plan is the decision.
type Plan struct {
	// Status is the next status.rollout (nil: none); Changed when it differs from Stored in
	// what is worth a write of its own.
	Status  *crd.RolloutStatus
	Changed bool
	// Canary: the canary Deployment and Service exist. HoldStable: the stable Deployment keeps
	// its live template.
	Canary, HoldStable bool
	// Weight is the canary's percent of the route's requests; 0 routes to the stable only.
	Weight int32
	// Condition is the Rollout condition's status ("True", "False", "Unknown"), reason and
	// message; Reason "" removes the condition.
	ConditionStatus, Reason, Message string
	// Recheck, when positive, is when the decision changes with time alone.
	Recheck time.Duration
}

// Decide is the rollout's state machine.
func Decide(f Facts) Plan {
	st := f.Stored
	if !f.Spec.IsCanary() {
		// Rolling updates: a rollout left from a canary spec is over; its status stays for the record.
		return Plan{Status: st, ConditionStatus: conditionOf(st), Reason: reasonOf(st), Message: messageOf(st)}
	}
	if !f.Drifted {
		return settled(f)
	}
	if st != nil && st.FailedRevision == f.Desired {
		// The same spec is not tried again: the stable keeps serving its version.
		return Plan{Status: st, HoldStable: true, ConditionStatus: "False", Reason: ReasonRolledBack, Message: st.Message}
	}
	if f.Unsupported != "" {
		return Plan{Status: st, HoldStable: true, ConditionStatus: "False", Reason: ReasonCanaryUnsupported, Message: f.Unsupported}
	}
	steps := f.Spec.Steps
	if st == nil || st.Phase != crd.RolloutProgressing || st.CanaryRevision != f.Desired {
		next := &crd.RolloutStatus{Phase: crd.RolloutProgressing, Step: 1, Steps: int32(len(steps)), StableRevision: f.Stable,
			CanaryRevision: f.Desired, Message: fmt.Sprintf("step 1/%d: waiting for the canary's pods", len(steps))}
		if st != nil {
			next.FailedRevision = st.FailedRevision
		}
		return Plan{Status: next, Changed: true, Canary: true, HoldStable: true, ConditionStatus: "Unknown", Reason: ReasonProgressing, Message: next.Message}
	}
	if st.Step < 1 || int(st.Step) > len(steps) {
		// The steps changed under a running rollout: judge from the last one that exists.
		c := *st
		c.Step, c.Steps = min(max(st.Step, 1), int32(len(steps))), int32(len(steps))
		st = &c
	}
	step := steps[st.Step-1]
	next := *st
	next.Steps = int32(len(steps))
	plan := Plan{Status: &next, Canary: true, HoldStable: true, ConditionStatus: "Unknown", Reason: ReasonProgressing}
	if f.CanaryReady < f.CanaryWant {
		waited := f.Now.Sub(f.CanarySince)
		if f.ReadyWithin > 0 && !f.CanarySince.IsZero() && waited >= f.ReadyWithin {
			// A version whose pods never serve (a crash loop, a bad image, no room) fails as any
			// step would: the stable has served all along, and the same spec is not tried again.
			next.Phase, next.Weight, next.StepStartedAt, next.FailedRevision = crd.RolloutRolledBack, 0, "", f.Desired
			next.Message = fmt.Sprintf("step %d/%d: the canary's pods were not ready within %s (%d of %d ready)", st.Step, len(steps), f.ReadyWithin, f.CanaryReady, f.CanaryWant)
			return Plan{Status: &next, Changed: true, HoldStable: true, ConditionStatus: "False", Reason: ReasonRolledBack, Message: next.Message}
		}
		next.Weight, next.StepStartedAt = 0, ""
		next.Message = fmt.Sprintf("step %d/%d: waiting for the canary's pods (%d of %d ready)", st.Step, len(steps), f.CanaryReady, f.CanaryWant)
		plan.Message, plan.Changed = next.Message, next.Weight != st.Weight || next.StepStartedAt != st.StepStartedAt
		if f.ReadyWithin > 0 && !f.CanarySince.IsZero() {
			plan.Recheck = f.ReadyWithin - waited
		}
		return plan
	}
	next.Weight = step.Weight
	plan.Weight = step.Weight
	if f.Window == nil {
		next.Message = fmt.Sprintf("step %d/%d: %d%% to the canary; reading the pods' metrics", st.Step, len(steps), step.Weight)
		if f.WindowWaiting != "" {
			next.Message = fmt.Sprintf("step %d/%d: %d%% to the canary; waiting for its metrics: %s", st.Step, len(steps), step.Weight, f.WindowWaiting)
		}
		plan.Message, plan.Changed = next.Message, next.Weight != st.Weight
		plan.Recheck = 5 * time.Second
		return plan
	}
	next.StepStartedAt = f.Window.Start.UTC().Format(time.RFC3339)
	v := Judge(f.Spec, st.Step, int32(len(steps)), step, *f.Window, f.Now)
	switch v.Kind {
	case Wait:
		next.Message = v.Message
		plan.Message, plan.Recheck = v.Message, v.Recheck
		plan.Changed = next.Weight != st.Weight || next.StepStartedAt != st.StepStartedAt
		return plan
	case Fail:
		next.Phase, next.Weight, next.FailedRevision, next.Message = crd.RolloutRolledBack, 0, f.Desired, v.Message
		return Plan{Status: &next, Changed: true, HoldStable: true, ConditionStatus: "False", Reason: ReasonRolledBack, Message: v.Message}
	}
	if int(st.Step) < len(steps) {
		n := steps[st.Step]
		next.Step, next.Weight, next.StepStartedAt = st.Step+1, n.Weight, ""
		next.Message = fmt.Sprintf("%s; step %d/%d: %d%% to the canary", v.Message, next.Step, len(steps), n.Weight)
		plan.Weight = n.Weight
		plan.Changed, plan.Reason, plan.Message = true, ReasonStepPassed, next.Message
		return plan
	}
	// Every step passed: the stable takes the new template; settled() finishes once it is rolled out.
	next.Message = v.Message + "; " + promotingMark + "the stable Deployment takes the canary's version"
	return Plan{Status: &next, Changed: true, Canary: true, Weight: step.Weight, ConditionStatus: "Unknown", Reason: ReasonStepPassed, Message: next.Message}
}

// settled decides a spec whose template the stable already runs (or is rolling to): a
// promotion finishing, a rollout whose spec went back to the stable's version, or nothing.
func settled(f Facts) Plan {
	st := f.Stored
	if st == nil || st.Phase != crd.RolloutProgressing {
		return Plan{Status: st, ConditionStatus: conditionOf(st), Reason: reasonOf(st), Message: messageOf(st)}
	}
	next := *st
	if st.CanaryRevision != f.Desired {
		next.Phase, next.Weight = crd.RolloutRolledBack, 0
		next.Message = fmt.Sprintf("step %d/%d: the spec went back to the stable's version; canary removed", st.Step, st.Steps)
		return Plan{Status: &next, Changed: true, ConditionStatus: "False", Reason: ReasonRolledBack, Message: next.Message}
	}
	if !f.StableRolledOut {
		// Promoting: the canary keeps its share until the stable runs its version everywhere.
		next.Message = fmt.Sprintf("%severy step passed; the stable Deployment is rolling to revision %s", promotingMark, f.Desired)
		return Plan{Status: &next, Changed: next.Message != st.Message, Canary: true, Weight: st.Weight,
			ConditionStatus: "Unknown", Reason: ReasonStepPassed, Message: next.Message, Recheck: 5 * time.Second}
	}
	next.Phase, next.Weight, next.StableRevision, next.StepStartedAt = crd.RolloutPromoted, 0, f.Desired, ""
	next.Message = fmt.Sprintf("promoted: every step of %d passed; revision %s serves all requests", st.Steps, f.Desired)
	return Plan{Status: &next, Changed: true, ConditionStatus: "True", Reason: ReasonPromoted, Message: next.Message}
}

func conditionOf(st *crd.RolloutStatus) string {
	switch {
	case st == nil:
		return ""
	case st.Phase == crd.RolloutPromoted:
		return "True"
	case st.Phase == crd.RolloutRolledBack:
		return "False"
	}
	return "Unknown"
}

func reasonOf(st *crd.RolloutStatus) string {
	if st == nil {
		return ""
	}
	switch st.Phase {
	case crd.RolloutPromoted:
		return ReasonPromoted
	case crd.RolloutRolledBack:
		return ReasonRolledBack
	}
	return ReasonProgressing
}

func messageOf(st *crd.RolloutStatus) string {
	if st == nil {
		return ""
	}
	return st.Message
}

// promotingMark begins the part of a message that says every step passed and the stable is
// taking the canary's version.
const promotingMark = "promoting: "

func promoting(st *crd.RolloutStatus) bool { return strings.Contains(st.Message, promotingMark) }

// Transition is the Event a change of status.rollout from old to next deserves: its reason,
// whether it is a Warning, and its message; ok false when none.
func Transition(old, next *crd.RolloutStatus) (reason string, warning bool, msg string, ok bool) {
	if next == nil {
		return "", false, "", false
	}
	same := old != nil && old.Phase == next.Phase && old.CanaryRevision == next.CanaryRevision
	switch {
	case next.Phase == crd.RolloutRolledBack && !same:
		return ReasonRolledBack, true, next.Message, true
	case next.Phase == crd.RolloutPromoted && !same:
		return ReasonPromoted, false, next.Message, true
	case next.Phase == crd.RolloutProgressing && !same:
		return ReasonProgressing, false, fmt.Sprintf("canary rollout of revision %s started (stable %s): %d steps", next.CanaryRevision, next.StableRevision, next.Steps), true
	case next.Phase == crd.RolloutProgressing && (old.Step != next.Step || promoting(next) && !promoting(old)):
		return ReasonStepPassed, false, next.Message, true // the last step's pass starts the promotion
	}
	return "", false, "", false
}
