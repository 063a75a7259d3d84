package main

// A fake kubelet: it plays the part of the kubelet for every pod bound to a
// fake node. See README.md for the behavior conventions.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

const (
	fakeRegistry       = "kubelet.fake/"
	behaviorAnnotation = "kubelet.fake/behavior"
)

type kubeletConfig struct {
	crashBackoffInitial time.Duration // first back-off after a crash or failed pull
	crashBackoffMax     time.Duration // cap of the doubling back-off
	crashRun            time.Duration // how long a crashing container runs
	terminatedFor       time.Duration // how long the terminated state shows before CrashLoopBackOff
}

type kubelet struct {
	client      kubernetes.Interface
	cfg         kubeletConfig
	nodes       map[string]int
	broadcaster record.EventBroadcaster
	recorders   map[string]record.EventRecorder

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	wg      sync.WaitGroup
}

type podWorker struct {
	cancel  context.CancelFunc
	updates chan *v1.Pod
}

func newKubelet(client kubernetes.Interface, cfg kubeletConfig, nodeCount int) *kubelet {
	k := &kubelet{
		client:    client,
		cfg:       cfg,
		nodes:     map[string]int{},
		recorders: map[string]record.EventRecorder{},
		workers:   map[types.UID]*podWorker{},
	}
	k.broadcaster = record.NewBroadcaster()
	k.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	for i := 0; i < nodeCount; i++ {
		n := nodeName(i)
		k.nodes[n] = i
		k.recorders[n] = k.broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: n})
	}
	return k
}

func (k *kubelet) run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName!=" }))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.sync(ctx, obj) },
		UpdateFunc: func(_, obj any) { k.sync(ctx, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				k.stopWorker(pod.UID)
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
		k.broadcaster.Shutdown()
	}()
	return nil
}

