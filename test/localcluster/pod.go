// One pod's state in its worker: its containers, addresses, eviction, next wake-up, spec changes.

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

type podState struct {
	ctx  context.Context // the pod worker's: reads for a container's config stop with it
	k    *kubelet
	pod  *v1.Pod
	rec  record.EventRecorder
	ctrs []*ctr
	t0   time.Time
	ip   string
	host string
	// evictAt is when the node evicts the pod for memory pressure (the evicted behavior);
	// zero: never. evicted is the eviction message once it happened.
	evictAt time.Time
	evicted string
	// msgs carries serving containers' exits and probe results to the pod worker.
	msgs chan podMsg
	// mount is the wait for volumes that do not mount (mount.go).
	mount mountWait
	// kubeconfig is the ServiceAccount kubeconfig of the pod's exec containers (exec.go);
	// "": not written yet.
	kubeconfig string
}

func normalizedImage(image string) string {
	last := image
	if i := strings.LastIndex(image, "/"); i >= 0 {
		last = image[i+1:]
	}
	if !strings.Contains(last, ":") && !strings.Contains(last, "@") {
		return image + ":latest"
	}
	return image
}

func imageID(image string) string {
	sum := sha256.Sum256([]byte(image))
	name := normalizedImage(image)
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name + "@sha256:" + hex.EncodeToString(sum[:])
}

func newContainerID(pod *v1.Pod, name string, restarts int32) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d/%d", pod.UID, name, restarts, time.Now().UnixNano())))
	return "containerd://" + hex.EncodeToString(sum[:])
}

func containerRef(pod *v1.Pod, name string, init bool) *v1.ObjectReference {
	path := "spec.containers{" + name + "}"
	if init {
		path = "spec.initContainers{" + name + "}"
	}
	return &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion, FieldPath: path}
}

func formatPod(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

func newPodState(ctx context.Context, k *kubelet, pod *v1.Pod, now time.Time) *podState {
	idx := k.nodes[pod.Spec.NodeName]
	ps := &podState{ctx: ctx, k: k, pod: pod, rec: k.recorders[pod.Spec.NodeName], t0: now, host: nodeIP(idx), msgs: make(chan podMsg, 8)}
	if pod.Status.StartTime != nil {
		ps.t0 = pod.Status.StartTime.Time
	}
	ps.ip = k.ips.assign(pod.UID, pod.Status.PodIP)
	if pod.Spec.HostNetwork {
		ps.ip = ps.host
	}
	for i := range pod.Spec.InitContainers {
		c := &ctr{spec: pod.Spec.InitContainers[i], init: true}
		c.sidecar = c.spec.RestartPolicy != nil && *c.spec.RestartPolicy == v1.ContainerRestartPolicyAlways
		c.beh = behavior{kind: bReady}
		ps.ctrs = append(ps.ctrs, c)
	}
	for i := range pod.Spec.Containers {
		c := &ctr{spec: pod.Spec.Containers[i]}
		c.beh = containerBehavior(pod, &c.spec)
		ps.ctrs = append(ps.ctrs, c)
	}
	restored := false
	for _, c := range ps.ctrs {
		prev := findStatus(pod, c.spec.Name, c.init)
		if prev != nil && prev.Image == c.spec.Image {
			c.restarts = prev.RestartCount
			c.last = prev.LastTerminationState.Terminated
			if prev.State.Running != nil && prev.ContainerID != "" {
				// Resume a container that was running before a restart of the fake kubelet.
				c.containerID = prev.ContainerID
				c.restore(ps, prev, now)
				restored = true
				continue
			}
			if c.init && prev.State.Terminated != nil && prev.State.Terminated.ExitCode == 0 {
				c.state = csCompleted
				c.term = prev.State.Terminated
				c.containerID = prev.ContainerID
				restored = true
				continue
			}
		}
		c.state = csCreating
	}
	// A pod that ran before a restart of the fake kubelet has its volumes mounted.
	if restored || ps.mountOrWait(now) {
		ps.startContainers(now)
	}
	return ps
}

// scheduleEviction times the eviction of a pod whose container plays evicted.
func (ps *podState) scheduleEviction() {
	for _, c := range ps.ctrs {
		if c.beh.kind == bEvicted && c.state == csRunning {
			// Memory grows until the node runs short: it ran a moment, then is evicted.
			ps.evictAt = c.startedAt.Add(ps.k.cfg.crashRun)
		}
	}
}

// evict does what a kubelet's eviction manager does under memory pressure: kill the
// containers and fail the pod with reason Evicted. The ReplicaSet replaces the pod; the
// failed one stays until the pod garbage collector's threshold.
func (ps *podState) evict(now time.Time) {
	name, request := "", "0"
	for _, c := range ps.ctrs {
		if !c.init && (name == "" || c.beh.kind == bEvicted) {
			name = c.spec.Name
			if q, ok := c.spec.Resources.Requests[v1.ResourceMemory]; ok {
				request = q.String()
			}
		}
	}
	ps.evicted = fmt.Sprintf("The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. Container %s was using 3Gi, request is %s, has larger consumption of memory. ", name, request)
	pod := ps.pod
	ps.rec.Event(&v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		v1.EventTypeWarning, "Evicted", ps.evicted)
	for _, c := range ps.ctrs {
		if c.state != csRunning {
			continue
		}
		ps.rec.Eventf(containerRef(pod, c.spec.Name, c.init), v1.EventTypeNormal, "Killing", "Stopping container %s", c.spec.Name)
		c.stopServing()
		c.endRun()
		c.term = &v1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: mtime(c.startedAt), FinishedAt: mtime(now), ContainerID: c.containerID}
		c.state = csTerminated
		c.readyAt, c.next, c.nextProbe = time.Time{}, time.Time{}, time.Time{}
	}
}

