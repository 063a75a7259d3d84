// One run: Config, Result and Run (create, steady state, spec change, delete on a fresh cluster).

package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/inferenceservice-operator/controller/process/memlimit"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/memcg"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// Config sizes one run.
type Config struct {
	N, QPS, HoldPeriods int
	Resync              time.Duration
	Log                 io.Writer
	// SkipBaseline and SkipChange leave out the plain client's run and the spec change with
	// the delete: a run to measure memory and creation at a size where those take hours.
	SkipBaseline, SkipChange bool
	// ProfileDir, when set, gets the operator's heap profile at rest (heap-N.pprof).
	ProfileDir string
	// ClusterArgs go to the local cluster (e.g. --controller-qps=200 for 10,000 pods).
	ClusterArgs []string
	// Env (KEY=VALUE) is added to, and overrides, the env the shipped Deployment gives the
	// operator: to measure a GOGC or GOMEMLIMIT before shipping it.
	Env []string
	// OperatorArgs are added after the benchmark's own flags of the operator (a later flag
	// wins): to measure a flag's cost, e.g. --network-policies=false.
	OperatorArgs []string
	// Adapter runs the metrics adapter, with every pod serving vLLM's /metrics, and measures
	// what serving the HPAs' metric costs over the steady period.
	Adapter bool
	// ScrapePeriod is the adapter's --scrape-period (the manifest's 10s by default).
	ScrapePeriod time.Duration
	// System is the controller measured: SystemOperator (the default) or SystemKServe.
	System string
	// MemoryLimit, when set, runs the operator in a memory cgroup of that many bytes with
	// MEMORY_LIMIT set as the Deployment's downward API sets it: the kernel, not a reading,
	// says whether the run fits.
	MemoryLimit int64
	// Settle waits after the steady period for the runtime's own collection at rest (it
	// forces one every 2 minutes) and the scavenger, and reads the memory again.
	Settle bool
}

// Result is one run's figures.
type Result struct {
	System                   string  `json:"system,omitempty"`
	N                        int     `json:"n"`
	QPS                      int     `json:"qps"`
	WritesPerISVCCreate      float64 `json:"writes_per_isvc_create"`
	EventWritesPerISVCCreate float64 `json:"event_writes_per_isvc_create"`
	WritesPerSpecChange      float64 `json:"writes_per_spec_change"`
	EventWritesPerSpecChange float64 `json:"event_writes_per_spec_change"`
	WritesSteady             float64 `json:"writes_steady"`
	SteadySeconds            float64 `json:"steady_seconds"`
	ChildrenSeconds          float64 `json:"children_seconds"`
	ReadySeconds             float64 `json:"ready_seconds"`
	BaselineChildrenSeconds  float64 `json:"baseline_children_seconds"`
	BaselineReadySeconds     float64 `json:"baseline_ready_seconds"`
	RateVsBaseline           float64 `json:"rate_vs_baseline"`
	EventToActionP50Ms       float64 `json:"event_to_action_p50_ms"`
	EventToActionP99Ms       float64 `json:"event_to_action_p99_ms"`
	RSSMiB                   float64 `json:"rss_mib"`
	RSSAnonMiB               float64 `json:"rss_anon_mib"`
	// PeakRSSMiB is the most the resident set was at once (VmHWM), from start to rest.
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// With Settle: the memory after a collection at rest and the scavenger's return of it.
	SettledRSSMiB     float64 `json:"settled_rss_mib,omitempty"`
	SettledRSSAnonMiB float64 `json:"settled_rss_anon_mib,omitempty"`
	SettledHeapMiB    float64 `json:"settled_heap_mib,omitempty"`
	// With MemoryLimit: the limit, the most the cgroup was charged (anonymous memory and the
	// page cache it touched) and the kernel's OOM kills (the run fails on one).
	MemoryLimitMiB float64 `json:"memory_limit_mib,omitempty"`
	CgroupPeakMiB  float64 `json:"cgroup_peak_mib,omitempty"`
	OOMKills       int64   `json:"oom_kills,omitempty"`
	// WorkingSetMiB is the group's working set at the end (settled, with Settle), as the
	// kubelet and kubectl top count a container's memory.
	WorkingSetMiB float64 `json:"working_set_mib,omitempty"`
	// CPUSeconds is the operator's CPU time from its start to the end of the steady period
	// (creation, convergence, resyncs), GCs the collections in that time: what memory
	// settings cost.
	CPUSeconds           float64 `json:"cpu_seconds"`
	GCs                  float64 `json:"gcs"`
	HeapMiB              float64 `json:"heap_mib"`
	CachedObjects        int     `json:"cached_objects"`
	BytesPerCachedObject float64 `json:"bytes_per_cached_object"`
	ReconcileP50Ms       float64 `json:"reconcile_p50_ms"`
	ReconcileP99Ms       float64 `json:"reconcile_p99_ms"`
	DeleteSeconds        float64 `json:"delete_seconds"`
	// The metrics adapter's cost over the steady period (with -adapter): CPU seconds a minute,
	// the scrape period achieved, failed reads, and its memory at the end.
	AdapterCPUSecondsPerMin float64 `json:"adapter_cpu_seconds_per_min,omitempty"`
	AdapterPeriodSeconds    float64 `json:"adapter_period_seconds,omitempty"`
	AdapterReadErrors       float64 `json:"adapter_read_errors,omitempty"`
	AdapterRSSMiB           float64 `json:"adapter_rss_mib,omitempty"`
	AdapterRSSAnonMiB       float64 `json:"adapter_rss_anon_mib,omitempty"`
}

