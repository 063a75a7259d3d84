// The fake kubelet's I/O: the pod informer, one worker per pod writing its status, and deletions.

package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
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
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
	"github.com/example/inferenceservice-operator/test/localcluster/vllm"
)

type kubeletConfig struct {
	serve               bool          // serving images run the fake model server (--kubelet-serve)
	server              vllm.Config   // what every fake model server shares
	netpol              *netPolicies  // NetworkPolicy enforced (server.Ingress); nil: none
	crashBackoffInitial time.Duration // first back-off after a crash or failed pull
	crashBackoffMax     time.Duration // cap of the doubling back-off
	crashRun            time.Duration // how long a crashing container runs
	terminatedFor       time.Duration // how long the terminated state shows before CrashLoopBackOff
	mountTimeout        time.Duration // how long a pod waits for its volumes before warning; 0: mount.go's default
	// dnsServer is the cluster DNS (clusterdns.go) ClusterFirst pods resolve through; "": none,
	// no name resolves.
	dnsServer string
	// execImages run as real processes (exec.go, --exec-image); their kubeconfig names the
	// API server apiServer and the CA in caFile, and lives with their working directories
	// under execDir.
	execImages execImages
	apiServer  string
	caFile     string
	execDir    string
	// serviceNet: exec images' processes run in their pod's mounts (servicenet.go); nil: not.
	serviceNet *serviceNetwork
	// networkPolicy: the fake model servers' ports enforce NetworkPolicy (netpol.go).
	networkPolicy bool
}

type kubelet struct {
	client      kubernetes.Interface
	cfg         kubeletConfig
	nodes       map[string]int
	broadcaster record.EventBroadcaster
	recorders   map[string]record.EventRecorder
	// services feeds the service links of containers' environments, as the kubelet's
	// Service informer does; read only after it synced.
	services corelisters.ServiceLister
	ips      *ipAllocator
	probers  probers
	// pods is the informer's cache, which the log endpoint reads a pod's status from.
	pods corelisters.PodLister

	logsMu  sync.Mutex
	logs    map[string]*logRun     // container ID -> that run's log
	podLogs map[types.UID][]string // container IDs with logs, per pod, to drop on deletion

	// faults is each node's GPU fault (gpufault.go), from the node informer.
	faultsMu sync.Mutex
	faults   map[string]proc.GPUFault
	// parts are the nodes cut from the control plane (partition.go), from the node informer.
	parts *partitions
	// images is what each node holds and how long it pulls what it lacks (pull.go).
	images *nodeImages
	// procs are the exec containers' live processes (exec.go).
	procs *execProcs

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	// terminating are the deleted pods whose deletePod runs, so the updates that come while
	// their preStop hooks sleep start no second one.
	terminating map[types.UID]bool
	wg          sync.WaitGroup
}

type podWorker struct {
	cancel  context.CancelFunc
	updates chan *v1.Pod
	node    string
	faults  chan struct{} // the node's GPU fault changed
}