func findStatus(pod *v1.Pod, name string, init bool) *v1.ContainerStatus {
	list := pod.Status.ContainerStatuses
	if init {
		list = pod.Status.InitContainerStatuses
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// nextWake is the earliest time something changes.
func (ps *podState) nextWake(now time.Time) time.Time {
	var t time.Time
	consider := func(x time.Time) {
		if !x.IsZero() && (t.IsZero() || x.Before(t)) {
			t = x
		}
	}
	if ps.evicted != "" {
		return time.Time{}
	}
	consider(ps.evictAt)
	consider(ps.mountWake())
	for _, c := range ps.ctrs {
		consider(c.next)
		if c.state == csRunning {
			if c.readyAt.After(now) {
				consider(c.readyAt)
			}
			if c.startedOK.After(now) {
				consider(c.startedOK)
			}
			consider(c.nextProbe)
		}
	}
	return t
}

// reconcileSpec reacts to a changed pod: an image or behavior change restarts
// the container, as a kubelet restarts a container whose spec changed.
func (ps *podState) reconcileSpec(pod *v1.Pod, now time.Time) {
	ps.pod = pod
	byName := map[string]*v1.Container{}
	for i := range pod.Spec.Containers {
		byName[pod.Spec.Containers[i].Name] = &pod.Spec.Containers[i]
	}
	for _, c := range ps.ctrs {
		if c.init {
			continue
		}
		spec, ok := byName[c.spec.Name]
		if !ok {
			continue
		}
		b := containerBehavior(pod, spec)
		if c.state == csCreating { // not created yet: it starts as the pod now says
			c.spec, c.beh = *spec, b
			continue
		}
		if spec.Image == c.spec.Image && b == c.beh {
			c.spec = *spec
			continue
		}
		if b.kind == bEvicted && spec.Image == c.spec.Image {
			// Set on a running pod (kubectl annotate): the node evicts it now.
			c.beh = b
			if ps.evictAt.IsZero() || now.Before(ps.evictAt) {
				ps.evictAt = now
			}
			continue
		}
		if c.state == csRunning {
			ps.rec.Eventf(containerRef(pod, c.spec.Name, false), v1.EventTypeNormal, "Killing", "Container %s definition changed, will be restarted", c.spec.Name)
			t := mtime(now)
			c.last = &v1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: mtime(c.startedAt), FinishedAt: t, ContainerID: c.containerID}
		}
		c.stopServing()
		c.endRun()
		c.spec = *spec
		c.beh = b
		c.start(ps, now, c.state != csErrImagePull && c.state != csImagePullBackOff && c.state != csPulling)
	}
}
