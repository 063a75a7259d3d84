// Volume mount failures: a PersistentVolume annotated kubelet.fake/mount-error never mounts,
// so its pods wait in ContainerCreating with the kubelet's FailedMount warnings, retried until
// the volume mounts. Also the overlay of the ContainerCreating states on the rendered status.

package main

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mountErrorAnnotation on a PersistentVolume makes its SetUp fail with the annotation's value
// as the mount's error (e.g. mount.nfs's output); removing it lets the next retry mount.
const mountErrorAnnotation = "kubelet.fake/mount-error"

const (
	// The volume manager's reconciler retries a failed SetUp on an exponential back-off from
	// 500ms; the kubelet caps it at 2m2s, this fake at 10s so a test sees the retries.
	mountRetryInitial = 500 * time.Millisecond
	mountRetryMax     = 10 * time.Second
	// defaultMountTimeout is how long a pod's sync waits for its volumes before the
	// "Unable to attach or mount volumes" warning; the kubelet's is 2m3s.
	defaultMountTimeout = 30 * time.Second
)

// mountWait is the state of a pod whose volumes are not mounted yet: no sandbox, no container.
type mountWait struct {
	waiting   bool
	since     time.Time // the current sync's wait began
	next      time.Time // the next SetUp retry
	backoff   time.Duration
	unmounted []string // pod volume names whose SetUp failed last
}

func (cfg kubeletConfig) mountTimeoutOrDefault() time.Duration {
	if cfg.mountTimeout > 0 {
		return cfg.mountTimeout
	}
	return defaultMountTimeout
}

// setUpVolumes tries to mount the pod's claims, as the volume manager reads each claim and its
// bound volume from the API. It returns the pod volumes whose SetUp failed, each failure a
// FailedMount warning on the pod. A claim or volume it cannot read is left mounted: the
// scheduler does not bind a pod whose claim is missing or unbound.
func (ps *podState) setUpVolumes() []string {
	var failed []string
	for _, vol := range ps.pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := ps.k.client.CoreV1().PersistentVolumeClaims(ps.pod.Namespace).Get(ps.ctx, vol.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName == "" {
			continue
		}
		pv, err := ps.k.client.CoreV1().PersistentVolumes().Get(ps.ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			continue
		}
		msg, ok := pv.Annotations[mountErrorAnnotation]
		if !ok {
			continue
		}
		ps.rec.Eventf(podRef(ps.pod), v1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed for volume %q : %s", pv.Name, msg)
		failed = append(failed, vol.Name)
	}
	sort.Strings(failed)
	return failed
}

func podRef(pod *v1.Pod) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion}
}

// mountOrWait mounts the pod's volumes before its first start. true: mounted, start the
// containers; false: they wait ContainerCreating and advanceMount retries.
func (ps *podState) mountOrWait(now time.Time) bool {
	failed := ps.setUpVolumes()
	if len(failed) == 0 {
		return true
	}
	ps.mount = mountWait{waiting: true, since: now, backoff: mountRetryInitial, next: now.Add(mountRetryInitial), unmounted: failed}
	for _, c := range ps.ctrs {
		c.state = csCreating
	}
	return false
}

// advanceMount retries SetUp when due, warns when the pod's sync gave up waiting (it waits
// again at once, as the pod worker syncs the pod again), and starts the pod once mounted.
func (ps *podState) advanceMount(now time.Time) {
	m := &ps.mount
	if !m.waiting {
		return
	}
	if deadline := m.since.Add(ps.k.cfg.mountTimeoutOrDefault()); !now.Before(deadline) {
		ps.rec.Eventf(podRef(ps.pod), v1.EventTypeWarning, "FailedMount",
			"Unable to attach or mount volumes: unmounted volumes=%v, unattached volumes=[], failed to process volumes=[]: context deadline exceeded", m.unmounted)
		m.since = now
	}
	if now.Before(m.next) {
		return
	}
	if m.unmounted = ps.setUpVolumes(); len(m.unmounted) > 0 {
		m.backoff = min(2*m.backoff, mountRetryMax)
		m.next = now.Add(m.backoff)
		return
	}
	ps.mount = mountWait{}
	ps.startContainers(now)
}

