// The per-container state machine: start, crash, back off, fail to pull, and each step's events.

package main

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

type cstate int

const (
	csRunning cstate = iota
	csTerminated
	csCrashBackOff
	csErrImagePull
	csImagePullBackOff
	csCompleted   // init containers
	csConfigError // CreateContainerConfigError: its environment names what does not exist
	csPulling     // waiting ContainerCreating: its image is coming down (pull.go)
	csCreating    // waiting ContainerCreating: the pod's volumes are not mounted (mount.go)
)

type ctr struct {
	spec     v1.Container
	init     bool
	sidecar  bool
	beh      behavior
	state    cstate
	restarts int32

	startedAt   time.Time
	startedOK   time.Time // startup probe passed (status.started); zero: never
	readyAt     time.Time // zero: never
	containerID string
	term        *v1.ContainerStateTerminated // current (csTerminated) or last termination
	last        *v1.ContainerStateTerminated // lastState.terminated
	backoff     time.Duration
	next        time.Time // next state transition; zero: none
	nextProbe   time.Time // next failing probe (an Unhealthy event); zero: none
	probeKind   string    // "Startup" or "Readiness": which probe fails at nextProbe
	pullErrAt   time.Time
	pullErr     string        // a refused pull's message (registry.go); "" for the errimagepull behavior's
	pullStart   time.Time     // a slow pull began (csPulling)
	pulledIn    time.Duration // a slow pull just ended: the next Pulled event says how long

	// Serving containers (serve.go): the process, its prober's stop, the run they belong to.
	serve  bool
	srv    process
	stopCh chan struct{}
	run    int
	cfgErr string   // the CreateContainerConfigError message
	runLog *logRun  // the current run's log
	logIDs []string // container IDs of the runs whose logs are kept (current, previous)
}

// started is status.started: true once running and the startup probe (if
// any) has passed.
func (c *ctr) started(now time.Time) bool {
	return c.state == csRunning && !c.startedOK.IsZero() && !now.Before(c.startedOK)
}

func (c *ctr) ready(now time.Time) bool {
	switch c.state {
	case csRunning:
		return c.started(now) && !c.readyAt.IsZero() && !now.Before(c.readyAt)
	case csCompleted:
		return true
	}
	return false
}

func (c *ctr) backoffFor(cfg kubeletConfig) time.Duration {
	b := cfg.crashBackoffInitial
	for i := int32(0); i < c.restarts && b < cfg.crashBackoffMax; i++ {
		b *= 2
	}
	return min(b, cfg.crashBackoffMax)
}

