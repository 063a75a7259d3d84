// The pod status a kubelet would report: container statuses, phase and conditions, at a given time.

package main

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (ps *podState) containerStatus(c *ctr, now time.Time) v1.ContainerStatus {
	f := false
	t := true
	s := v1.ContainerStatus{
		Name:         c.spec.Name,
		Image:        c.spec.Image,
		ImageID:      imageID(c.spec.Image),
		ContainerID:  c.containerID,
		RestartCount: c.restarts,
		Started:      &f,
	}
	if c.last != nil {
		s.LastTerminationState.Terminated = c.last
	}
	if !c.init {
		rr := c.spec.Resources
		if len(rr.Requests) > 0 || len(rr.Limits) > 0 {
			s.AllocatedResources = rr.Requests.DeepCopy()
			s.Resources = &v1.ResourceRequirements{Requests: rr.Requests.DeepCopy(), Limits: rr.Limits.DeepCopy()}
		}
	}
	for _, m := range c.spec.VolumeMounts {
		vm := v1.VolumeMountStatus{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly}
		if m.ReadOnly {
			d := v1.RecursiveReadOnlyDisabled
			vm.RecursiveReadOnly = &d
		}
		s.VolumeMounts = append(s.VolumeMounts, vm)
	}
	switch c.state {
	case csRunning:
		s.State.Running = &v1.ContainerStateRunning{StartedAt: mtime(c.startedAt)}
		if c.started(now) {
			s.Started = &t
		}
		s.Ready = c.ready(now)
	case csCompleted:
		s.State.Terminated = c.term
		s.Ready = true
	case csTerminated:
		s.State.Terminated = c.term
	case csCrashBackOff:
		s.State.Waiting = &v1.ContainerStateWaiting{
			Reason:  "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", c.backoff, c.spec.Name, formatPod(ps.pod)),
		}
	case csConfigError:
		s.ImageID, s.ContainerID = "", ""
		s.State.Waiting = &v1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: c.cfgErr}
	case csErrImagePull:
		s.ImageID, s.ContainerID = "", ""
		s.State.Waiting = &v1.ContainerStateWaiting{Reason: "ErrImagePull", Message: c.pullErrMessage()}
	case csImagePullBackOff:
		s.ImageID, s.ContainerID = "", ""
		s.State.Waiting = &v1.ContainerStateWaiting{
			Reason:  "ImagePullBackOff",
			Message: fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", normalizedImage(c.spec.Image), c.pullErrMessage()),
		}
	}
	return s
}

