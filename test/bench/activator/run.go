// One run on a fresh local cluster: the operator and the activator as the manifests install it
// (its binary run by the kubelet for its image), a model awake behind it and models at zero,
// then each measurement in turn.

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/activator"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/bench/host"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// Config sizes one run; every phase is bounded by its count and by Timeout.
type Config struct {
	// Pairs of non-streamed completions, one direct and one through the activator back to back.
	Pairs int
	// StreamPairs of streamed completions of StreamTokens tokens each.
	StreamPairs, StreamTokens int
	// Concurrency and RPSDuration size the throughput runs of each path: one per concurrency.
	Concurrency []int
	RPSDuration time.Duration
	// Held are the numbers of requests held at once for the memory rows (after none).
	Held []int
	// Cold are the numbers of requests sent at once to a model at zero, one model each.
	Cold []int
	// Timeout bounds each phase.
	Timeout time.Duration
	Log     io.Writer
	// Keep leaves the cluster's directory for a look after the run.
	Keep bool
}

const (
	// servedModel is what the models serve (the fake vLLM's start-up for it is short).
	servedModel = "Qwen/Qwen3-0.6B"
	benchNS     = "bench"
	warmModel   = "warm"
	// perHoldModel and perHoldNS are the activator's shipped per-model and per-namespace bounds
	// (manifests/activator: --max-held, --max-held-per-namespace): the held requests are spread
	// over enough models and namespaces to reach the total.
	perHoldModel = 100
	perHoldNS    = 250
	// heldBudgetMiB is what budget.go allows 1,000 held requests (~40 KiB each).
	heldBudgetMiB = 40
)