func logf(c Config, format string, args ...any) {
	sys := ""
	if c.System != "" && c.System != SystemOperator {
		sys = " " + c.System
	}
	fmt.Fprintf(c.Log, "%s bench%s n=%d: %s\n", time.Now().Format("15:04:05"), sys, c.N, fmt.Sprintf(format, args...))
}

// Run does one measurement on a fresh cluster.
func Run(ctx context.Context, c Config) (_ Result, err error) {
	r := Result{System: c.System, N: c.N, QPS: c.QPS}
	sys, err := systemNamed(c.System)
	if err != nil {
		return r, err
	}
	if sys.name != SystemOperator && (c.Adapter || c.ProfileDir != "" || len(c.Env) > 0 || len(c.OperatorArgs) > 0 || c.MemoryLimit > 0) {
		return r, fmt.Errorf("-adapter, -profile, -env, -operator-args and -memory-limit measure the operator only")
	}
	// The operator's exit mid-run (an OOM kill under -memory-limit) ends the run with its cause.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() {
		if err != nil && context.Cause(ctx) != nil && context.Cause(ctx) != ctx.Err() {
			err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
		}
	}()
	// Pods need room for the baseline's and the operator's: small requests, 250 per fake node.
	// The benchmark measures the control plane's work, so pods follow the kubelet's schedule
	// model instead of running model servers (their cost is in test/localcluster/README.md).
	// With the adapter, the pods serve: it reads each one's /metrics.
	clusterArgs := []string{"--node-pods=250", "--kubelet-serve=false"}
	if c.Adapter {
		clusterArgs = clusterArgs[:1]
	}
	// 250 GPUs a node with the adapter: its models run a GPU each, as vLLM needs one to start.
	gpus := 0
	if c.Adapter {
		gpus = 250
	}
	e, err := testenv.Setup(ctx, cluster.Options{Nodes: c.N/100 + 1, GPUsPerNode: gpus, ExtraArgs: append(clusterArgs, c.ClusterArgs...)}, "bench")
	if e != nil {
		// A failed run keeps its directory: the operator's log says why.
		defer func() {
			if err != nil {
				logf(c, "kept %s", e.Dir)
			}
			e.Teardown(err != nil)
		}()
	}
	if err != nil {
		return r, err
	}
	cfg := e.Cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 500, 1000 // the bench's own client must not be the bottleneck
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return r, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return r, err
	}

	// Baseline first: a plain client creates the same children at the same QPS, with the
	// operator's own identity, so the API server's priority and fairness treat both alike
	// (the admin is exempt from it; the ServiceAccount is not).
	saCfg, err := clientcmd.BuildConfigFromFlags("", e.SAKubeconfig)
	if err != nil {
		return r, err
	}
	if !c.SkipBaseline {
		if err := baseline(ctx, c, saCfg, kube, &r); err != nil {
			return r, fmt.Errorf("baseline: %w", err)
		}
	}

	var ctl process
	var heapProfile func(path string) error
	var group *memcg.Group
	if sys.name == SystemKServe {
		k, err := startKServe(ctx, e, c)
		if err != nil {
			return r, fmt.Errorf("kserve: %w", err)
		}
		defer k.Stop(30 * time.Second)
		ctl = k
	} else {
		if c.MemoryLimit > 0 {
			if group, err = memcg.New(fmt.Sprintf("bench-operator-%d", os.Getpid()), c.MemoryLimit); err != nil {
				return r, err
			}
			defer func() {
				if err := group.Close(); err != nil {
					logf(c, "%v", err)
				}
			}()
			r.MemoryLimitMiB = float64(c.MemoryLimit) / (1 << 20)
		}
		op, err := startOperator(ctx, c, e, group)
		if err != nil {
			if group != nil {
				if kills, kerr := group.OOMKills(); kerr == nil && kills > 0 {
					err = fmt.Errorf("%w: OOM-killed under %s", err, resource.NewQuantity(c.MemoryLimit, resource.BinarySI))
				}
			}
			return r, err
		}
		stopped := make(chan struct{})
		defer func() { close(stopped); op.Stop(30 * time.Second) }()
		go func() {
			select {
			case <-op.Exited():
				cause := fmt.Errorf("the operator exited mid-run; see %s", filepath.Join(e.Dir, "operator.log"))
				if group != nil {
					kills, kerr := group.OOMKills()
					if kerr != nil {
						kills = -1 // unknown: the kernel does not count them
					}
					cause = fmt.Errorf("the operator exited mid-run, OOM kills under %s: %d; see %s",
						resource.NewQuantity(c.MemoryLimit, resource.BinarySI), kills, filepath.Join(e.Dir, "operator.log"))
				}
				cancel(cause)
			case <-stopped:
			}
		}()
		ctl, heapProfile = op, op.HeapProfile
		if c.ProfileDir != "" {
			go profilePeaks(op, filepath.Join(c.ProfileDir, fmt.Sprintf("heap-%d-peak.pprof", c.N)), stopped)
		}
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	var adapter *adapterRun
	if c.Adapter {
		period := c.ScrapePeriod
		if period == 0 {
			period = 10 * time.Second
		}
		if adapter, err = startAdapter(ctx, e, period); err != nil {
			return r, fmt.Errorf("metrics adapter: %w", err)
		}
		defer adapter.Kill()
	}

	// Watch isvcs and Deployments to time each isvc's first action from the same vantage.
	w := newWatcher(c.N, sys)
	stop, err := w.start(ctx, kube, dyn, "bench")
	if err != nil {
		return r, err
	}
	defer stop()

	w0, err := ctl.Writes()
	if err != nil {
		return r, err
	}
	by0 := writesByCode(ctl)
	logf(c, "creating %d InferenceServices", c.N)
	start := time.Now()
	if err := forEach(ctx, c.N, 16, func(i int) error {
		_, err := dyn.Resource(sys.resource).Namespace("bench").Create(ctx, sys.object(i, c.Adapter), metav1.CreateOptions{})
		return err
	}); err != nil {
		return r, err
	}
	if err := w.waitChildren(ctx, 30*time.Minute); err != nil {
		return r, err
	}
	r.ChildrenSeconds = time.Since(start).Seconds()
	logf(c, "all children in %.1fs", r.ChildrenSeconds)
	if err := w.waitReady(ctx, 30*time.Minute); err != nil {
		return r, err
	}
	r.ReadySeconds = time.Since(start).Seconds()
	logf(c, "all Ready in %.1fs", r.ReadySeconds)
	r.EventToActionP50Ms, r.EventToActionP99Ms = w.latencies()
	if r.ReadySeconds > 0 && r.BaselineReadySeconds > 0 {
		r.RateVsBaseline = r.BaselineReadySeconds / r.ReadySeconds
	}

	w1, err := settle(ctx, ctl, c.Resync)
	if err != nil {
		return r, err
	}
	r.WritesPerISVCCreate = (w1 - w0) / float64(c.N)
	if by := writesByCode(ctl); len(by) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(by)) {
			if n := by[k] - by0[k]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %.0f", k, n))
			}
		}
		logf(c, "writes on the way to Ready, by method and code: %s", strings.Join(parts, ", "))
	}
	if p50, p99, most := w.readyLag(); most > 0 {
		logf(c, "isvc Ready after its Deployment's replicas all ready: p50 %.0f ms, p99 %.0f ms, max %.0f ms", p50, p99, most)
	}
	for _, seq := range w.statusSequences(6) {
		logf(c, "statuses on the way to Ready: %s", seq)
	}
	ev, err := eventWrites(ctx, kube, "bench", sys)
	if err != nil {
		return r, err
	}
	r.EventWritesPerISVCCreate = ev / float64(c.N)

	// Hold steady for several resync periods.
	holdFor := time.Duration(c.HoldPeriods) * c.Resync
	logf(c, "holding steady for %s", holdFor)
	if adapter != nil {
		if err := adapter.begin(); err != nil {
			return r, err
		}
	}
	timer := time.NewTimer(holdFor)
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-timer.C:
	}
	w2, err := ctl.Writes()
	if err != nil {
		return r, err
	}
	r.WritesSteady, r.SteadySeconds = w2-w1, holdFor.Seconds()
	if adapter != nil {
		if err := adapter.end(&r); err != nil {
			return r, err
		}
		logf(c, "metrics adapter over the steady period: %.2f CPU s/min, a pass every %.1fs, %v failed reads, RSS %.1f MiB (anonymous %.1f)",
			r.AdapterCPUSecondsPerMin, r.AdapterPeriodSeconds, r.AdapterReadErrors, r.AdapterRSSMiB, r.AdapterRSSAnonMiB)
	}
	if rss, err := ctl.RSSBytes(); err == nil {
		r.RSSMiB = float64(rss) / (1 << 20)
	}
	fams, err := ctl.Scrape()
	if err != nil {
		return r, err
	}
	heap := operator.SumCounter(fams, "go_memstats_heap_inuse_bytes", nil)
	mib := func(name string) float64 { return operator.SumCounter(fams, name, nil) / (1 << 20) }
	anon, _ := ctl.RSSAnonBytes()
	r.RSSAnonMiB = float64(anon) / (1 << 20)
	logf(c, "at rest: RSS %.1f MiB (anonymous %.1f); Go: sys %.1f, heap inuse %.1f idle %.1f released %.1f, next GC %.1f, stacks %.1f, GC metadata %.1f, spans %.1f, other %.1f MiB",
		r.RSSMiB, float64(anon)/(1<<20), mib("go_memstats_sys_bytes"), mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_heap_idle_bytes"),
		mib("go_memstats_heap_released_bytes"), mib("go_memstats_next_gc_bytes"), mib("go_memstats_stack_inuse_bytes"),
		mib("go_memstats_gc_sys_bytes"), mib("go_memstats_mspan_inuse_bytes"), mib("go_memstats_other_sys_bytes")+mib("go_memstats_buck_hash_sys_bytes"))
	r.HeapMiB = heap / (1 << 20)
	r.CPUSeconds = operator.SumCounter(fams, "process_cpu_seconds_total", nil)
	r.GCs = operator.SumCounter(fams, "go_gc_duration_seconds", nil)
	logf(c, "%s CPU %.1f s, %v GCs since its start", sys.name, r.CPUSeconds, r.GCs)
	if peak, err := ctl.PeakRSSBytes(); err == nil {
		r.PeakRSSMiB = float64(peak) / (1 << 20)
	}
	if group != nil {
		peak, err := group.Peak()
		if err != nil {
			return r, err
		}
		r.CgroupPeakMiB = float64(peak) / (1 << 20)
		if r.OOMKills, err = group.OOMKills(); err != nil {
			return r, err
		}
		logf(c, "under a %.0f MiB memory cgroup: peak charge %.1f MiB (page cache included), %d OOM kills",
			r.MemoryLimitMiB, r.CgroupPeakMiB, r.OOMKills)
	}
	logf(c, "peak RSS %.1f MiB", r.PeakRSSMiB)
	if c.Settle {
		rss, anon, h, err := settledMemory(ctx, ctl)
		if err != nil {
			return r, fmt.Errorf("settling: %w", err)
		}
		r.SettledRSSMiB, r.SettledRSSAnonMiB, r.SettledHeapMiB = float64(rss)/(1<<20), float64(anon)/(1<<20), h/(1<<20)
		logf(c, "settled after a collection at rest: RSS %.1f MiB (anonymous %.1f), heap in use %.1f MiB",
			r.SettledRSSMiB, r.SettledRSSAnonMiB, r.SettledHeapMiB)
	}
	if group != nil {
		ws, err := group.WorkingSet()
		if err != nil {
			return r, err
		}
		r.WorkingSetMiB = float64(ws) / (1 << 20)
		logf(c, "the cgroup's working set (kubectl top's figure): %.1f MiB", r.WorkingSetMiB)
	}
	// The isvc and its Deployment, ReplicaSet, Service, HPA and Pod.
	r.CachedObjects = c.N * 6
	r.BytesPerCachedObject = heap / float64(r.CachedObjects)
	r.ReconcileP50Ms = histogramQuantile(fams, "controller_runtime_reconcile_time_seconds", sys.reconciles, 0.5) * 1000
	r.ReconcileP99Ms = histogramQuantile(fams, "controller_runtime_reconcile_time_seconds", sys.reconciles, 0.99) * 1000
	if c.ProfileDir != "" {
		path := filepath.Join(c.ProfileDir, fmt.Sprintf("heap-%d.pprof", c.N))
		if err := os.MkdirAll(c.ProfileDir, 0o755); err != nil {
			return r, err
		}
		if err := heapProfile(path); err != nil {
			return r, err
		}
		logf(c, "heap profile at rest: %s", path)
	}
	if c.SkipChange {
		return r, nil
	}

	// Change every spec once: a new model revision, the same image.
	logf(c, "changing every spec")
	var genMu sync.Mutex
	wantGen := map[string]int64{}
	if err := forEach(ctx, c.N, 16, func(i int) error {
		u, err := dyn.Resource(sys.resource).Namespace("bench").Patch(ctx, fmt.Sprintf("m-%05d", i), sys.changeType,
			sys.change, metav1.PatchOptions{})
		if err == nil {
			genMu.Lock()
			wantGen[u.GetName()] = u.GetGeneration()
			genMu.Unlock()
		}
		return err
	}); err != nil {
		return r, err
	}
	if err := w.waitModel(ctx, kube, "bench/model-v2", 30*time.Minute); err != nil {
		return r, err
	}
	// The change is done when every isvc reports it: Ready for the new generation.
	if err := w.waitReadyAt(ctx, wantGen, 30*time.Minute); err != nil {
		return r, err
	}
	w3, err := settle(ctx, ctl, c.Resync)
	if err != nil {
		return r, err
	}
	r.WritesPerSpecChange = (w3 - w2) / float64(c.N)
	ev2, err := eventWrites(ctx, kube, "bench", sys)
	if err != nil {
		return r, err
	}
	r.EventWritesPerSpecChange = (ev2 - ev) / float64(c.N)

	logf(c, "deleting")
	del := time.Now()
	// One DELETE per isvc: a collection delete of thousands can outlive the server's timeout.
	if err := forEach(ctx, c.N, 16, func(i int) error {
		err := dyn.Resource(sys.resource).Namespace("bench").Delete(ctx, fmt.Sprintf("m-%05d", i), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		return r, err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		l, err := dyn.Resource(sys.resource).Namespace("bench").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil && len(l.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("isvcs not deleted in 10m")
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
	r.DeleteSeconds = time.Since(del).Seconds()
	return r, nil
}

// startOperator runs the operator as deployed (the shipped Deployment's env, then -env) with
// the ServiceAccount's RBAC, at the benchmark's QPS, watching the bench namespace.
func startOperator(ctx context.Context, c Config, e *testenv.Env, group *memcg.Group) (*operator.Process, error) {
	args := []string{"--kubeconfig=" + e.SAKubeconfig,
		fmt.Sprintf("--kube-api-qps=%d", c.QPS), fmt.Sprintf("--kube-api-burst=%d", 2*c.QPS),
		"--resync=" + c.Resync.String(), "--namespaces=bench"}
	if c.ProfileDir != "" {
		args = append(args, "--pprof")
	}
	if len(c.OperatorArgs) > 0 {
		args = append(args, c.OperatorArgs...)
		logf(c, "operator args (the bench's, then -operator-args): %v", args[1:])
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	env, err := operator.ManifestEnv(root)
	if err != nil {
		return nil, err
	}
	if c.MemoryLimit > 0 {
		// What the Deployment's resourceFieldRef gives the container under a limit.
		env = mergeEnv(env, []string{fmt.Sprintf("%s=%d", memlimit.MemoryLimitEnv, c.MemoryLimit)})
	}
	env = mergeEnv(env, c.Env)
	logf(c, "operator env (the manifest's, then -env): %v", env)
	op, err := operator.StartEnvIn(ctx, group, env, e.Bin, filepath.Join(e.Dir, "operator.log"), args...)
	if err != nil {
		return nil, err
	}
	if err := op.WaitReady(ctx, time.Minute); err != nil {
		op.Stop(30 * time.Second)
		return nil, err
	}
	return op, nil
}

// isvcObject is the benchmark's model i; serving, it asks a GPU (vLLM needs one to start).
func isvcObject(i int, serving bool) *unstructured.Unstructured {
	gpus := int64(0)
	if serving {
		gpus = 1
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": fmt.Sprintf("m-%05d", i), "namespace": "bench"},
		"spec": map[string]any{
			"model": "bench/model", "replicas": int64(1), "gpusPerReplica": gpus,
			"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}},
		},
	}}
}

// forEach runs f(0..n-1) on workers goroutines and returns one of f's errors, else ctx's.
func forEach(ctx context.Context, n, workers int, f func(i int) error) error {
	idx := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := f(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case idx <- i:
		case <-ctx.Done():
		}
	}
	close(idx)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

// mergeEnv appends extra to env, an extra KEY replacing env's.
func mergeEnv(env, extra []string) []string {
	out := make([]string, 0, len(env)+len(extra))
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if !slices.ContainsFunc(extra, func(x string) bool { return strings.HasPrefix(x, k+"=") }) {
			out = append(out, e)
		}
	}
	return append(out, extra...)
}

// writesByCode is the process's write requests so far by "METHOD code" (rest_client_requests_total);
// nil when it cannot be scraped.
func writesByCode(p process) map[string]float64 {
	fams, err := p.Scrape()
	if err != nil {
		return nil
	}
	f, ok := fams["rest_client_requests_total"]
	if !ok {
		return nil
	}
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch method := strings.ToUpper(labels["method"]); method {
		case "POST", "PUT", "PATCH", "DELETE":
			out[method+" "+labels["code"]] += m.GetCounter().GetValue()
		}
	}
	return out
}