func newKubelet(client kubernetes.Interface, cfg kubeletConfig, nodeCount int, ips *ipAllocator) *kubelet {
	k := &kubelet{
		client:      client,
		cfg:         cfg,
		nodes:       map[string]int{},
		recorders:   map[string]record.EventRecorder{},
		workers:     map[types.UID]*podWorker{},
		terminating: map[types.UID]bool{},
		ips:         ips,
		probers:     newProbers(),
		logs:        map[string]*logRun{},
		podLogs:     map[types.UID][]string{},
		faults:      map[string]proc.GPUFault{},
		parts:       newPartitions(),
		images:      newNodeImages(),
		procs:       newExecProcs(),
	}
	if k.cfg.server.Ray == nil {
		k.cfg.server.Ray = vllm.NewRayCluster() // every fake node's pods are one network
	}
	if k.cfg.execDir == "" && len(k.cfg.execImages) > 0 {
		k.cfg.execDir = filepath.Join(os.TempDir(), "localcluster-exec-"+strconv.Itoa(os.Getpid()))
	}
	if k.cfg.server.Weights == nil {
		// What each volume holds: a restarted container finds what its pod's emptyDir or a PVC
		// kept, and only that (the container's own filesystem starts empty).
		k.cfg.server.Weights = hfmodel.NewWeightsCache()
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
	// Services first: a container started before they were read would miss its service
	// links (the kubelet refuses to build an environment until then). Only serving
	// containers have an environment, so only a serving kubelet pays for the cache.
	svcFactory := informers.NewSharedInformerFactory(k.client, 0)
	if k.cfg.serve {
		k.services = svcFactory.Core().V1().Services().Lister()
		svcFactory.Start(ctx.Done())
		svcFactory.WaitForCacheSync(ctx.Done())
	}
	// Nodes' GPU faults and pull times before pods, so a container starting on a sick node
	// fails and one on a slow node pulls.
	if err := k.watchNodes(ctx, k.followPartition, k.followGPUFault, k.followPullTime); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName!=" }))
	inf := factory.Core().V1().Pods().Informer()
	k.pods = factory.Core().V1().Pods().Lister()
	if in := k.cfg.netpol; in != nil {
		if err := in.usePods(inf, k.procs); err != nil {
			return err
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.sync(ctx, obj) },
		UpdateFunc: func(_, obj any) { k.sync(ctx, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				k.stopWorker(pod.UID)
				k.mu.Lock()
				delete(k.terminating, pod.UID)
				k.mu.Unlock()
				k.ips.release(pod.UID)
				k.dropLogs(pod.UID)
				k.wg.Go(func() {
					k.stopPod(pod) // deleted without a grace period (--force): still SIGTERM first
					k.dropExecDir(pod.UID)
				})
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
		svcFactory.Shutdown()
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
	if k.parts.isCut(pod.Spec.NodeName) { // no update reaches a node cut off; followPartition syncs it on return
		return
	}
	if pod.DeletionTimestamp != nil {
		k.mu.Lock()
		started := k.terminating[pod.UID]
		k.terminating[pod.UID] = true
		k.mu.Unlock()
		if !started {
			k.wg.Go(func() { k.deletePod(ctx, pod) })
		}
		return
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return
	}
	// Reserved here, in the informer's order, so pods resumed after a restart get their
	// addresses back before a new pod can take one.
	k.ips.assign(pod.UID, pod.Status.PodIP)
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
	w := &podWorker{cancel: cancel, updates: make(chan *v1.Pod, 1), node: pod.Spec.NodeName, faults: make(chan struct{}, 1)}
	k.workers[pod.UID] = w
	k.wg.Go(func() { k.runPod(wctx, pod, w.updates, w.faults) })
}

func (k *kubelet) stopWorker(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if w, ok := k.workers[uid]; ok {
		w.cancel()
		delete(k.workers, uid)
	}
	k.cfg.server.Weights.ForgetPrefix("emptyDir:" + string(uid) + "/") // the pod's emptyDirs go with it
}

// stopSecondsAnnotation on a pod is how long its containers take to exit after SIGTERM (a job
// writing a checkpoint, a server draining), bounded by the deletion's grace period as a
// kubelet bounds it; without it they exit at once.
const stopSecondsAnnotation = "kubelet.fake/stop-seconds"

// stopDelay is how long a deleted pod's containers take to exit once stopped.
func stopDelay(pod *v1.Pod) time.Duration {
	n, err := strconv.Atoi(pod.Annotations[stopSecondsAnnotation])
	if err != nil || n <= 0 {
		return 0
	}
	d := time.Duration(n) * time.Second
	if g := pod.DeletionGracePeriodSeconds; g != nil && time.Duration(*g)*time.Second < d {
		d = time.Duration(*g) * time.Second
	}
	return d
}

// preStopSleep is how long a deleted pod's containers keep running, and serving, before they
// are stopped: the longest of their preStop sleep hooks (lifecycle.preStop.sleep.seconds),
// bounded by the deletion's grace period. The kubelet runs a container's preStop hook before
// SIGTERM and no longer than the grace period (kuberuntime_container.go killContainer,
// executePreStopHook; lifecycle/handlers.go runSleepHandler), the containers in parallel.
func preStopSleep(pod *v1.Pod) time.Duration {
	var d time.Duration
	for _, c := range pod.Spec.Containers {
		if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
			d = max(d, time.Duration(l.PreStop.Sleep.Seconds)*time.Second)
		}
	}
	return min(d, podGrace(pod))
}

// minStopGrace is what the kubelet leaves a container after its preStop hook, however much
// of the grace period the hook took (kuberuntime_manager.go minimumGracePeriodInSeconds).
const minStopGrace = 2 * time.Second

// deletePod finishes a graceful deletion the way a kubelet does: the preStop hooks' sleep
// while the containers serve on, then the containers stopped within what is left of the grace
// period, then delete with grace period 0.
func (k *kubelet) deletePod(ctx context.Context, pod *v1.Pod) {
	pre := preStopSleep(pod)
	if !sleepCtx(ctx, pre) {
		return
	}
	k.stopWorker(pod.UID)
	stop := stopDelay(pod)
	if pre > 0 {
		stop = min(stop, max(podGrace(pod)-pre, minStopGrace))
	}
	if !sleepCtx(ctx, stop) {
		return
	}
	rec := k.recorders[pod.Spec.NodeName]
	for _, c := range pod.Spec.Containers {
		rec.Eventf(containerRef(pod, c.Name, false), v1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
	}
	k.stopPod(pod) // exec containers' processes end before the pod goes
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

// sleepCtx waits d, false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (k *kubelet) runPod(ctx context.Context, pod *v1.Pod, updates <-chan *v1.Pod, faults <-chan struct{}) {
	defer k.stopWorker(pod.UID)
	ps := newPodState(ctx, k, pod, time.Now())
	defer ps.stopAll()
	ps.applyGPUFault() // containers resumed after a restart, on a node that fell sick meanwhile
	cur := pod
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		now := time.Now()
		ps.advanceMount(now)
		for _, c := range ps.ctrs {
			c.advance(ps, now)
		}
		if !ps.evictAt.IsZero() && ps.evicted == "" && !now.Before(ps.evictAt) {
			ps.evict(now)
		}
		want := ps.status(cur, now)
		wake := ps.nextWake(now)
		switch {
		case apiequality.Semantic.DeepEqual(want, cur.Status):
			// Nothing to write.
		case k.parts.isCut(pod.Spec.NodeName):
			// Cut from the API server: the status waits for the link, as a kubelet's status
			// manager keeps it until it can write.
			if retry := now.Add(time.Second); wake.IsZero() || retry.Before(wake) {
				wake = retry
			}
		default:
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
		case m := <-ps.msgs:
			ps.handle(m, time.Now())
		case <-faults:
			ps.applyGPUFault()
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
		latest.Status = ps.status(latest, now)
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
