package main

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestProbeSchedule: the fake kubelet reports started and ready as a real one does: started
// when the startup probe first passes, ready at the first readiness probe after that (a
// kubelet skips readiness until its last status says started), never both at once when a
// startup probe exists.
func TestProbeSchedule(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	// The operator's probes (controller/reconcile/template.go).
	startup := &v1.Probe{PeriodSeconds: 10, FailureThreshold: 360}
	readiness := &v1.Probe{PeriodSeconds: 5, FailureThreshold: 3}
	type probe struct {
		at   time.Time
		kind string
	}
	cases := []struct {
		name               string
		beh                behavior
		startup, readiness *v1.Probe
		started, ready     time.Time // zero: never
		failures           []probe   // the first failing probes (Unhealthy events)
	}{
		{name: "ready, the operator's probes", beh: behavior{kind: bReady}, startup: startup, readiness: readiness,
			started: sec(0), ready: sec(5)},
		{name: "slow load: started at the startup probe after the load, ready one readiness period later", beh: behavior{kind: bSlowReady, delay: 8 * time.Second},
			startup: startup, readiness: readiness, started: sec(10), ready: sec(15), failures: []probe{{sec(0), "Startup"}}},
		{name: "never ready: started, then readiness fails every period", beh: behavior{kind: bNeverReady}, startup: startup, readiness: readiness,
			started: sec(0), failures: []probe{{sec(5), "Readiness"}, {sec(10), "Readiness"}, {sec(15), "Readiness"}}},
		{name: "crash loop: exits before its startup probe passes", beh: behavior{kind: bCrashLoop}, startup: startup, readiness: readiness},
		{name: "no startup probe: readiness runs as the container comes up, after its initial delay", beh: behavior{kind: bReady},
			readiness: &v1.Probe{PeriodSeconds: 5, InitialDelaySeconds: 3}, started: sec(0), ready: sec(3)},
		{name: "startup initial delay, readiness initial delay beyond it", beh: behavior{kind: bReady},
			startup: &v1.Probe{PeriodSeconds: 10, InitialDelaySeconds: 2}, readiness: &v1.Probe{PeriodSeconds: 5, InitialDelaySeconds: 20}, started: sec(2), ready: sec(22)},
		{name: "no probes: ready while running", beh: behavior{kind: bReady}, started: sec(0), ready: sec(0)},
		{name: "slow load without probes: fails until loaded", beh: behavior{kind: bSlowReady, delay: 4 * time.Second}, started: sec(0), ready: sec(4),
			failures: []probe{{sec(0), "Readiness"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := &podState{k: &kubelet{cfg: kubeletConfig{crashRun: time.Second}}}
			ct := &ctr{spec: v1.Container{Name: "vllm", StartupProbe: c.startup, ReadinessProbe: c.readiness}, beh: c.beh, state: csRunning, startedAt: t0}
			ct.setRunningSchedule(ps, t0)
			if !ct.startedOK.Equal(c.started) || !ct.readyAt.Equal(c.ready) {
				t.Fatalf("started %s ready %s, want %s %s", ct.startedOK, ct.readyAt, c.started, c.ready)
			}
			if c.startup != nil && !c.ready.IsZero() && !c.ready.After(c.started) {
				t.Fatal("started and ready at once with a startup probe")
			}
			for _, at := range []time.Time{c.started.Add(-time.Nanosecond), c.ready.Add(-time.Nanosecond)} {
				if !c.ready.IsZero() && at.After(t0) && ct.ready(at) {
					t.Fatalf("ready at %s", at.Sub(t0))
				}
			}
			next := t0
			for i, want := range c.failures {
				at, kind := ct.nextFailure(next)
				if !at.Equal(want.at) || kind != want.kind {
					t.Fatalf("failing probe %d: %s at %s, want %s at %s", i, kind, at.Sub(t0), want.kind, want.at.Sub(t0))
				}
				next = at.Add(time.Nanosecond)
			}
			if len(c.failures) == 0 {
				if at, kind := ct.nextFailure(t0); !at.IsZero() {
					t.Fatalf("a %s probe fails at %s", kind, at.Sub(t0))
				}
			}
		})
	}
}
