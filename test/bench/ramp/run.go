// One run on a fresh local cluster: the operator and the metrics adapter as the manifests
// install them, one autoscaled model per signal side by side, the same ramp sent to each, their
// pods sampled throughout.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/bench/host"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// Config sizes one run.
type Config struct {
	Schedule  Schedule
	Objective time.Duration // of the p95 time to first token
	Window    time.Duration // the p95's sliding window
	// MinReplicas, MaxReplicas and ScaleDownDelay are every model's autoscaling bounds.
	MinReplicas, MaxReplicas int
	ScaleDownDelay           time.Duration
	// LoadTime is a new pod's weights load (the local cluster's --vllm-load-time): a replica is
	// useful only that long after the HPA asked for it.
	LoadTime time.Duration
	// MaxInFlight bounds each model's requests in flight.
	MaxInFlight int
	Signals     []string // the rows of signals to run
	Log         io.Writer
	Keep        bool
}

const (
	servedModel = "Qwen/Qwen3-0.6B"
	benchNS     = "ramp"
	// The pods' engine: 16 requests at once in a KV cache of 64 usable blocks of 16 tokens
	// (--num-gpu-blocks-override counts one null block); a request of promptWords prompt
	// tokens and maxTokens to generate holds 4 blocks from its start (vLLM v1's
	// kv_cache_manager allocates them as the fake does), so 16 running fill the cache.
	maxNumSeqs  = 16
	gpuBlocks   = 65
	promptWords = 32
	maxTokens   = 32
	gpusPerPod  = 1
	samplePer   = 2 * time.Second
)

// The TTFT row's objective per pod and its window.
const ttftTarget, ttftWindow = 400, 30

// signal is one row: the model's name and its spec.autoscaling beyond the bounds.
type signal struct {
	name   string
	target string
	auto   map[string]any
}

// signals are the signals the ramp compares, each on a model of its own; a new signal is one
// row. The TTFT row's target sits under the ramp's 500 ms objective by more than the HPA's
// tolerance (it acts only above 1.1 x target), over the ramp's own 30 s window.
var signals = []signal{
	{name: "queue", target: fmt.Sprintf("%d waiting a pod, the default", reconcile.TargetQueueLength), auto: map[string]any{"metric": crd.AutoscalingMetricQueue}},
	{name: "kvcache", target: fmt.Sprintf("%d%% KV use a pod, the default", crd.DefaultTargetKVCacheUsagePercent), auto: map[string]any{"metric": crd.AutoscalingMetricKVCache}},
	{name: "ttft", target: fmt.Sprintf("p95 %d ms a pod over %d s", ttftTarget, ttftWindow), auto: map[string]any{"metric": crd.AutoscalingMetricTTFT,
		"targetTTFTMilliseconds": ttftTarget, "ttftWindowSeconds": ttftWindow}},
}