// render computes the pod status a kubelet would report, on top of base.
func (ps *podState) render(base *v1.Pod, now time.Time) v1.PodStatus {
	st := *base.Status.DeepCopy()
	st.ObservedGeneration = base.Generation
	st.HostIP = ps.host
	st.HostIPs = []v1.HostIP{{IP: ps.host}}
	st.PodIP = ps.ip
	st.PodIPs = []v1.PodIP{{IP: ps.ip}}
	if st.StartTime == nil {
		t := mtime(ps.t0)
		st.StartTime = &t
	}
	st.InitContainerStatuses = nil
	st.ContainerStatuses = nil
	var unready, incompleteInit []string
	pending, allStoppedNever, allSucceeded := false, true, true
	for _, c := range ps.ctrs {
		cs := ps.containerStatus(c, now)
		if c.init {
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
			if c.state != csCompleted && !(c.sidecar && c.state == csRunning) {
				incompleteInit = append(incompleteInit, c.spec.Name)
			}
			continue
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if !cs.Ready {
			unready = append(unready, c.spec.Name)
		}
		switch c.state {
		case csConfigError:
			// Pending until the container first ran; a restart that fails so stays Running.
			pending = pending || c.last == nil
			allStoppedNever = false
		case csErrImagePull, csImagePullBackOff:
			pending = true
			allStoppedNever = false
		case csRunning:
			allStoppedNever = false
		case csCrashBackOff:
			allStoppedNever = false
		}
		// Exited 0 and not restarting (restartPolicy Never, or OnFailure after a success).
		allSucceeded = allSucceeded && c.state == csTerminated && c.next.IsZero() && c.term != nil && c.term.ExitCode == 0
	}
	switch {
	case ps.evicted != "":
		st.Phase, st.Reason, st.Message = v1.PodFailed, "Evicted", ps.evicted
	case len(incompleteInit) > 0 || pending:
		st.Phase = v1.PodPending
	case ps.pod.Spec.RestartPolicy != v1.RestartPolicyAlways && allSucceeded && len(st.ContainerStatuses) > 0:
		st.Phase = v1.PodSucceeded // every container exited 0 (a process of an exec image)
	case ps.pod.Spec.RestartPolicy == v1.RestartPolicyNever && allStoppedNever:
		st.Phase = v1.PodFailed
	default:
		st.Phase = v1.PodRunning
	}
	// readiness gates
	gatesOK := true
	var gateMsg string
	for _, g := range ps.pod.Spec.ReadinessGates {
		found := false
		for _, pc := range base.Status.Conditions {
			if pc.Type == g.ConditionType {
				found = true
				if pc.Status != v1.ConditionTrue {
					gatesOK = false
					gateMsg = fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %s", g.ConditionType, pc.Status)
				}
			}
		}
		if !found {
			gatesOK = false
			gateMsg = fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType)
		}
	}
	cond := func(t v1.PodConditionType, ok bool, reason, msg string) v1.PodCondition {
		c := v1.PodCondition{Type: t, Status: v1.ConditionTrue, ObservedGeneration: base.Generation}
		if !ok {
			c.Status, c.Reason, c.Message = v1.ConditionFalse, reason, msg
		}
		return c
	}
	unreadyMsg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	initialized := cond(v1.PodInitialized, len(incompleteInit) == 0, "ContainersNotInitialized",
		fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incompleteInit, " ")))
	containersReady := cond(v1.ContainersReady, len(unready) == 0 && len(incompleteInit) == 0, "ContainersNotReady", unreadyMsg)
	ready := cond(v1.PodReady, len(unready) == 0 && len(incompleteInit) == 0 && gatesOK, "ContainersNotReady", unreadyMsg)
	if len(unready) == 0 && len(incompleteInit) == 0 && !gatesOK {
		ready.Reason, ready.Message = "ReadinessGatesNotReady", gateMsg
	}
	if len(incompleteInit) > 0 {
		containersReady.Reason, containersReady.Message = "ContainersNotInitialized", initialized.Message
		ready.Reason, ready.Message = "ContainersNotInitialized", initialized.Message
	}
	if st.Phase == v1.PodFailed {
		ready.Reason, containersReady.Reason = "PodFailed", "PodFailed"
		ready.Message, containersReady.Message = "", ""
	}
	mine := []v1.PodCondition{
		cond(v1.PodReadyToStartContainers, true, "", ""),
		initialized,
		ready,
		containersReady,
	}
	if ps.evicted != "" {
		mine = append(mine, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet", Message: ps.evicted, ObservedGeneration: base.Generation})
	}
	var out []v1.PodCondition
	for _, m := range mine {
		m.LastTransitionTime = mtime(now)
		for _, prev := range base.Status.Conditions {
			if prev.Type == m.Type && prev.Status == m.Status {
				m.LastTransitionTime = prev.LastTransitionTime
			}
		}
		out = append(out, m)
	}
	ours := map[v1.PodConditionType]bool{}
	for _, m := range mine {
		ours[m.Type] = true
	}
	for _, prev := range base.Status.Conditions {
		if !ours[prev.Type] {
			out = append(out, prev)
		}
	}
	st.Conditions = out
	return st
}

// mtime is a metav1.Time at the API's one-second precision, so a rendered
// status compares equal to the one read back.
func mtime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
