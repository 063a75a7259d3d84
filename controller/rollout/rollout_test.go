package rollout

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/crd"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func canary() *crd.Rollout {
	return &crd.Rollout{Strategy: crd.RolloutCanary, Steps: []crd.RolloutStep{{Weight: 10, DurationSeconds: 60}, {Weight: 50, DurationSeconds: 60}}}
}

// ttft is a histogram with n observations at about s seconds.
func ttft(n, s float64) map[float64]float64 {
	out := map[float64]float64{}
	for _, le := range []float64{0.1, 0.25, 0.5, 1, 2.5, math.Inf(1)} {
		if le >= s {
			out[le] = n
		} else {
			out[le] = 0
		}
	}
	return out
}

func running(step, weight int32, started string) *crd.RolloutStatus {
	return &crd.RolloutStatus{Phase: crd.RolloutProgressing, Step: step, Steps: 2, Weight: weight, StableRevision: "old", CanaryRevision: "new", StepStartedAt: started}
}

func TestDecide(t *testing.T) {
	good := &Window{Start: t0, Stable: Sample{Requests: 100, TTFT: ttft(100, 0.2)}, Canary: Sample{Requests: 30, TTFT: ttft(30, 0.2)}}
	errs := &Window{Start: t0, Stable: Sample{Requests: 100, TTFT: ttft(100, 0.2)}, Canary: Sample{Requests: 30, Errors: 6, TTFT: ttft(24, 0.2)}}
	slow := &Window{Start: t0, Stable: Sample{Requests: 100, TTFT: ttft(100, 0.2)}, Canary: Sample{Requests: 30, TTFT: ttft(30, 0.9)}}
	few := &Window{Start: t0, Stable: Sample{Requests: 100}, Canary: Sample{Requests: 5}}
	for _, tc := range []struct {
		name  string
		f     Facts
		phase string
		step  int32
		// weight is the route's canary weight; canary and hold the children.
		weight        int32
		canary, hold  bool
		reason, inMsg string
	}{
		{name: "rolling update: nothing", f: Facts{Spec: &crd.Rollout{}, Drifted: true}},
		{name: "no change: nothing", f: Facts{Spec: canary(), Desired: "same", Stable: "same"}},
		{name: "a change starts a canary", f: Facts{Spec: canary(), Desired: "new", Stable: "old", Drifted: true},
			phase: crd.RolloutProgressing, step: 1, canary: true, hold: true, reason: ReasonProgressing, inMsg: "waiting for the canary's pods"},
		{name: "canary pods not ready: no traffic", f: Facts{Spec: canary(), Stored: running(1, 0, ""), Desired: "new", Drifted: true, CanaryReady: 0, CanaryWant: 1},
			phase: crd.RolloutProgressing, step: 1, canary: true, hold: true, reason: ReasonProgressing, inMsg: "0 of 1 ready"},
		{name: "canary pods not ready within their deadline: still waiting", f: Facts{Spec: canary(), Stored: running(1, 0, ""), Desired: "new", Drifted: true, CanaryReady: 0, CanaryWant: 1,
			CanarySince: t0, ReadyWithin: 15 * time.Minute, Now: t0.Add(14 * time.Minute)},
			phase: crd.RolloutProgressing, step: 1, canary: true, hold: true, reason: ReasonProgressing, inMsg: "0 of 1 ready"},
		{name: "canary pods never ready: rolled back at the deadline", f: Facts{Spec: canary(), Stored: running(1, 0, ""), Desired: "new", Drifted: true, CanaryReady: 0, CanaryWant: 1,
			CanarySince: t0, ReadyWithin: 15 * time.Minute, Now: t0.Add(15 * time.Minute)},
			phase: crd.RolloutRolledBack, step: 1, hold: true, reason: ReasonRolledBack, inMsg: "the canary's pods were not ready within 15m0s (0 of 1 ready)"},
		{name: "canary ready: step 1's weight, waiting for a window", f: Facts{Spec: canary(), Stored: running(1, 0, ""), Desired: "new", Drifted: true, CanaryReady: 1, CanaryWant: 1, Now: t0},
			phase: crd.RolloutProgressing, step: 1, weight: 10, canary: true, hold: true, reason: ReasonProgressing, inMsg: "reading the pods' metrics"},
		{name: "a step's window not read from Prometheus: waiting, never a pass, saying why", f: Facts{Spec: canary(), Stored: running(1, 10, ""), Desired: "new", Drifted: true,
			CanaryReady: 1, CanaryWant: 1, WindowWaiting: "Prometheus: the canary's pods: no http_requests_total series", Now: t0.Add(10 * time.Minute)},
			phase: crd.RolloutProgressing, step: 1, weight: 10, canary: true, hold: true, reason: ReasonProgressing,
			inMsg: "step 1/2: 10% to the canary; waiting for its metrics: Prometheus: the canary's pods: no http_requests_total series"},
		{name: "step running", f: Facts{Spec: canary(), Stored: running(1, 10, ""), Desired: "new", Drifted: true, CanaryReady: 1, CanaryWant: 1, Window: good, Now: t0.Add(30 * time.Second)},
			phase: crd.RolloutProgressing, step: 1, weight: 10, canary: true, hold: true, reason: ReasonProgressing, inMsg: "judged in 30s"},
		{name: "step passes: next step", f: Facts{Spec: canary(), Stored: running(1, 10, ""), Desired: "new", Drifted: true, CanaryReady: 1, CanaryWant: 1, Window: good, Now: t0.Add(61 * time.Second)},
			phase: crd.RolloutProgressing, step: 2, weight: 50, canary: true, hold: true, reason: ReasonStepPassed, inMsg: "step 1/2 passed"},
		{name: "last step passes: promote", f: Facts{Spec: canary(), Stored: running(2, 50, ""), Desired: "new", Drifted: true, CanaryReady: 1, CanaryWant: 1, Window: good, Now: t0.Add(61 * time.Second)},
			phase: crd.RolloutProgressing, step: 2, weight: 50, canary: true, hold: false, reason: ReasonStepPassed, inMsg: "promoting"},
		{name: "promoting: stable rolling", f: Facts{Spec: canary(), Stored: running(2, 50, ""), Desired: "new", Drifted: false, StableRolledOut: false},
			phase: crd.RolloutProgressing, step: 2, weight: 50, canary: true, reason: ReasonStepPassed, inMsg: "rolling to revision new"},
		{name: "promoted", f: Facts{Spec: canary(), Stored: running(2, 50, ""), Desired: "new", Drifted: false, StableRolledOut: true},
			phase: crd.RolloutPromoted, step: 2, reason: ReasonPromoted, inMsg: "promoted"},
		{name: "errors: rolled back at once", f: Facts{Spec: canary(), Stored: running(1, 10, ""), Desired: "new", Drifted: true, CanaryReady: 1, CanaryWant: 1, Window: errs, Now: t0.Add(61 * time.Second)},
			phase: crd.RolloutRolledBack, step: 1, hold: true, reason: ReasonRolledBack, inMsg: "canary error rate 20.0% above 5% (stable 0.0%"},
		{name: "slow first token: rolled back", f: Facts{Spec: canary(), Stored: running(1, 10, ""), Desired: "new", Drifted: true, CanaryReady: 1, CanaryWant: 1, Window: slow, Now: t0.Add(61 * time.Second)},
			phase: crd.RolloutRolledBack, step: 1, hold: true, reason: ReasonRolledBack, inMsg: "p95 time to first token"},
		{name: "too few requests: extended", f: Facts{Spec: canary(), Stored: running(1, 10, ""), Desired: "new", Drifted: true, CanaryReady: 1, CanaryWant: 1, Window: few, Now: t0.Add(90 * time.Second)},
			phase: crd.RolloutProgressing, step: 1, weight: 10, canary: true, hold: true, reason: ReasonProgressing, inMsg: "5 of the 20 needed"},
		{name: "too few requests for 3 x the duration: inconclusive", f: Facts{Spec: canary(), Stored: running(1, 10, ""), Desired: "new", Drifted: true, CanaryReady: 1, CanaryWant: 1, Window: few, Now: t0.Add(181 * time.Second)},
			phase: crd.RolloutRolledBack, step: 1, hold: true, reason: ReasonRolledBack, inMsg: "inconclusive"},
		{name: "failed revision is not retried", f: Facts{Spec: canary(), Stored: &crd.RolloutStatus{Phase: crd.RolloutRolledBack, FailedRevision: "new", Message: "x"}, Desired: "new", Drifted: true},
			phase: crd.RolloutRolledBack, hold: true, reason: ReasonRolledBack},
		{name: "a newer change after a rollback starts again", f: Facts{Spec: canary(), Stored: &crd.RolloutStatus{Phase: crd.RolloutRolledBack, FailedRevision: "new"}, Desired: "newer", Drifted: true},
			phase: crd.RolloutProgressing, step: 1, canary: true, hold: true, reason: ReasonProgressing},
		{name: "restart mid-step: resumes at the same step with a new window", f: Facts{Spec: canary(), Stored: running(2, 50, "2026-01-01T11:00:00Z"), Desired: "new", Drifted: true, CanaryReady: 1, CanaryWant: 1,
			Window: &Window{Start: t0}, Now: t0},
			phase: crd.RolloutProgressing, step: 2, weight: 50, canary: true, hold: true, reason: ReasonProgressing, inMsg: "step 2/2: 50% to the canary, judged in 1m0s"},
		{name: "pool route: refused, stable held", f: Facts{Spec: canary(), Desired: "new", Drifted: true, Unsupported: "the pool route"},
			hold: true, reason: ReasonCanaryUnsupported},
		{name: "spec back to the stable's version mid-rollout", f: Facts{Spec: canary(), Stored: running(1, 10, ""), Desired: "old", Drifted: false},
			phase: crd.RolloutRolledBack, step: 1, reason: ReasonRolledBack, inMsg: "went back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.f)
			phase, step := "", int32(0)
			if p.Status != nil {
				phase, step = p.Status.Phase, p.Status.Step
			}
			if phase != tc.phase || step != tc.step || p.Weight != tc.weight || p.Canary != tc.canary || p.HoldStable != tc.hold || p.Reason != tc.reason ||
				!strings.Contains(p.Message, tc.inMsg) {
				t.Errorf("got phase %q step %d weight %d canary %v hold %v reason %q message %q", phase, step, p.Weight, p.Canary, p.HoldStable, p.Reason, p.Message)
			}
			if p.Status != nil && p.Status.Weight != p.Weight {
				t.Errorf("status weight %d, route weight %d", p.Status.Weight, p.Weight)
			}
			if tc.f.Window != nil && p.Status != nil && p.Status.Phase == crd.RolloutProgressing && p.Status.Step == tc.f.Stored.Step &&
				p.Status.StepStartedAt != tc.f.Window.Start.Format(time.RFC3339) {
				t.Errorf("stepStartedAt %q, window started %s", p.Status.StepStartedAt, tc.f.Window.Start)
			}
			if p.Reason == ReasonRolledBack && p.Status.Phase == crd.RolloutRolledBack && tc.f.Drifted && p.Status.FailedRevision != tc.f.Desired {
				t.Errorf("failedRevision %q, want %q", p.Status.FailedRevision, tc.f.Desired)
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	b := map[float64]float64{0.1: 50, 0.5: 90, 1: 100, math.Inf(1): 100}
	if q, ok := Quantile(b, 0.95); !ok || math.Abs(q-0.75) > 1e-9 {
		t.Errorf("p95 %v %v, want 0.75", q, ok)
	}
	if _, ok := Quantile(map[float64]float64{math.Inf(1): 0}, 0.95); ok {
		t.Error("empty histogram has a quantile")
	}
}

// TestSnapshotSince: deltas per pod; a restarted pod's counters count from zero, a new pod whole.
func TestSnapshotSince(t *testing.T) {
	base := Snapshot{"a": {Requests: 100, Errors: 10}, "b": {Requests: 50}}
	now := Snapshot{"a": {Requests: 130, Errors: 12}, "b": {Requests: 5, Errors: 1}, "c": {Requests: 7}}
	got := now.Since(base)
	if got.Requests != 30+5+7 || got.Errors != 2+1 {
		t.Errorf("got %+v", got)
	}
}

func TestTransition(t *testing.T) {
	if r, w, _, ok := Transition(running(1, 10, ""), &crd.RolloutStatus{Phase: crd.RolloutRolledBack, CanaryRevision: "new", Message: "m"}); !ok || r != ReasonRolledBack || !w {
		t.Errorf("rollback: %q %v %v", r, w, ok)
	}
	if r, _, _, ok := Transition(running(1, 10, ""), running(2, 50, "")); !ok || r != ReasonStepPassed {
		t.Errorf("step: %q %v", r, ok)
	}
	last := running(2, 50, "")
	last.Message = "step 2/2 passed: ...; promoting: the stable Deployment takes the canary's version"
	if r, _, _, ok := Transition(running(2, 50, ""), last); !ok || r != ReasonStepPassed {
		t.Errorf("last step: %q %v", r, ok)
	}
	rolling := running(2, 50, "")
	rolling.Message = "promoting: every step passed; the stable Deployment is rolling to revision new"
	if _, _, _, ok := Transition(last, rolling); ok {
		t.Error("promotion going on, a second StepPassed")
	}
	if _, _, _, ok := Transition(running(1, 10, ""), running(1, 10, "x")); ok {
		t.Error("no change, an Event")
	}
}
