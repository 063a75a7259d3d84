// Command routing measures, side by side on one local cluster and one model, what the pool
// route changes: the same workload (multi-turn chats sharing long system prompts, plus requests
// over LoRA adapters) sent through the test gateway, first with the operator's route to the
// model's Service (--inference-pool=off), then to its InferencePool and endpoint picker. For
// each: the prefix-cache hit rate the model servers report, time to a one-token answer p50 and
// p99 through the gateway, requests per pod. The picker runs as the operator creates it: a
// Deployment whose pod the local kubelet runs from EPP_BIN (make epp).
//
//	go run ./test/routing                       # make bench-routing: the documented size
//	go run ./test/routing -chats 8 -turns 3     # what CI runs (TestRoutingSmall)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// Config is one side-by-side measurement.
type Config struct {
	Replicas int
	Workload Workload
	Timeout  time.Duration // per route
	Log      io.Writer
}

// Result is one route's figures.
type Result struct {
	Route          string         `json:"route"`
	Requests       int            `json:"requests"`
	Errors         int            `json:"errors"`
	FirstError     string         `json:"firstError,omitempty"`
	PrefixHitRate  float64        `json:"prefixHitRate"`
	ChatP50Ms      float64        `json:"chatP50Ms"`
	ChatP99Ms      float64        `json:"chatP99Ms"`
	LoRAP50Ms      float64        `json:"loraP50Ms"`
	LoRAP99Ms      float64        `json:"loraP99Ms"`
	ServerTTFTMs   float64        `json:"serverTTFTMeanMs"`
	PerPod         map[string]int `json:"perPod"`
	WallSeconds    float64        `json:"wallSeconds"`
	SwitchSeconds  float64        `json:"switchSeconds,omitempty"`
	RoutedReason   string         `json:"routedReason"`
	RoutedMessage  string         `json:"routedMessage"`
	ServerRequests float64        `json:"serverRequests"`
	// AdapterMisses are adapter requests a pod answered 404: it had not loaded the adapter.
	AdapterMisses int `json:"adapterMisses"`
	// QueueSpreadMean and QueueSpreadMax are the spread of requests in the servers (running
	// plus waiting, the most loaded pod's less the least loaded's), sampled every 100 ms.
	QueueSpreadMean float64 `json:"queueSpreadMean"`
	QueueSpreadMax  float64 `json:"queueSpreadMax"`
}

