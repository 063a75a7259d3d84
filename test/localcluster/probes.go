// Probe timing: when a container reports started and ready, and when a probe fails (Unhealthy).

package main

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// probePeriod is a probe's periodSeconds, 10s (the API default) when unset or absent.
func probePeriod(p *v1.Probe) time.Duration {
	if p != nil && p.PeriodSeconds > 0 {
		return time.Duration(p.PeriodSeconds) * time.Second
	}
	return 10 * time.Second
}

func probeDelay(p *v1.Probe) time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(p.InitialDelaySeconds) * time.Second
}

// tickAtOrAfter is the first of first, first+period, ... that is not before t.
func tickAtOrAfter(first time.Time, period time.Duration, t time.Time) time.Time {
	if !t.After(first) {
		return first
	}
	n := (t.Sub(first) + period - 1) / period
	return first.Add(n * period)
}

// firstReadinessProbe is when the readiness probe first runs. A real kubelet skips it until
// the pod status it last wrote says started: with a startup probe that is one readiness
// period after the startup probe passed, so started and ready are never set together.
// Without one, the kubelet runs it as the container comes up, after its initialDelaySeconds.
func (c *ctr) firstReadinessProbe() time.Time {
	rp := c.spec.ReadinessProbe
	notBefore := c.startedAt.Add(probeDelay(rp))
	if c.spec.StartupProbe == nil {
		return notBefore
	}
	return tickAtOrAfter(c.startedOK.Add(probePeriod(rp)), probePeriod(rp), notBefore)
}

// setRunningSchedule computes, for a container just (re)started, when its startup probe
// passes (status.started), when its readiness probe first passes (ready) and when a probe
// fails (Unhealthy events), from the probes' initialDelaySeconds and periodSeconds.
func (c *ctr) setRunningSchedule(ps *podState, now time.Time) {
	sp := c.spec.StartupProbe
	up := c.startedAt // when the server answers its probes
	switch c.beh.kind {
	case bSlowReady:
		up = c.startedAt.Add(c.beh.delay)
	case bCrashLoop, bOOMKilled:
		up = time.Time{} // exits before it answers
	}
	c.startedOK, c.readyAt, c.next = time.Time{}, time.Time{}, time.Time{}
	switch {
	case sp == nil:
		c.startedOK = c.startedAt // no startup probe: started while running
	case !up.IsZero():
		// Startup probes run from initialDelaySeconds every periodSeconds; the first one
		// after the server answers passes.
		c.startedOK = tickAtOrAfter(c.startedAt.Add(probeDelay(sp)), probePeriod(sp), up)
	}
	switch c.beh.kind {
	case bReady, bSlowReady, bEvicted:
		switch {
		case c.spec.ReadinessProbe != nil:
			c.readyAt = tickAtOrAfter(c.firstReadinessProbe(), probePeriod(c.spec.ReadinessProbe), up)
		case c.beh.kind == bSlowReady:
			c.readyAt = maxTime(c.startedOK, up) // no probe: ready once loaded, as this mode promises
		default:
			c.readyAt = c.startedOK // no readiness probe: ready once started, as a kubelet reports
		}
	case bNeverReady:
		// Starts (startup probe passes), but readiness never does.
	case bCrashLoop, bOOMKilled:
		if sp == nil && c.spec.ReadinessProbe == nil {
			c.readyAt = c.startedAt // no probe: ready while it runs
		}
		c.next = c.startedAt.Add(ps.k.cfg.crashRun)
	}
	c.nextProbe, c.probeKind = c.nextFailure(now)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// nextFailure is the first failing probe at or after t: startup probes before the startup
// probe passes (a slow load), readiness probes after started until ready (never-ready,
// slow-ready without a startup probe). Crashing containers exit before a probe says much.
func (c *ctr) nextFailure(t time.Time) (time.Time, string) {
	if c.state != csRunning || c.beh.kind == bCrashLoop || c.beh.kind == bOOMKilled {
		return time.Time{}, ""
	}
	if sp := c.spec.StartupProbe; sp != nil {
		tick := tickAtOrAfter(c.startedAt.Add(probeDelay(sp)), probePeriod(sp), t)
		if tick.Before(c.startedOK) {
			return tick, "Startup"
		}
	}
	if c.startedOK.IsZero() {
		return time.Time{}, ""
	}
	tick := tickAtOrAfter(c.firstReadinessProbe(), probePeriod(c.spec.ReadinessProbe), t)
	if !c.readyAt.IsZero() && !tick.Before(c.readyAt) {
		return time.Time{}, ""
	}
	return tick, "Readiness"
}

func probeFailure(ps *podState, p *v1.Probe) string {
	if p != nil {
		switch {
		case p.TCPSocket != nil:
			return fmt.Sprintf("dial tcp %s:%s: connect: connection refused", ps.ip, p.TCPSocket.Port.String())
		case p.Exec != nil:
			return ""
		case p.GRPC != nil:
			return fmt.Sprintf("timeout: failed to connect service %q within 1s", fmt.Sprintf("%s:%d", ps.ip, p.GRPC.Port))
		}
	}
	return "HTTP probe failed with statuscode: 503"
}