func (c *ctr) imageEvents(ps *podState) {
	ref := containerRef(ps.pod, c.spec.Name, c.init)
	img := c.spec.Image
	if c.pulledIn > 0 {
		ps.rec.Eventf(ref, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.", normalizedImage(img), c.pulledIn, c.pulledIn, pulledImageSize)
		c.pulledIn = 0
	} else if c.spec.ImagePullPolicy == v1.PullAlways {
		ps.rec.Eventf(ref, v1.EventTypeNormal, "Pulling", "Pulling image %q", normalizedImage(img))
		ps.rec.Eventf(ref, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in 312ms (312ms including waiting). Image size: 4212134 bytes.", normalizedImage(img))
	} else {
		ps.rec.Eventf(ref, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", img)
	}
}

// restore resumes a running container after a restart of the fake kubelet. A serving
// container's process ended with the old kubelet: it starts again under the same container.
func (c *ctr) restore(ps *podState, prev *v1.ContainerStatus, now time.Time) {
	c.state = csRunning
	c.startedAt = prev.State.Running.StartedAt.Time
	c.serve = ps.serves(c)
	if c.serve {
		if spec, err := ps.serverSpec(c); err == nil {
			c.startServing(ps, spec, now, prev)
			return
		}
		c.serve = false
	}
	c.setRunningSchedule(ps, now)
	c.newRun(ps)
}

// start (re)starts the container at now.
func (c *ctr) start(ps *podState, now time.Time, restart bool) {
	if restart {
		c.restarts++
	}
	if c.beh.kind == bErrImgPull {
		c.pullFail(ps, now)
		return
	}
	if c.pullErr = ps.pullDenial(c); c.pullErr != "" {
		c.pullFail(ps, now)
		return
	}
	if c.awaitPull(ps, now) {
		return
	}
	c.serve = ps.serves(c)
	var spec proc.Spec
	if c.serve {
		var err error
		if spec, err = ps.serverSpec(c); err != nil {
			c.configError(ps, now, err)
			return
		}
	}
	c.imageEvents(ps)
	ref := containerRef(ps.pod, c.spec.Name, c.init)
	ps.rec.Event(ref, v1.EventTypeNormal, "Created", "Container created")
	ps.rec.Event(ref, v1.EventTypeNormal, "Started", "Container started")
	c.state = csRunning
	c.startedAt = now
	c.containerID = newContainerID(ps.pod, c.spec.Name, c.restarts)
	c.cfgErr = ""
	if c.serve {
		c.startServing(ps, spec, now, nil)
		return
	}
	c.setRunningSchedule(ps, now)
	log := c.newRun(ps)
	log.Printf("Starting %s", c.spec.Image)
	log.Printf("Listening on :8080")
}

// configError is the kubelet failing to build the container's config (a Secret or key its
// environment names is missing): waiting CreateContainerConfigError, retried on a back-off.
func (c *ctr) configError(ps *podState, now time.Time, err error) {
	ref := containerRef(ps.pod, c.spec.Name, c.init)
	c.imageEvents(ps)
	ps.rec.Eventf(ref, v1.EventTypeWarning, "Failed", "Error: %v", err)
	c.state = csConfigError
	c.cfgErr = err.Error()
	c.readyAt, c.startedOK, c.nextProbe = time.Time{}, time.Time{}, time.Time{}
	c.next = now.Add(c.backoffFor(ps.k.cfg))
}

func (c *ctr) complete(ps *podState, now time.Time) {
	c.imageEvents(ps)
	ref := containerRef(ps.pod, c.spec.Name, true)
	ps.rec.Event(ref, v1.EventTypeNormal, "Created", "Container created")
	ps.rec.Event(ref, v1.EventTypeNormal, "Started", "Container started")
	c.containerID = newContainerID(ps.pod, c.spec.Name, 0)
	c.newRun(ps).Printf("Starting %s", c.spec.Image)
	c.endRun()
	c.state = csCompleted
	t := mtime(now)
	c.term = &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: t, FinishedAt: t, ContainerID: c.containerID}
}

// crash ends a schedule-model run as its behavior says (crashloop, oomkilled), with the
// traceback a crashing server leaves in its log.
func (c *ctr) crash(ps *podState, now time.Time) {
	code, reason := int32(1), "Error"
	if c.beh.kind == bOOMKilled {
		code, reason = 137, "OOMKilled"
	}
	if c.runLog != nil {
		if reason == "OOMKilled" {
			c.runLog.log.Printf("Killed")
		} else {
			c.runLog.log.Printf("Traceback (most recent call last):")
			c.runLog.log.Printf("  File \"/app/server.py\", line 42, in <module>")
			c.runLog.log.Printf("    main()")
			c.runLog.log.Printf("RuntimeError: the server crashed (%s)", c.spec.Image)
		}
	}
	c.crashWith(ps, now, code, reason)
}

// crashWith ends the run with the process's exit code and reason; unless the pod never
// restarts, it restarts after the back-off (CrashLoopBackOff).
func (c *ctr) crashWith(ps *podState, now time.Time, code int32, reason string) {
	c.endRun()
	c.term = &v1.ContainerStateTerminated{
		ExitCode:    code,
		Reason:      reason,
		StartedAt:   mtime(c.startedAt),
		FinishedAt:  mtime(now),
		ContainerID: c.containerID,
	}
	c.state = csTerminated
	c.readyAt = time.Time{}
	c.nextProbe = time.Time{}
	if ps.pod.Spec.RestartPolicy == v1.RestartPolicyNever || (ps.pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && code == 0) {
		c.next = time.Time{}
		return
	}
	c.backoff = c.backoffFor(ps.k.cfg)
	c.next = now.Add(min(ps.k.cfg.terminatedFor, c.backoff))
}

func (c *ctr) pullErrMessage() string {
	if c.pullErr != "" {
		return c.pullErr
	}
	img := normalizedImage(c.spec.Image)
	return fmt.Sprintf("rpc error: code = NotFound desc = failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", img, img, img)
}

func (c *ctr) pullFail(ps *podState, now time.Time) {
	ref := containerRef(ps.pod, c.spec.Name, c.init)
	img := normalizedImage(c.spec.Image)
	ps.rec.Eventf(ref, v1.EventTypeNormal, "Pulling", "Pulling image %q", img)
	ps.rec.Eventf(ref, v1.EventTypeWarning, "Failed", "Failed to pull image %q: %s", img, c.pullErrMessage())
	ps.rec.Event(ref, v1.EventTypeWarning, "Failed", "Error: ErrImagePull")
	c.state = csErrImagePull
	c.pullErrAt = now
	c.backoff = c.backoffFor(ps.k.cfg)
	c.next = now.Add(min(ps.k.cfg.terminatedFor, c.backoff))
}

// advance moves the container through every transition due at now.
func (c *ctr) advance(ps *podState, now time.Time) {
	for i := 0; i < 100 && !c.next.IsZero() && !now.Before(c.next); i++ {
		at := c.next
		ref := containerRef(ps.pod, c.spec.Name, c.init)
		switch c.state {
		case csRunning:
			c.crash(ps, at)
		case csTerminated:
			c.last = c.term
			c.state = csCrashBackOff
			c.next = c.term.FinishedAt.Add(c.backoff)
			ps.rec.Eventf(ref, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.spec.Name, formatPod(ps.pod))
		case csCrashBackOff:
			c.start(ps, at, true)
		case csConfigError:
			c.start(ps, at, false)
		case csPulling:
			c.pulled(ps, at)
		case csErrImagePull:
			c.state = csImagePullBackOff
			c.next = c.pullErrAt.Add(c.backoff)
			ps.rec.Eventf(ref, v1.EventTypeNormal, "BackOff", "Back-off pulling image %q", normalizedImage(c.spec.Image))
			ps.rec.Event(ref, v1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
		case csImagePullBackOff:
			if c.pullErr != "" {
				if c.pullErr = ps.pullDenial(c); c.pullErr == "" { // the credentials came: pull
					c.start(ps, at, false)
					continue
				}
			}
			c.restarts++ // only used to grow the back-off; restartCount stays 0 for pulls
			c.pullFail(ps, at)
			c.restarts--
			c.backoff = min(c.backoff*2, ps.k.cfg.crashBackoffMax)
			c.next = at.Add(min(ps.k.cfg.terminatedFor, c.backoff))
		default:
			c.next = time.Time{}
		}
	}
	if c.state == csRunning && !c.nextProbe.IsZero() && !now.Before(c.nextProbe) {
		ref := containerRef(ps.pod, c.spec.Name, c.init)
		probe := c.spec.ReadinessProbe
		if c.probeKind == "Startup" {
			probe = c.spec.StartupProbe
		}
		ps.rec.Eventf(ref, v1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", c.probeKind, probeFailure(ps, probe))
		c.nextProbe, c.probeKind = c.nextFailure(now.Add(time.Nanosecond))
	}
}