func main() {
	c := Config{Log: os.Stderr}
	flag.IntVar(&c.Replicas, "replicas", 4, "model pods")
	flag.IntVar(&c.Workload.Systems, "systems", 4, "distinct long system prompts the chats share")
	flag.IntVar(&c.Workload.SystemWords, "system-words", 600, "words (tokens, to the fake server's tokenizer) per system prompt")
	flag.IntVar(&c.Workload.Chats, "chats", 32, "chats")
	flag.IntVar(&c.Workload.Turns, "turns", 6, "turns per chat")
	flag.IntVar(&c.Workload.LoRARequests, "lora-requests", 64, "requests over the adapters")
	adapters := flag.Int("adapters", 8, "LoRA adapters of the model")
	flag.IntVar(&c.Workload.Workers, "workers", 8, "requests in flight")
	flag.DurationVar(&c.Timeout, "timeout", 5*time.Minute, "bound on each route's run")
	out := flag.String("out", "routing.json", "where to write the JSON results")
	flag.Parse()
	for i := 0; i < *adapters; i++ {
		c.Workload.Adapters = append(c.Workload.Adapters, fmt.Sprintf("lora-%d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rs, err := Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "routing:", err)
		os.Exit(1)
	}
	PrintTable(os.Stdout, rs)
	b, _ := json.MarshalIndent(rs, "", "  ")
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

const (
	namespace = "routing"
	modelName = "m"
	// baseModel is the model's served name, which the chats ask for.
	baseModel = "Qwen/Qwen3-8B"
	parent    = "gateway-system/public"
)

// Run sets up the cluster, the gateway and the operator, and measures both routes.
func Run(ctx context.Context, c Config) ([]Result, error) {
	eppBin, gwBin := os.Getenv(operator.EPPBinEnv), os.Getenv(operator.GatewayBinEnv)
	if eppBin == "" || gwBin == "" {
		return nil, fmt.Errorf("%s and %s must name the picker and the gateway (make epp)", operator.EPPBinEnv, operator.GatewayBinEnv)
	}
	e, err := testenv.Setup(ctx, cluster.Options{ExtraArgs: []string{"--exec-image=" + operator.EPPImageRepository + "=" + eppBin}}, "routing")
	if err != nil {
		return nil, err
	}
	defer e.Teardown(os.Getenv("ROUTING_KEEP") != "")
	for _, f := range []string{filepath.Join(operator.EPPManifests(eppBin), "crd")} {
		if _, _, err := e.Cluster.Kubectl(ctx, "apply", "-f", f); err != nil {
			return nil, err
		}
	}
	if _, _, err := e.Cluster.Kubectl(ctx, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		return nil, err
	}
	if _, _, err := e.Cluster.Kubectl(ctx, "create", "namespace", namespace); err != nil {
		return nil, err
	}
	gwAddr, _, stopGW, err := operator.StartGateway(ctx, gwBin, filepath.Join(e.Dir, "gateway.log"), "--kubeconfig="+e.Cluster.KubeconfigPath(), "--gateway="+parent)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stopGW() }()

	var results []Result
	for _, mode := range []string{"off", "auto"} {
		op, err := e.StartOperator(ctx, "operator-"+mode+".log", "--gateway-parent="+parent, "--inference-pool="+mode, "--resync=5s", "-v=2")
		if err != nil {
			return nil, err
		}
		if mode == "off" {
			if err := createModel(ctx, e, c); err != nil {
				return nil, err
			}
		}
		want := reconcile.ReasonServiceRoute
		if mode == "auto" {
			want = reconcile.ReasonPoolRoute
		}
		switched := time.Now()
		routed, err := waitRouted(ctx, e, want, 3*time.Minute)
		if err != nil {
			_ = op.Stop(30 * time.Second)
			return nil, err
		}
		fmt.Fprintf(c.Log, "routing: %s after %.1fs: %s\n", routed.Reason, time.Since(switched).Seconds(), routed.Message)
		w := c.Workload
		w.Seed = int64(len(results) + 1) // fresh prompts: nothing the first run cached helps the second
		r, err := measure(ctx, e, gwAddr, w, c.Timeout)
		if err != nil {
			_ = op.Stop(30 * time.Second)
			return nil, err
		}
		r.Route, r.RoutedReason, r.RoutedMessage = routeName(mode), routed.Reason, routed.Message
		if mode == "auto" {
			r.SwitchSeconds = time.Since(switched).Seconds() - r.WallSeconds
		}
		results = append(results, r)
		PrintTable(c.Log, results)
		if err := op.Stop(30 * time.Second); err != nil {
			return nil, err
		}
	}
	return results, nil
}

func routeName(mode string) string {
	if mode == "off" {
		return "Service"
	}
	return "InferencePool"
}

// createModel makes the model: c.Replicas pods, the workload's adapters, a gateway route.
func createModel(ctx context.Context, e *testenv.Env, c Config) error {
	var adapters []string
	for _, a := range c.Workload.Adapters {
		adapters = append(adapters, fmt.Sprintf(`{"name":%q,"storageURI":"hf://org/%s"}`, a, a))
	}
	ext := fmt.Sprintf(`{"gateway":{"route":"/%s/%s"},"adapters":[%s]}`, namespace, modelName, strings.Join(adapters, ","))
	manifest := fmt.Sprintf(`apiVersion: %s
kind: %s
metadata:
  name: %s
  namespace: %s
  annotations: {%s: '%s'}
spec: {model: %s, replicas: %d, gpusPerReplica: 1}
`, crd.GroupVersion, crd.Kind, modelName, namespace, crd.AnnotationV1beta1Spec, ext, baseModel, c.Replicas)
	f := filepath.Join(e.Dir, "model.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		return err
	}
	_, _, err := e.Cluster.Kubectl(ctx, "apply", "-f", f)
	return err
}

// waitRouted waits for the model to serve every replica with its Routed condition True for want.
func waitRouted(ctx context.Context, e *testenv.Env, want string, timeout time.Duration) (metav1.Condition, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		i, err := e.ISVC(namespace, modelName)
		if err == nil {
			for _, c := range i.Status.Conditions {
				if c.Type == crd.ConditionRouted && c.Status == metav1.ConditionTrue && c.Reason == want && i.Status.ReadyReplicas == i.Spec.Replicas {
					return c, nil
				}
				if c.Type == crd.ConditionRouted {
					last = c.Reason + ": " + c.Message
				}
			}
		}
		if time.Now().After(deadline) {
			return metav1.Condition{}, fmt.Errorf("Routed %s not reached in %s; last %q", want, timeout, last)
		}
		select {
		case <-ctx.Done():
			return metav1.Condition{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// measure sends the workload through the gateway and reads the model servers' counters
// before and after.
func measure(ctx context.Context, e *testenv.Env, gwAddr string, w Workload, timeout time.Duration) (Result, error) {
	before, err := serverCounters(ctx, e)
	if err != nil {
		return Result{}, err
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{}).DialContext, MaxIdleConnsPerHost: w.Workers}}
	pods, err := podAddrs(ctx, e)
	if err != nil {
		return Result{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	queues := make(chan imbalance, 1)
	go func() { queues <- sampleQueues(runCtx, pods) }()
	start := time.Now()
	samples := w.run(runCtx, client, "http://"+gwAddr+"/"+namespace+"/"+modelName+"/v1/completions", baseModel)
	wall := time.Since(start)
	cancel()
	q := <-queues
	after, err := serverCounters(ctx, e)
	if err != nil {
		return Result{}, err
	}
	r := Result{Requests: len(samples), PerPod: map[string]int{}, WallSeconds: wall.Seconds(), QueueSpreadMean: q.mean, QueueSpreadMax: q.max}
	for _, s := range samples {
		if s.kind == "lora" && strings.Contains(s.err, "does not exist") {
			r.AdapterMisses++
		}
		if s.err != "" {
			if r.Errors++; r.FirstError == "" {
				r.FirstError = s.err
			}
			continue
		}
		r.PerPod[s.endpoint]++
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	chat, lora := latencies(samples, "chat"), latencies(samples, "lora")
	r.ChatP50Ms, r.ChatP99Ms = ms(quantile(chat, 0.5)), ms(quantile(chat, 0.99))
	r.LoRAP50Ms, r.LoRAP99Ms = ms(quantile(lora, 0.5)), ms(quantile(lora, 0.99))
	if q := after.queries - before.queries; q > 0 {
		r.PrefixHitRate = (after.hits - before.hits) / q
	}
	if n := after.ttftCount - before.ttftCount; n > 0 {
		r.ServerTTFTMs = 1000 * (after.ttftSum - before.ttftSum) / n
	}
	r.ServerRequests = after.ttftCount - before.ttftCount
	return r, nil
}

// podAddrs are the model's pods' metrics addresses.
func podAddrs(ctx context.Context, e *testenv.Env) ([]string, error) {
	pods, err := e.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + modelName})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			out = append(out, net.JoinHostPort(p.Status.PodIP, fmt.Sprint(reconcile.Port)))
		}
	}
	return out, nil
}

type imbalance struct{ mean, max float64 }

// sampleQueues reads each pod's vllm:num_requests_running and _waiting every 100 ms until ctx
// ends, and returns the mean and the largest spread between the busiest and the idlest pod.
func sampleQueues(ctx context.Context, pods []string) imbalance {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var sum float64
	var n int
	var out imbalance
	for {
		select {
		case <-ctx.Done():
			if n > 0 {
				out.mean = sum / float64(n)
			}
			return out
		case <-tick.C:
		}
		lo, hi, ok := 0.0, 0.0, true
		for i, addr := range pods {
			fams, err := operator.Scrape(client, "http://"+addr+"/metrics")
			if err != nil {
				ok = false
				break
			}
			v := operator.SumCounter(fams, "vllm:num_requests_running", nil) + operator.SumCounter(fams, "vllm:num_requests_waiting", nil)
			if i == 0 || v < lo {
				lo = v
			}
			if i == 0 || v > hi {
				hi = v
			}
		}
		if ok && len(pods) > 0 {
			sum += hi - lo
			n++
			out.max = max(out.max, hi-lo)
		}
	}
}

type counters struct{ hits, queries, ttftSum, ttftCount float64 }

// serverCounters sums the model's pods' prefix-cache and time-to-first-token counters, read
// from each pod's /metrics at its IP, as Prometheus would.
func serverCounters(ctx context.Context, e *testenv.Env) (counters, error) {
	var c counters
	pods, err := e.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + modelName})
	if err != nil {
		return c, err
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		fams, err := operator.Scrape(client, "http://"+net.JoinHostPort(p.Status.PodIP, fmt.Sprint(reconcile.Port))+"/metrics")
		if err != nil {
			return c, fmt.Errorf("pod %s metrics: %w", p.Name, err)
		}
		c.hits += operator.SumCounter(fams, "vllm:prefix_cache_hits_total", nil)
		c.queries += operator.SumCounter(fams, "vllm:prefix_cache_queries_total", nil)
		if f, ok := fams["vllm:time_to_first_token_seconds"]; ok {
			for _, m := range f.GetMetric() {
				h := m.GetHistogram()
				c.ttftSum += h.GetSampleSum()
				c.ttftCount += float64(h.GetSampleCount())
			}
		}
	}
	return c, nil
}

// PrintTable prints the routes side by side.
func PrintTable(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "route\trequests\terrors\tadapter misses\tprefix hit rate\tchat p50 ms\tchat p99 ms\tLoRA p50 ms\tLoRA p99 ms\tserver TTFT mean ms\tqueue spread mean/max\trequests per pod")
	for _, r := range rs {
		var pods []string
		for _, ep := range sortedKeys(r.PerPod) {
			pods = append(pods, fmt.Sprintf("%s:%d", ep, r.PerPod[ep]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f%%\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f/%.0f\t%s\n", r.Route, r.Requests, r.Errors, r.AdapterMisses, 100*r.PrefixHitRate,
			r.ChatP50Ms, r.ChatP99Ms, r.LoRAP50Ms, r.LoRAP99Ms, r.ServerTTFTMs, r.QueueSpreadMean, r.QueueSpreadMax, strings.Join(pods, " "))
	}
	tw.Flush()
}

func sortedKeys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