func logf(c Config, format string, args ...any) {
	fmt.Fprintf(c.Log, "%s bench-ramp: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// Run does one ramp on a fresh cluster.
func Run(ctx context.Context, c Config) (Result, error) {
	r := Result{Machine: host.Machine(), Concurrent: true, Schedule: c.Schedule, ObjectiveMs: ms(c.Objective),
		WindowS: c.Window.Seconds(), Model: servedModel, Load: loadEach10s(c.Schedule)}
	var rows []signal
	for _, s := range signals {
		for _, want := range c.Signals {
			if s.name == want {
				rows = append(rows, s)
			}
		}
	}
	if len(rows) == 0 {
		return r, fmt.Errorf("no known signal in %v", c.Signals)
	}
	// The fake vLLM's prefill uncapped: its cap keeps other tests' long prompts fast, and here
	// would make a step of many prompts cheaper than its tokens.
	e, err := testenv.Setup(ctx, cluster.Options{ExtraArgs: []string{"--vllm-load-time=" + c.LoadTime.String(), "--vllm-prefill-max=-1ms"}}, "bench-ramp")
	if e != nil {
		defer e.Teardown(c.Keep)
	}
	if err != nil {
		return r, err
	}
	// No NetworkPolicies: the client calls the pods from this host.
	op, err := e.StartOperator(ctx, "operator.log", "--resync=10s", "--network-policies=false")
	if err != nil {
		return r, err
	}
	defer func() { _ = op.Stop(30 * time.Second) }()
	adapter, err := operator.InstallMetricsAdapter(ctx, e.Cluster, e.Dir, "--scrape-period=3s")
	if err != nil {
		return r, fmt.Errorf("metrics adapter: %w", err)
	}
	defer adapter.Kill()
	logf(c, "operator and metrics adapter ready; creating %d models", len(rows))
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	for _, s := range rows {
		if err := applyModel(ctx, e, c, s); err != nil {
			return r, err
		}
	}
	for _, s := range rows {
		if err := waitScaling(ctx, e, s.name); err != nil {
			return r, err
		}
	}
	logf(c, "every model ready and its HPA reading its metric; the ramp: %v", c.Schedule.levels())

	var startNs atomic.Int64 // when the load starts; the samples are timed from it
	startNs.Store(time.Now().Add(time.Hour).UnixNano())
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type model struct {
		sig     signal
		l       *loader
		mu      sync.Mutex
		samples []Sample
	}
	models := make([]*model, len(rows))
	var wg sync.WaitGroup
	var sampling sync.WaitGroup
	for i, s := range rows {
		m := &model{sig: s, l: newLoader(servedModel, promptWords, maxTokens, c.MaxInFlight)}
		models[i] = m
		sampling.Add(1)
		go func() {
			defer sampling.Done()
			tick := time.NewTicker(samplePer)
			defer tick.Stop()
			for {
				if x, ips, err := samplePods(runCtx, e, s.name); err == nil {
					x.At = time.Since(time.Unix(0, startNs.Load()))
					m.l.ips.Store(&ips)
					m.mu.Lock()
					m.samples = append(m.samples, x)
					m.mu.Unlock()
				}
				select {
				case <-runCtx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	// the samplers' first reading gives the loaders their pods
	if err := poll(ctx, time.Minute, "the first samples", func() error {
		for _, m := range models {
			if len(*m.l.ips.Load()) == 0 {
				return fmt.Errorf("%s: no ready pod", m.sig.name)
			}
		}
		return nil
	}); err != nil {
		return r, err
	}
	start := time.Now()
	startNs.Store(start.UnixNano())
	for _, m := range models {
		wg.Add(1)
		go func() { defer wg.Done(); m.l.run(runCtx, start, c.Schedule) }()
	}
	progress := time.NewTicker(30 * time.Second)
	defer progress.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			return r, ctx.Err()
		case <-progress.C:
			var parts []string
			for _, m := range models {
				var last Sample
				m.mu.Lock()
				if len(m.samples) > 0 {
					last = m.samples[len(m.samples)-1]
				}
				m.mu.Unlock()
				parts = append(parts, fmt.Sprintf("%s %d pods (%d ready), %d in flight", m.sig.name, last.Scheduled, last.Ready, m.l.inFlight.Load()))
			}
			logf(c, "%3.0fs, %.0f req/s: %s", time.Since(start).Seconds(), c.Schedule.Rate(time.Since(start)), strings.Join(parts, "; "))
		}
	}
	end := c.Schedule.Duration()
	cancel()
	sampling.Wait()
	for _, m := range models {
		var samples []Sample
		for _, x := range m.samples {
			if x.At >= 0 && x.At <= end {
				samples = append(samples, x)
			}
		}
		r.Signals = append(r.Signals, Summarize(m.sig.name, m.sig.target, m.l.requests(), samples, end, c.Window, c.Objective, gpusPerPod))
	}
	return r, nil
}

// applyModel creates the signal's model: spec.autoscaling through the v1beta1 fields'
// annotation on v1alpha1, as a v1beta1 client's object is stored.
func applyModel(ctx context.Context, e *testenv.Env, c Config, s signal) error {
	auto := map[string]any{"minReplicas": c.MinReplicas, "maxReplicas": c.MaxReplicas,
		"scaleDownDelaySeconds": int(c.ScaleDownDelay.Seconds())}
	for k, v := range s.auto {
		auto[k] = v
	}
	ext, err := json.Marshal(map[string]any{"autoscaling": auto, "replicasUnset": true,
		"engineArgs": []string{"--max-num-seqs", fmt.Sprint(maxNumSeqs), "--num-gpu-blocks-override", fmt.Sprint(gpuBlocks)}})
	if err != nil {
		return err
	}
	manifest := fmt.Sprintf(`apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: %s
  namespace: %s
  annotations: {%s: '%s'}
spec: {model: %s, replicas: %d, gpusPerReplica: %d}
`, s.name, benchNS, crd.AnnotationV1beta1Spec, ext, servedModel, c.MinReplicas, gpusPerPod)
	f := filepath.Join(e.Dir, s.name+".yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		return err
	}
	_, stderr, err := e.Cluster.Kubectl(ctx, "apply", "-f", f)
	if err != nil {
		return fmt.Errorf("apply %s: %w: %s", s.name, err, stderr)
	}
	return nil
}

// waitScaling waits for a ready pod of the model and for its HPA to read its metric.
func waitScaling(ctx context.Context, e *testenv.Env, name string) error {
	return poll(ctx, 3*time.Minute, name+" ready and its HPA reading", func() error {
		_, ips, err := samplePods(ctx, e, name)
		if err != nil {
			return err
		}
		if len(ips) == 0 {
			return errors.New("no ready pod")
		}
		h, err := e.Kube.AutoscalingV2().HorizontalPodAutoscalers(benchNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(h.Status.CurrentMetrics) == 0 {
			return fmt.Errorf("the HPA has no reading yet: %+v", h.Status.Conditions)
		}
		return nil
	})
}

// samplePods reads the model's pods: those holding GPUs (bound to a node, not ended), the
// ready ones and their IPs.
func samplePods(ctx context.Context, e *testenv.Env, name string) (Sample, []string, error) {
	var s Sample
	pods, err := e.Kube.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + name})
	if err != nil {
		return s, nil, err
	}
	var ips []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		s.Scheduled++
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && reconcile.PodReady(&p) {
			s.Ready++
			ips = append(ips, p.Status.PodIP)
		}
	}
	return s, ips, nil
}

// poll runs cond every 200 ms until it returns nil or timeout.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