// mountWake is when the mount wait next acts; zero: not waiting.
func (ps *podState) mountWake() time.Time {
	if !ps.mount.waiting {
		return time.Time{}
	}
	return minTime(ps.mount.next, ps.mount.since.Add(ps.k.cfg.mountTimeoutOrDefault()))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// status is the pod status to write: render's, with the containers not created yet waiting
// ContainerCreating (PodInitializing where the pod has init containers, as the kubelet's
// default waiting reason), the pod Pending, and, while volumes do not mount, no sandbox: no
// pod IP, PodReadyToStartContainers False.
func (ps *podState) status(base *v1.Pod, now time.Time) v1.PodStatus {
	st := ps.render(base, now)
	reason := "ContainerCreating"
	if len(ps.pod.Spec.InitContainers) > 0 {
		reason = "PodInitializing"
	}
	creating := false
	for _, c := range ps.ctrs {
		if c.state != csPulling && c.state != csCreating {
			continue
		}
		list := st.ContainerStatuses
		if c.init {
			list = st.InitContainerStatuses
		}
		for i := range list {
			if list[i].Name == c.spec.Name {
				list[i].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}
				list[i].ImageID, list[i].ContainerID = "", ""
			}
		}
		creating = creating || c.last == nil
	}
	if creating && ps.evicted == "" {
		st.Phase = v1.PodPending
	}
	if !ps.mount.waiting {
		return st
	}
	st.PodIP, st.PodIPs = "", nil
	for i := range st.Conditions {
		cd := &st.Conditions[i]
		if cd.Type != v1.PodReadyToStartContainers || cd.Status == v1.ConditionFalse {
			continue
		}
		cd.Status, cd.LastTransitionTime = v1.ConditionFalse, mtime(now)
		for _, prev := range base.Status.Conditions {
			if prev.Type == cd.Type && prev.Status == cd.Status {
				cd.LastTransitionTime = prev.LastTransitionTime
			}
		}
	}
	return st
}

// startContainers starts what a new pod runs once its volumes are mounted: init containers
// complete, the others start.
func (ps *podState) startContainers(now time.Time) {
	for _, c := range ps.ctrs {
		if c.state != csCreating {
			continue
		}
		if c.init && !c.sidecar {
			c.complete(ps, now)
		} else {
			c.start(ps, now, false)
		}
	}
	ps.scheduleEviction()
}

// downloadSpeedAnnotation on a PersistentVolume is the megabytes per second downloads onto it
// are fetched at, in place of the kubelet's --vllm-download-mb-per-s.
const downloadSpeedAnnotation = "kubelet.fake/download-mb-per-s"

// volumeLink is what the pod's claims' PersistentVolumes impose on downloads: the link speed
// (downloadSpeedAnnotation, 0 for the kubelet's own) and the capacity of the volume mounted at
// HF_HOME (0: unbounded, as an emptyDir without a limit).
func (ps *podState) volumeLink(ctx context.Context, c *v1.Container, env map[string]string) (mbps float64, capacity int64) {
	home := env["HF_HOME"]
	if home == "" {
		home = "/root/.cache/huggingface"
	}
	for _, vol := range ps.pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := ps.k.client.CoreV1().PersistentVolumeClaims(ps.pod.Namespace).Get(ctx, vol.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName == "" {
			continue
		}
		pv, err := ps.k.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if v, err := strconv.ParseFloat(pv.Annotations[downloadSpeedAnnotation], 64); err == nil && v > 0 && mbps == 0 {
			mbps = v
		}
		for _, m := range c.VolumeMounts {
			if m.Name == vol.Name && strings.TrimSuffix(m.MountPath, "/") == strings.TrimSuffix(home, "/") {
				if q, ok := pv.Spec.Capacity[v1.ResourceStorage]; ok {
					capacity = q.Value()
				}
			}
		}
	}
	return mbps, capacity
}