func logf(c Config, format string, args ...any) {
	fmt.Fprintf(c.Log, "%s bench-activator: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// Run does one measurement on a fresh cluster.
func Run(ctx context.Context, c Config) (Result, error) {
	r := Result{Machine: host.Machine()}
	dir, err := os.MkdirTemp("", "isvc-bench-activator-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	bin, err := operator.BuildActivator(ctx, dir)
	if err != nil {
		return r, fmt.Errorf("activator: %w", err)
	}
	e, err := testenv.Setup(ctx, cluster.Options{ExtraArgs: []string{"--exec-image=" + operator.ActivatorImage + "=" + bin}}, "bench-activator")
	if e != nil {
		defer e.Teardown(c.Keep)
	}
	if err != nil {
		return r, err
	}
	// No NetworkPolicies: the benchmark calls the model's pod from this host, beside the
	// activator (the local kubelet would refuse it, as a cluster enforcing them would).
	op, err := e.StartOperator(ctx, "operator.log", "--resync=10s", "--network-policies=false")
	if err != nil {
		return r, err
	}
	defer func() { _ = op.Stop(30 * time.Second) }()
	logf(c, "operator ready; installing the activator as manifests/activator ships it")
	if err := operator.InstallActivator(ctx, e.Cluster, dir, 1); err != nil {
		return r, fmt.Errorf("install the activator: %w", err)
	}
	act, err := startedActivator(ctx, e, bin)
	if err != nil {
		return r, err
	}
	logf(c, "activator pid %d at %s, memory limit %.0f MiB", act.pid, act.ip, act.limitMiB)

	// The models: one awake behind the activator (a long idle window), one per cold-start row
	// (a minute's window: they go to zero while the others are measured), and models that can
	// never start (16 GPUs a pod, 8 a node) to hold requests against, spread past the per-model
	// and per-namespace bounds, plus one namespace more to find the total's.
	if err := createNamespaces(ctx, e, append([]string{benchNS}, holdNamespaces(c)...)...); err != nil {
		return r, err
	}
	if err := applyModel(ctx, e, benchNS, warmModel, 1, 3600); err != nil {
		return r, err
	}
	for _, k := range c.Cold {
		if err := applyModel(ctx, e, benchNS, coldModel(k), 1, crd.MinIdleSeconds); err != nil {
			return r, err
		}
	}
	for _, s := range holdSlots(c) {
		if err := applyModel(ctx, e, s.ns, s.name, 16, 0); err != nil {
			return r, err
		}
	}
	podIP, err := readyPodIP(ctx, e, benchNS, warmModel, 3*time.Minute)
	if err != nil {
		return r, err
	}
	direct := fmt.Sprintf("http://%s:%d/v1/completions", podIP, activator.ModelPort)
	through := fmt.Sprintf("http://%s/%s/%s/v1/completions", act.proxy(), benchNS, warmModel)
	if err := waitCatalog(ctx, act, holdSlots(c)); err != nil {
		return r, err
	}

	// Memory first, on an activator that has served nothing yet.
	if r.Held, r.HeldCapAnswer, err = measureHeld(ctx, c, act, holdSlots(c)); err != nil {
		return r, fmt.Errorf("held: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4 * slices.Max(append(c.Concurrency, 1))}}
	if r.Request, err = measureRequests(ctx, c, client, direct, through); err != nil {
		return r, fmt.Errorf("latency: %w", err)
	}
	if r.Stream, err = measureStreams(ctx, c, client, direct, through); err != nil {
		return r, fmt.Errorf("streams: %w", err)
	}
	for _, n := range c.Concurrency {
		for _, p := range []struct{ name, url string }{{"direct", direct}, {"activator", through}} {
			t, err := measureThroughput(ctx, c, client, p.url, n, act.pid)
			if err != nil {
				return r, fmt.Errorf("throughput %s: %w", p.name, err)
			}
			t.Path = p.name
			r.Throughput = append(r.Throughput, t)
		}
	}
	if r.ColdStarts, err = measureColdStarts(ctx, c, e, act); err != nil {
		return r, fmt.Errorf("cold starts: %w", err)
	}
	r.Goals = goals(r, act.limitMiB, heldBudgetMiB)
	return r, nil
}

// activatorProcess is the running activator: its process, its pod IP, its memory limit.
type activatorProcess struct {
	pid      int
	ip       string
	limitMiB float64
}

func (a activatorProcess) proxy() string      { return a.ip + ":8080" }
func (a activatorProcess) metricsURL() string { return "http://" + a.ip + ":9090/metrics" }
func (a activatorProcess) rssMiB() (float64, error) {
	b, err := host.Status(host.Proc, a.pid, "VmRSS:")
	return float64(b) / (1 << 20), err
}

// startedActivator finds the ready activator pod, its process and its Deployment's limit.
func startedActivator(ctx context.Context, e *testenv.Env, bin string) (activatorProcess, error) {
	var a activatorProcess
	d, err := e.Kube.AppsV1().Deployments("inferenceservice-system").Get(ctx, "inferenceservice-activator", metav1.GetOptions{})
	if err != nil {
		return a, err
	}
	if lim, ok := d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; ok {
		a.limitMiB = float64(lim.Value()) / (1 << 20)
	}
	err = poll(ctx, time.Minute, "a ready activator pod", func() error {
		pods, err := e.Kube.CoreV1().Pods("inferenceservice-system").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && reconcile.PodReady(&p) {
				a.ip = p.Status.PodIP
				return nil
			}
		}
		return fmt.Errorf("%d pods, none ready", len(pods.Items))
	})
	if err != nil {
		return a, err
	}
	a.pid, err = host.FindOne(host.Proc, bin)
	return a, err
}

// holdSlot is a model that can never start, and how many requests it is given to hold.
type holdSlot struct {
	ns, name string
	n        int
}

// holdSlots spread the largest Held count over models of at most perHoldModel requests and
// namespaces of at most perHoldNS, in the order they are filled; the last slot is one model in
// a namespace of its own, for the request past the total.
func holdSlots(c Config) []holdSlot {
	most := 0
	for _, n := range c.Held {
		most = max(most, n)
	}
	var out []holdSlot
	for ns := 0; most > 0; ns++ {
		for m, inNS := 0, 0; inNS < perHoldNS && most > 0; m++ {
			n := min(perHoldModel, perHoldNS-inNS, most)
			out = append(out, holdSlot{ns: fmt.Sprintf("hold-%d", ns), name: fmt.Sprintf("h-%d", m), n: n})
			inNS, most = inNS+n, most-n
		}
	}
	return append(out, holdSlot{ns: fmt.Sprintf("hold-%d", len(holdNamespacesOf(out))), name: "past-total", n: 1})
}

func holdNamespacesOf(slots []holdSlot) []string {
	var out []string
	for _, s := range slots {
		if len(out) == 0 || out[len(out)-1] != s.ns {
			out = append(out, s.ns)
		}
	}
	return out
}

func holdNamespaces(c Config) []string { return holdNamespacesOf(holdSlots(c)) }

func coldModel(k int) string { return fmt.Sprintf("cold-%d", k) }

func createNamespaces(ctx context.Context, e *testenv.Env, names ...string) error {
	for _, ns := range names {
		if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// applyModel creates a model at minReplicas 0 (so its requests go through the activator) of
// gpus GPUs a pod, idle seconds before it sleeps (0: the default).
func applyModel(ctx context.Context, e *testenv.Env, ns, name string, gpus, idle int) error {
	auto := `"minReplicas":0,"maxReplicas":1`
	if idle > 0 {
		auto += fmt.Sprintf(`,"idleSeconds":%d`, idle)
	}
	manifest := fmt.Sprintf(`apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: %s
  namespace: %s
  annotations: {%s: '{"autoscaling":{%s},"replicasUnset":true}'}
spec: {model: %s, replicas: 0, gpusPerReplica: %d}
`, name, ns, crd.AnnotationV1beta1Spec, auto, servedModel, gpus)
	f := filepath.Join(e.Dir, ns+"-"+name+".yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		return err
	}
	_, _, err := e.Cluster.Kubectl(ctx, "apply", "-f", f)
	return err
}

// readyPodIP waits for a ready pod of the model and returns its IP.
func readyPodIP(ctx context.Context, e *testenv.Env, ns, name string, timeout time.Duration) (string, error) {
	var ip string
	err := poll(ctx, timeout, ns+"/"+name+" ready", func() error {
		pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + name})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && reconcile.PodReady(&p) {
				ip = p.Status.PodIP
				return nil
			}
		}
		return fmt.Errorf("%d pods, none ready", len(pods.Items))
	})
	return ip, err
}

// waitCatalog waits until the activator serves the awake model and every hold model: its
// informers saw them (before, a request is answered 404). A hold model's probe is held (it
// times out here, and its slot is freed as it goes), or answered 404 while still unknown.
func waitCatalog(ctx context.Context, a activatorProcess, slots []holdSlot) error {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	probe := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{Proxy: nil}}
	return poll(ctx, time.Minute, "the activator serving the models", func() error {
		resp, err := post(ctx, client, fmt.Sprintf("http://%s/%s/%s/v1/completions", a.proxy(), benchNS, warmModel), completionBody(1, false))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s/%s: %s", benchNS, warmModel, resp.Status)
		}
		for _, s := range slots {
			resp, err := post(ctx, probe, fmt.Sprintf("http://%s/%s/%s/v1/completions", a.proxy(), s.ns, s.name), completionBody(1, false))
			if err != nil {
				continue // held until the probe gave up: served
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			return fmt.Errorf("%s/%s: %s %s", s.ns, s.name, resp.Status, bytes.TrimSpace(b))
		}
		return nil
	})
}

// completionBody is a completion of tokens tokens, streamed or not.
func completionBody(tokens int, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"prompt":"hello","max_tokens":%d,"stream":%v}`, servedModel, tokens, stream)
}

func post(ctx context.Context, client *http.Client, url, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return client.Do(req)
}

// timeCompletion is one non-streamed completion's time to the end of its body.
func timeCompletion(ctx context.Context, client *http.Client, url, body string) (time.Duration, error) {
	start := time.Now()
	resp, err := post(ctx, client, url, body)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("%s", resp.Status)
	}
	return d, err
}

// timeStream is one streamed completion's times.
func timeStream(ctx context.Context, client *http.Client, url, body string) (streamTimes, error) {
	start := time.Now()
	resp, err := post(ctx, client, url, body)
	if err != nil {
		return streamTimes{}, err
	}
	defer resp.Body.Close()
	headers := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return streamTimes{}, fmt.Errorf("%s", resp.Status)
	}
	s, err := readStream(resp.Body, start, time.Now)
	s.headers = headers
	return s, err
}

// pairs runs n pairs of f on the direct and the activator's URL, back to back, alternating
// which goes first so neither always follows the other; warm pairs first are not kept.
func pairs[T any](ctx context.Context, n, warm int, direct, through string, f func(ctx context.Context, url string) (T, error)) (ds, as []T, err error) {
	for i := range warm + n {
		first, second := direct, through
		if i%2 == 1 {
			first, second = through, direct
		}
		a, err := f(ctx, first)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", first, err)
		}
		b, err := f(ctx, second)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", second, err)
		}
		if i%2 == 1 {
			a, b = b, a
		}
		if i >= warm {
			ds, as = append(ds, a), append(as, b)
		}
	}
	return ds, as, nil
}

func measureRequests(ctx context.Context, c Config, client *http.Client, direct, through string) (Latency, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	logf(c, "latency: %d pairs of completions (1 token), direct and through the activator", c.Pairs)
	body := completionBody(1, false)
	ds, as, err := pairs(ctx, c.Pairs, 20, direct, through, func(ctx context.Context, url string) (time.Duration, error) {
		return timeCompletion(ctx, client, url, body)
	})
	if err != nil {
		return Latency{}, err
	}
	return compare(ds, as), nil
}

func measureStreams(ctx context.Context, c Config, client *http.Client, direct, through string) (Stream, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	logf(c, "streams: %d pairs of %d tokens", c.StreamPairs, c.StreamTokens)
	body := completionBody(c.StreamTokens, true)
	ds, as, err := pairs(ctx, c.StreamPairs, 4, direct, through, func(ctx context.Context, url string) (streamTimes, error) {
		return timeStream(ctx, client, url, body)
	})
	if err != nil {
		return Stream{}, err
	}
	for _, s := range slices.Concat(ds, as) {
		if len(s.tokens) != c.StreamTokens {
			return Stream{}, fmt.Errorf("a stream of %d tokens, want %d", len(s.tokens), c.StreamTokens)
		}
	}
	return compareStreams(ds, as), nil
}

// measureThroughput sends completions on n connections for c.RPSDuration.
func measureThroughput(ctx context.Context, c Config, client *http.Client, url string, n, pid int) (Throughput, error) {
	t := Throughput{Concurrency: n}
	logf(c, "throughput: %d at once for %s to %s", n, c.RPSDuration, url)
	body := completionBody(1, false)
	cpu0, err := host.CPUSeconds(host.Proc, pid)
	if err != nil {
		return t, err
	}
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	start := time.Now()
	deadline := start.Add(c.RPSDuration)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				d, err := timeCompletion(ctx, client, url, body)
				mu.Lock()
				if err != nil {
					t.Failed++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	cpu1, err := host.CPUSeconds(host.Proc, pid)
	if err != nil {
		return t, err
	}
	t.OK, t.Seconds = len(lat), wall.Seconds()
	t.PerSecond = float64(t.OK) / wall.Seconds()
	t.P50Ms, t.P99Ms = ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99))
	t.ActivatorCPUSeconds = cpu1 - cpu0
	if t.OK > 0 {
		t.CPUPerRequestUs = t.ActivatorCPUSeconds / float64(t.OK) * 1e6
	}
	if firstErr != nil {
		logf(c, "throughput: %d failed, the first: %v", t.Failed, firstErr)
	}
	return t, ctx.Err()
}

// heldNow is the activator's held requests, from its gauge.
func heldNow(a activatorProcess) (float64, error) {
	fams, err := operator.Scrape(nil, a.metricsURL())
	if err != nil {
		return 0, err
	}
	return operator.SumCounter(fams, "activator_held_requests", nil), nil
}

// memoryRow reads the activator's resident memory and Go runtime figures with n held.
func memoryRow(a activatorProcess, n int) (Held, error) {
	h := Held{Requests: n}
	fams, err := operator.Scrape(nil, a.metricsURL())
	if err != nil {
		return h, err
	}
	rss, err := a.rssMiB()
	if err != nil {
		return h, err
	}
	h.RSSMiB = rss
	h.HeapMiB = operator.SumCounter(fams, "go_memstats_heap_inuse_bytes", nil) / (1 << 20)
	h.StackMiB = operator.SumCounter(fams, "go_memstats_stack_inuse_bytes", nil) / (1 << 20)
	h.Goroutines = operator.SumCounter(fams, "go_goroutines", nil)
	return h, nil
}

// measureHeld holds c.Held requests in turn against the models that never start, reading the
// activator's memory at none and at each count, then sends one more past the total and reports
// its answer; then lets every held request go.
func measureHeld(ctx context.Context, c Config, a activatorProcess, slots []holdSlot) ([]Held, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	holdCtx, release := context.WithCancel(ctx)
	// Each held request has its own connection, as each client of a gateway would.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: -1}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	early := map[string]int{} // requests answered while they should be held
	defer func() { release(); wg.Wait() }()

	row, err := memoryRow(a, 0)
	if err != nil {
		return nil, "", err
	}
	rows := []Held{row}
	body := completionBody(1, false)
	sent, slot, inSlot := 0, 0, 0
	for _, n := range c.Held {
		logf(c, "held: %d requests", n)
		for ; sent < n; sent++ {
			s := slots[slot]
			if inSlot == s.n {
				slot, inSlot = slot+1, 0
				s = slots[slot]
			}
			inSlot++
			url := fmt.Sprintf("http://%s/%s/%s/v1/completions", a.proxy(), s.ns, s.name)
			wg.Go(func() {
				resp, err := post(holdCtx, client, url, body)
				if holdCtx.Err() != nil {
					return
				}
				what := fmt.Sprint(err)
				if err == nil {
					what = resp.Status
					resp.Body.Close()
				}
				mu.Lock()
				early[what]++
				mu.Unlock()
			})
		}
		err := poll(ctx, time.Minute, fmt.Sprintf("%d requests held", n), func() error {
			mu.Lock()
			e := fmt.Sprint(early)
			mu.Unlock()
			if e != "map[]" {
				return errors.Join(errStop, fmt.Errorf("answered instead of held: %s", e))
			}
			if h, err := heldNow(a); err != nil || int(h) != n {
				return fmt.Errorf("%v held: %v", h, err)
			}
			return nil
		})
		if err != nil {
			return rows, "", err
		}
		row, err := memoryRow(a, n)
		if err != nil {
			return rows, "", err
		}
		rows = append(rows, row)
	}
	// One more, to a model of a namespace with none held: only the total refuses it.
	past := slots[len(slots)-1]
	answer := "not sent"
	if resp, err := post(ctx, &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}},
		fmt.Sprintf("http://%s/%s/%s/v1/completions", a.proxy(), past.ns, past.name), body); err != nil {
		answer = err.Error()
	} else {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		answer = fmt.Sprintf("%s, Retry-After %s: %s", resp.Status, resp.Header.Get("Retry-After"), strings.TrimSpace(string(b)))
	}
	release()
	wg.Wait()
	if err := poll(ctx, time.Minute, "no request held", func() error {
		if h, err := heldNow(a); err != nil || h != 0 {
			return fmt.Errorf("%v held: %v", h, err)
		}
		return nil
	}); err != nil {
		return rows, answer, err
	}
	perRequest(rows)
	return rows, answer, nil
}

// measureColdStarts waits for the cold models to sleep, then wakes each with its count of
// streamed requests sent at once, timing each one's first byte (the response's headers, which
// the model server sends as it admits the request).
func measureColdStarts(ctx context.Context, c Config, e *testenv.Env, a activatorProcess) ([]ColdStart, error) {
	for _, k := range c.Cold {
		name := coldModel(k)
		if err := poll(ctx, c.Timeout, benchNS+"/"+name+" at zero", func() error {
			d, err := e.Kube.AppsV1().Deployments(benchNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Annotations[reconcile.AsleepSinceAnnotation] == "" {
				return fmt.Errorf("awake")
			}
			pods, err := e.Kube.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + name})
			if err != nil {
				return err
			}
			if n := len(pods.Items); n > 0 {
				return fmt.Errorf("%d pods", n)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	var out []ColdStart
	body := completionBody(1, true)
	for _, k := range c.Cold {
		logf(c, "cold start: %d requests at once", k)
		url := fmt.Sprintf("http://%s/%s/%s/v1/completions", a.proxy(), benchNS, coldModel(k))
		client := &http.Client{Timeout: c.Timeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: -1}}
		cs := ColdStart{Requests: k}
		var mu sync.Mutex
		var firsts []time.Duration
		var wg sync.WaitGroup
		gate := make(chan struct{})
		var start time.Time
		for range k {
			wg.Go(func() {
				<-gate
				resp, err := post(ctx, client, url, body)
				d := time.Since(start)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%s", resp.Status)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if cs.FirstFailed == "" {
						cs.FirstFailed = err.Error()
					}
					return
				}
				firsts = append(firsts, d)
			})
		}
		// The pod's readiness as a watch delivers it here, beside the activator's own informer:
		// what follows it until the first byte is the activator's part of the cold start.
		w, err := e.Kube.CoreV1().Pods(benchNS).Watch(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + coldModel(k)})
		if err != nil {
			return out, err
		}
		readySeen := make(chan time.Time, 1)
		go func() {
			for ev := range w.ResultChan() {
				if p, ok := ev.Object.(*corev1.Pod); ok && reconcile.PodReady(p) {
					readySeen <- time.Now()
					return
				}
			}
		}()
		start = time.Now()
		close(gate)
		wg.Wait()
		w.Stop()
		cs.Answered = len(firsts)
		cs.FirstByteS, cs.LastByteS = quantile(firsts, 0).Seconds(), quantile(firsts, 1).Seconds()
		select {
		case t := <-readySeen:
			cs.PodReadyS = t.Sub(start).Seconds()
			cs.ReadyToFirstByteMs = (cs.FirstByteS - cs.PodReadyS) * 1000
		default:
		}
		out = append(out, cs)
	}
	return out, nil
}

// errStop, joined to a poll condition's error, ends the poll at once.
var errStop = errors.New("not to be retried")

// poll calls cond every 200 ms until it returns nil, returns an error joined with errStop, or
// timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errStop):
			return fmt.Errorf("%s: %w", what, err)
		case time.Now().After(deadline):
			return fmt.Errorf("%s: not within %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
