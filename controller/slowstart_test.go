package controller

import (
	"testing"

	"github.com/example/inferenceservice-operator/crd"
)

// TestSlowStartWarnedOnce: a new slow last start is one Warning naming its slowest phase; the
// same start stored, or a quick one, is none.
func TestSlowStartWarnedOnce(t *testing.T) {
	isvc := newISVCObject(1)
	f := newFixture(t, isvc, nil)
	slow := &crd.StartRecord{Pod: "qwen3-x", ServingAt: "2026-01-01T00:17:00.000Z", TotalSeconds: 17 * 60,
		Phases: []crd.StartPhase{{Name: "weights download", Seconds: 14 * 60}, {Name: "weights load", Seconds: 3 * 60}}}
	quick := &crd.StartRecord{Pod: "qwen3-y", ServingAt: "2026-01-01T00:20:00.000Z", TotalSeconds: 60, Phases: slow.Phases[1:]}
	none, stored := &crd.StatusExtensions{}, &crd.StatusExtensions{LastStart: slow}
	f.ctrl.warnOnSlowStart(isvc, none, stored)
	f.ctrl.warnOnSlowStart(isvc, stored, stored)
	f.ctrl.warnOnSlowStart(isvc, stored, &crd.StatusExtensions{LastStart: quick})
	if got := len(f.events.Events); got != 1 {
		t.Fatalf("%d events, want 1", got)
	}
	if e := <-f.events.Events; e != "Warning SlowStart SlowStart: weights download 14m of 17m" {
		t.Errorf("event %q", e)
	}
}