func (k *kubelet) sync(ctx context.Context, obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if _, ours := k.nodes[pod.Spec.NodeName]; !ours {
		return
	}
	if pod.DeletionTimestamp != nil {
		k.stopWorker(pod.UID)
		k.wg.Go(func() { k.deletePod(ctx, pod) })
		return
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if w, ok := k.workers[pod.UID]; ok {
		select { // keep only the newest pod in the channel
		case <-w.updates:
		default:
		}
		w.updates <- pod
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &podWorker{cancel: cancel, updates: make(chan *v1.Pod, 1)}
	k.workers[pod.UID] = w
	k.wg.Go(func() { k.runPod(wctx, pod, w.updates) })
}

func (k *kubelet) stopWorker(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if w, ok := k.workers[uid]; ok {
		w.cancel()
		delete(k.workers, uid)
	}
}

// deletePod finishes a graceful deletion the way a kubelet does once the
// containers are stopped: delete with grace period 0.
func (k *kubelet) deletePod(ctx context.Context, pod *v1.Pod) {
	rec := k.recorders[pod.Spec.NodeName]
	for _, c := range pod.Spec.Containers {
		rec.Eventf(containerRef(pod, c.Name, false), v1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
	}
	zero := int64(0)
	uid := pod.UID
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		klog.ErrorS(err, "fake kubelet: delete failed", "pod", klog.KObj(pod))
	}
}

// ---- behaviors ----

type behaviorKind string

const (
	bReady       behaviorKind = "ready"
	bNeverReady  behaviorKind = "never-ready"
	bSlowReady   behaviorKind = "slow-ready"
	bCrashLoop   behaviorKind = "crashloop"
	bOOMKilled   behaviorKind = "oomkilled"
	bErrImgPull  behaviorKind = "errimagepull"
	bEvicted     behaviorKind = "evicted"
	bUnspecified behaviorKind = ""
)

type behavior struct {
	kind  behaviorKind
	delay time.Duration // slow-ready
}

// parseBehavior parses "never-ready", "slow-ready-5", "crashloop", ...
func parseBehavior(s string) (behavior, bool) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch behaviorKind(s) {
	case bReady, "running", "":
		return behavior{kind: bReady}, s != ""
	case bNeverReady, bCrashLoop, bOOMKilled, bErrImgPull, bEvicted:
		return behavior{kind: behaviorKind(s)}, true
	}
	if rest, ok := strings.CutPrefix(s, "slow-ready-"); ok {
		rest = strings.TrimSuffix(rest, "s")
		if n, err := strconv.ParseFloat(rest, 64); err == nil && n >= 0 {
			return behavior{kind: bSlowReady, delay: time.Duration(n * float64(time.Second))}, true
		}
	}
	return behavior{kind: bReady}, false
}

// imageBehavior reads the reserved image name kubelet.fake/<behavior>[:tag][@digest].
func imageBehavior(image string) behavior {
	name, ok := strings.CutPrefix(image, fakeRegistry)
	if !ok {
		return behavior{kind: bReady}
	}
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i >= 0 {
		name = name[:i]
	}
	b, _ := parseBehavior(name)
	return b
}

// containerBehavior: annotation kubelet.fake/behavior.<container> wins over
// kubelet.fake/behavior, which wins over the image name.
func containerBehavior(pod *v1.Pod, c *v1.Container) behavior {
	if v, ok := pod.Annotations[behaviorAnnotation+"."+c.Name]; ok {
		if b, ok := parseBehavior(v); ok {
			return b
		}
	}
	if v, ok := pod.Annotations[behaviorAnnotation]; ok {
		if b, ok := parseBehavior(v); ok {
			return b
		}
	}
	return imageBehavior(c.Image)
}

// ---- per-container state machine ----

type cstate int

const (
	csRunning cstate = iota
	csTerminated
	csCrashBackOff
	csErrImagePull
	csImagePullBackOff
	csCompleted // init containers
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
}

func (c *ctr) hasReadiness() bool { return c.spec.ReadinessProbe != nil }

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

type podState struct {
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

func podIP(pod *v1.Pod, nodeIdx int) string {
	h := fnv.New32a()
	h.Write([]byte(pod.UID))
	v := h.Sum32()
	return fmt.Sprintf("127.%d.%d.%d", 10+nodeIdx%200, (v>>8)&0xff, v&0xfe|1)
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

func newPodState(k *kubelet, pod *v1.Pod, now time.Time) *podState {
	idx := k.nodes[pod.Spec.NodeName]
	ps := &podState{k: k, pod: pod, rec: k.recorders[pod.Spec.NodeName], t0: now, host: nodeIP(idx)}
	if pod.Status.StartTime != nil {
		ps.t0 = pod.Status.StartTime.Time
	}
	ps.ip = podIP(pod, idx)
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
	for _, c := range ps.ctrs {
		prev := findStatus(pod, c.spec.Name, c.init)
		if prev != nil && prev.Image == c.spec.Image {
			c.restarts = prev.RestartCount
			c.last = prev.LastTerminationState.Terminated
			if prev.State.Running != nil && prev.ContainerID != "" {
				// Resume a container that was running before a restart of the fake kubelet.
				c.containerID = prev.ContainerID
				c.restore(ps, prev.State.Running.StartedAt.Time, now)
				continue
			}
			if c.init && prev.State.Terminated != nil && prev.State.Terminated.ExitCode == 0 {
				c.state = csCompleted
				c.term = prev.State.Terminated
				c.containerID = prev.ContainerID
				continue
			}
		}
		if c.init && !c.sidecar {
			c.complete(ps, now)
		} else {
			c.start(ps, now, false)
		}
	}
	for _, c := range ps.ctrs {
		if c.beh.kind == bEvicted && c.state == csRunning {
			// Memory grows until the node runs short: it ran a moment, then is evicted.
			ps.evictAt = c.startedAt.Add(k.cfg.crashRun)
		}
	}
	return ps
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
	if c.spec.ImagePullPolicy == v1.PullAlways {
		ps.rec.Eventf(ref, v1.EventTypeNormal, "Pulling", "Pulling image %q", normalizedImage(img))
		ps.rec.Eventf(ref, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in 312ms (312ms including waiting). Image size: 4212134 bytes.", normalizedImage(img))
	} else {
		ps.rec.Eventf(ref, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", img)
	}
}

// restore resumes a running container after a restart of the fake kubelet.
func (c *ctr) restore(ps *podState, startedAt, now time.Time) {
	c.state = csRunning
	c.startedAt = startedAt
	c.setRunningSchedule(ps, now)
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
	c.imageEvents(ps)
	ref := containerRef(ps.pod, c.spec.Name, c.init)
	ps.rec.Event(ref, v1.EventTypeNormal, "Created", "Container created")
	ps.rec.Event(ref, v1.EventTypeNormal, "Started", "Container started")
	c.state = csRunning
	c.startedAt = now
	c.containerID = newContainerID(ps.pod, c.spec.Name, c.restarts)
	c.setRunningSchedule(ps, now)
}

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

func (c *ctr) complete(ps *podState, now time.Time) {
	c.imageEvents(ps)
	ref := containerRef(ps.pod, c.spec.Name, true)
	ps.rec.Event(ref, v1.EventTypeNormal, "Created", "Container created")
	ps.rec.Event(ref, v1.EventTypeNormal, "Started", "Container started")
	c.containerID = newContainerID(ps.pod, c.spec.Name, 0)
	c.state = csCompleted
	t := mtime(now)
	c.term = &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: t, FinishedAt: t, ContainerID: c.containerID}
}

func (c *ctr) crash(ps *podState, now time.Time) {
	t := &v1.ContainerStateTerminated{
		ExitCode:    1,
		Reason:      "Error",
		StartedAt:   mtime(c.startedAt),
		FinishedAt:  mtime(now),
		ContainerID: c.containerID,
	}
	if c.beh.kind == bOOMKilled {
		t.ExitCode = 137
		t.Reason = "OOMKilled"
	}
	c.term = t
	c.state = csTerminated
	c.readyAt = time.Time{}
	c.nextProbe = time.Time{}
	if ps.pod.Spec.RestartPolicy == v1.RestartPolicyNever {
		c.next = time.Time{}
		return
	}
	c.backoff = c.backoffFor(ps.k.cfg)
	c.next = now.Add(min(ps.k.cfg.terminatedFor, c.backoff))
}

func (c *ctr) pullErrMessage() string {
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
		case csErrImagePull:
			c.state = csImagePullBackOff
			c.next = c.pullErrAt.Add(c.backoff)
			ps.rec.Eventf(ref, v1.EventTypeNormal, "BackOff", "Back-off pulling image %q", normalizedImage(c.spec.Image))
			ps.rec.Event(ref, v1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
		case csImagePullBackOff:
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
	pending, allStoppedNever, running := false, true, false
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
		case csErrImagePull, csImagePullBackOff:
			pending = true
			allStoppedNever = false
		case csRunning:
			running = true
			allStoppedNever = false
		case csCrashBackOff:
			allStoppedNever = false
		}
	}
	_ = running
	switch {
	case ps.evicted != "":
		st.Phase, st.Reason, st.Message = v1.PodFailed, "Evicted", ps.evicted
	case len(incompleteInit) > 0 || pending:
		st.Phase = v1.PodPending
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
		c.spec = *spec
		c.beh = b
		c.start(ps, now, c.state != csErrImagePull && c.state != csImagePullBackOff)
	}
}

func (k *kubelet) runPod(ctx context.Context, pod *v1.Pod, updates <-chan *v1.Pod) {
	defer k.stopWorker(pod.UID)
	ps := newPodState(k, pod, time.Now())
	cur := pod
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		now := time.Now()
		for _, c := range ps.ctrs {
			c.advance(ps, now)
		}
		if !ps.evictAt.IsZero() && ps.evicted == "" && !now.Before(ps.evictAt) {
			ps.evict(now)
		}
		want := ps.render(cur, now)
		wake := ps.nextWake(now)
		if !apiequality.Semantic.DeepEqual(want, cur.Status) {
			updated, err := k.writeStatus(ctx, ps, now)
			if apierrors.IsNotFound(err) || ctx.Err() != nil {
				return
			}
			if err != nil {
				klog.ErrorS(err, "fake kubelet: status update failed", "pod", klog.KObj(pod))
				if retry := now.Add(500 * time.Millisecond); wake.IsZero() || retry.Before(wake) {
					wake = retry
				}
			} else {
				cur = updated
			}
		}
		if cur.Status.Phase == v1.PodFailed || cur.Status.Phase == v1.PodSucceeded {
			return
		}
		if !wake.IsZero() {
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(max(time.Until(wake), 10*time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case p := <-updates:
			if p.ResourceVersion != cur.ResourceVersion {
				if p.Generation != cur.Generation || !sameBehaviors(p, cur) {
					ps.reconcileSpec(p, time.Now())
				}
				cur = p
			}
		}
	}
}

func sameBehaviors(a, b *v1.Pod) bool {
	pick := func(p *v1.Pod) []string {
		var out []string
		for k, v := range p.Annotations {
			if strings.HasPrefix(k, behaviorAnnotation) {
				out = append(out, k+"="+v)
			}
		}
		sort.Strings(out)
		return out
	}
	return strings.Join(pick(a), ",") == strings.Join(pick(b), ",")
}

func (k *kubelet) writeStatus(ctx context.Context, ps *podState, now time.Time) (*v1.Pod, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		latest, err := k.client.CoreV1().Pods(ps.pod.Namespace).Get(ctx, ps.pod.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if latest.UID != ps.pod.UID {
			return nil, apierrors.NewNotFound(v1.Resource("pods"), ps.pod.Name)
		}
		if latest.DeletionTimestamp != nil {
			return latest, nil
		}
		latest.Status = ps.render(latest, now)
		out, err := k.client.CoreV1().Pods(latest.Namespace).UpdateStatus(ctx, latest, metav1.UpdateOptions{})
		if err == nil {
			return out, nil
		}
		lastErr = err
		if !apierrors.IsConflict(err) {
			return nil, err
		}
	}
	return nil, lastErr
}

// mtime is a metav1.Time at the API's one-second precision, so a rendered
// status compares equal to the one read back.
func mtime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
