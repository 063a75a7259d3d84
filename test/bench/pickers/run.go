// One N: the cluster, the gateway and the operator set up, the models created and timed to
// their pool route, the objects and writes counted, the pickers read at rest and under load.

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/bench/host"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// Config is one run: the model counts and the windows.
type Config struct {
	N            []int
	MaxPickers   int
	Rest, Load   time.Duration
	Workers      int
	RouteTimeout time.Duration
	Log          io.Writer
}

// Result is one N's figures; Extrapolated rows are computed from the largest N measured.
type Result struct {
	N            int     `json:"n"`
	Extrapolated bool    `json:"extrapolated,omitempty"`
	Pickers      int     `json:"pickers"`
	RouteP50S    float64 `json:"createToPoolRouteP50Seconds"`
	RouteP99S    float64 `json:"createToPoolRouteP99Seconds"`
	WritesPerISV float64 `json:"operatorWritesPerModel"`
	RestWrites   float64 `json:"operatorWritesAtRest"`
	// Objects are the pool route's objects per model, by kind (the five the operator makes, and
	// the picker's ReplicaSet, Pod and EndpointSlice the cluster's controllers make).
	Objects        map[string]float64 `json:"objectsPerModel"`
	RestRSSMiB     float64            `json:"pickersRestRSSMiB"`
	RestCPUCores   float64            `json:"pickersRestCPUCores"`
	LoadRSSMiB     float64            `json:"pickersLoadRSSMiB"`
	LoadCPUCores   float64            `json:"pickersLoadCPUCores"`
	LoadRequests   int64              `json:"loadRequests"`
	LoadErrors     int64              `json:"loadErrors"`
	LoadFirstError string             `json:"loadFirstError,omitempty"`
	OperatorRSSMiB float64            `json:"operatorRSSMiB"`
	// Without: the same N models at one replica forever (maxReplicas 1), so without a picker
	// (the Service route), created after on the same cluster: what the pool route adds is the
	// difference.
	WithoutRouteP50S    float64 `json:"withoutPickerCreateToRouteP50Seconds"`
	WithoutRouteP99S    float64 `json:"withoutPickerCreateToRouteP99Seconds"`
	WithoutWritesPerISV float64 `json:"withoutPickerWritesPerModel"`
}

const (
	namespace = "pickers"
	// without holds the models at one replica forever: no picker.
	without   = "pickers-without"
	parent    = "gateway-system/public"
	baseModel = "Qwen/Qwen3-0.6B"
)

func logf(c Config, format string, args ...any) {
	fmt.Fprintf(c.Log, "bench-pickers: "+format+"\n", args...)
}

// Run measures each N in turn; an N above what the machine holds is extrapolated.
func Run(ctx context.Context, c Config) ([]Result, error) {
	eppBin, gwBin := os.Getenv(operator.EPPBinEnv), os.Getenv(operator.GatewayBinEnv)
	if eppBin == "" || gwBin == "" {
		return nil, fmt.Errorf("%s and %s must name the picker and the gateway (make epp)", operator.EPPBinEnv, operator.GatewayBinEnv)
	}
	var rs []Result
	var measured *Result // the largest N run
	for _, n := range c.N {
		fit := c.MaxPickers
		if fit == 0 && measured != nil {
			fit = fitPickers(*measured)
		}
		if fit > 0 && n > fit && measured != nil {
			logf(c, "N=%d: %d pickers do not fit this machine (at most %d): extrapolated per picker from N=%d", n, n, fit, measured.N)
			rs = append(rs, extrapolate(*measured, n))
			continue
		}
		r, err := runN(ctx, c, n, eppBin, gwBin)
		if err != nil {
			return rs, fmt.Errorf("N=%d: %w", n, err)
		}
		rs = append(rs, r)
		measured = &rs[len(rs)-1]
		PrintTable(c.Log, rs)
	}
	return rs, nil
}

// fitPickers is how many pickers this machine holds beside what runs now: its available memory
// at r's resident memory per picker under load, keeping a quarter free, and half its cores at
// r's CPU per picker at rest (each picker reads its pods' metrics every
// --endpoint-picker-refresh-metrics-interval, idle or not; past that the cluster's own
// processes starve, probes time out and pickers restart: on 2 cores an attempt at 100, at
// v1.5.0's 50 ms, never had them all up).
func fitPickers(r Result) int {
	avail, err := memAvailable()
	if err != nil || r.Pickers == 0 || r.LoadRSSMiB == 0 || r.RestCPUCores == 0 {
		return 0
	}
	perMem := r.LoadRSSMiB / float64(r.Pickers) * (1 << 20)
	perCPU := r.RestCPUCores / float64(r.Pickers)
	return min(int(float64(avail)*0.75/perMem), int(float64(runtime.NumCPU())*0.5/perCPU))
}

// extrapolate is r's per-picker and per-model figures at n models; the times are not (they
// depend on the pace the cluster creates pods at, not on a sum).
func extrapolate(r Result, n int) Result {
	k := float64(n) / float64(r.N)
	return Result{N: n, Extrapolated: true, Pickers: n, WritesPerISV: r.WritesPerISV, WithoutWritesPerISV: r.WithoutWritesPerISV, Objects: r.Objects,
		RestRSSMiB: r.RestRSSMiB * k, RestCPUCores: r.RestCPUCores * k, LoadRSSMiB: r.LoadRSSMiB * k}
}

func memAvailable() (int64, error) { return host.KB("/proc/meminfo", "MemAvailable:") }

func runN(ctx context.Context, c Config, n int, eppBin, gwBin string) (Result, error) {
	r := Result{N: n}
	logf(c, "N=%d: starting the cluster", n)
	e, err := testenv.Setup(ctx, cluster.Options{Nodes: 2*n/8 + 1, ExtraArgs: []string{
		"--exec-image=" + operator.EPPImageRepository + "=" + eppBin, "--controller-qps=200"}}, "pickers")
	if err != nil {
		return r, err
	}
	defer e.Teardown(os.Getenv("PICKERS_KEEP") != "")
	if _, _, err := e.Cluster.Kubectl(ctx, "apply", "-f", filepath.Join(operator.EPPManifests(eppBin), "crd")); err != nil {
		return r, err
	}
	if _, _, err := e.Cluster.Kubectl(ctx, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		return r, err
	}
	if _, _, err := e.Cluster.Kubectl(ctx, "create", "namespace", namespace); err != nil {
		return r, err
	}
	if _, _, err := e.Cluster.Kubectl(ctx, "create", "namespace", without); err != nil {
		return r, err
	}
	gwAddr, _, stopGW, err := operator.StartGateway(ctx, gwBin, filepath.Join(e.Dir, "gateway.log"), "--kubeconfig="+e.Cluster.KubeconfigPath(), "--gateway="+parent)
	if err != nil {
		return r, err
	}
	defer func() { _ = stopGW() }()
	op, err := e.StartOperator(ctx, "operator.log", "--gateway-parent="+parent)
	if err != nil {
		return r, err
	}
	defer func() { _ = op.Stop(30 * time.Second) }()
	w0, err := op.Writes()
	if err != nil {
		return r, err
	}

	created, err := createModels(ctx, e, namespace, n, `{"gateway":{"route":"/`+namespace+`/%s"}}`)
	if err != nil {
		return r, err
	}
	logf(c, "N=%d: %d models created in %.1fs; waiting for their pool routes", n, n, time.Since(created[0]).Seconds())
	routed, err := waitRouted(ctx, e, namespace, reconcile.ReasonPoolRoute, created, c.RouteTimeout)
	if err != nil {
		return r, err
	}
	r.RouteP50S, r.RouteP99S = quantile(routed, 0.5), quantile(routed, 0.99)
	w1, err := settled(ctx, op)
	if err != nil {
		return r, err
	}
	r.WritesPerISV = (w1 - w0) / float64(n)
	if r.Objects, err = objectsPerModel(ctx, e, n); err != nil {
		return r, err
	}

	pids, err := host.Find(host.Proc, eppBin)
	if err != nil {
		return r, err
	}
	r.Pickers = len(pids)
	if r.Pickers != n {
		return r, fmt.Errorf("%d picker processes run %s for %d models", r.Pickers, eppBin, n)
	}
	logf(c, "N=%d: all routed (p50 %.1fs, p99 %.1fs); %d pickers at rest for %s", n, r.RouteP50S, r.RouteP99S, r.Pickers, c.Rest)
	cpu0 := host.SumCPUSeconds(host.Proc, pids)
	time.Sleep(c.Rest) // the measurement window itself, not a wait for state
	r.RestCPUCores = (host.SumCPUSeconds(host.Proc, pids) - cpu0) / c.Rest.Seconds()
	r.RestRSSMiB = host.SumRSSMiB(host.Proc, pids)
	w2, err := op.Writes()
	if err != nil {
		return r, err
	}
	r.RestWrites = w2 - w1

	logf(c, "N=%d: %d requests in flight through the gateway for %s", n, c.Workers, c.Load)
	cpu0 = host.SumCPUSeconds(host.Proc, pids)
	start := time.Now()
	r.LoadRequests, r.LoadErrors, r.LoadFirstError = load(ctx, gwAddr, n, c.Workers, c.Load)
	r.LoadCPUCores = (host.SumCPUSeconds(host.Proc, pids) - cpu0) / time.Since(start).Seconds()
	r.LoadRSSMiB = host.SumRSSMiB(host.Proc, pids)
	if rss, err := op.RSSBytes(); err == nil {
		r.OperatorRSSMiB = float64(rss) / (1 << 20)
	}

	logf(c, "N=%d: the same models at one replica forever, without a picker", n)
	w3, err := op.Writes()
	if err != nil {
		return r, err
	}
	created, err = createModels(ctx, e, without, n, `{"gateway":{"route":"/`+without+`/%s"},"autoscaling":{"minReplicas":1,"maxReplicas":1},"replicasUnset":true}`)
	if err != nil {
		return r, err
	}
	routed, err = waitRouted(ctx, e, without, reconcile.ReasonServiceRoute, created, c.RouteTimeout)
	if err != nil {
		return r, err
	}
	r.WithoutRouteP50S, r.WithoutRouteP99S = quantile(routed, 0.5), quantile(routed, 0.99)
	w4, err := settled(ctx, op)
	if err != nil {
		return r, err
	}
	r.WithoutWritesPerISV = (w4 - w3) / float64(n)
	return r, nil
}

// settled is the operator's writes once they have not changed for 10 s (its last status
// writes, such as the HPA's first report, come after Routed), within 3 minutes.
func settled(ctx context.Context, op *operator.Process) (float64, error) {
	last, err := op.Writes()
	if err != nil {
		return 0, err
	}
	still, deadline := time.Now(), time.Now().Add(3*time.Minute)
	for time.Since(still) < 10*time.Second && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
		w, err := op.Writes()
		if err != nil {
			return 0, err
		}
		if w != last {
			last, still = w, time.Now()
		}
	}
	return last, nil
}

// createModels creates n models in ns, one after another, each with ext (its %s the model's
// name) as its v1beta1 fields, and returns when each create was sent.
func createModels(ctx context.Context, e *testenv.Env, ns string, n int, ext string) ([]time.Time, error) {
	created := make([]time.Time, n)
	for i := 0; i < n; i++ {
		u, err := model(ns, modelName(i), fmt.Sprintf(ext, modelName(i)))
		if err != nil {
			return nil, err
		}
		created[i] = time.Now()
		if _, err := e.Dyn.Resource(crd.Resource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create %s/%s: %w", ns, u.GetName(), err)
		}
	}
	return created, nil
}

func modelName(i int) string { return fmt.Sprintf("m-%04d", i) }

// model is a model of one pod with ext as its v1beta1 fields: with a gateway route alone the
// HPA may scale it to 3 (so it gets a picker); with maxReplicas 1 it gets none.
func model(ns, name, ext string) (*unstructured.Unstructured, error) {
	doc := fmt.Sprintf(`apiVersion: %s
kind: %s
metadata:
  name: %s
  namespace: %s
  annotations: {%s: '%s'}
spec: {model: %s, replicas: 1, gpusPerReplica: 1}
`, crd.GroupVersion, crd.Kind, name, ns, crd.AnnotationV1beta1Spec, ext, baseModel)
	u := &unstructured.Unstructured{}
	return u, yaml.Unmarshal([]byte(doc), &u.Object)
}

// waitRouted polls ns's models until each has a ready pod and Routed True for reason (each
// serves through the gateway), and returns each one's time from its create, in seconds.
func waitRouted(ctx context.Context, e *testenv.Env, ns, reason string, created []time.Time, timeout time.Duration) ([]float64, error) {
	at := make([]float64, len(created))
	left := len(created)
	deadline := time.Now().Add(timeout)
	for left > 0 {
		list, err := e.Dyn.Resource(crd.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
		now := time.Now()
		if err == nil {
			for _, u := range list.Items {
				i, err := strconv.Atoi(strings.TrimPrefix(u.GetName(), "m-"))
				if err != nil || i >= len(at) || at[i] != 0 {
					continue
				}
				if ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas"); ready < 1 {
					continue
				}
				conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
				for _, c := range conds {
					m, _ := c.(map[string]any)
					if m["type"] == crd.ConditionRouted && m["reason"] == reason && m["status"] == "True" {
						at[i] = now.Sub(created[i]).Seconds()
						left--
					}
				}
			}
		}
		if now.After(deadline) {
			return nil, fmt.Errorf("%d of %d models in %s without Routed %s after %s", left, len(created), ns, reason, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return at, nil
}

// objectsPerModel counts the pool route's objects in the namespace, by kind, per model: the
// picker's by its label (the ReplicaSet and Pod inherit it) and the InferencePools. (A real
// cluster adds the picker Service's EndpointSlice; the local one runs no EndpointSlice
// controller.)
func objectsPerModel(ctx context.Context, e *testenv.Env, n int) (map[string]float64, error) {
	sel := metav1.ListOptions{LabelSelector: kinds.PickerLabel}
	count := map[string]float64{}
	for kind, gvr := range map[string]schema.GroupVersionResource{
		"Deployment":     {Group: "apps", Version: "v1", Resource: "deployments"},
		"ReplicaSet":     {Group: "apps", Version: "v1", Resource: "replicasets"},
		"Pod":            {Version: "v1", Resource: "pods"},
		"Service":        {Version: "v1", Resource: "services"},
		"ServiceAccount": reconcile.ServiceAccountGVR,
		"RoleBinding":    reconcile.RoleBindingGVR,
	} {
		l, err := e.Dyn.Resource(gvr).Namespace(namespace).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		count[kind] = float64(len(l.Items)) / float64(n)
	}
	pools, err := e.Dyn.Resource(reconcile.InferencePoolGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	count["InferencePool"] = float64(len(pools.Items)) / float64(n)
	return count, nil
}

// load sends one-token completions through the gateway, workers at a time, for d, spread over
// the models in turn: each goes through the model's picker.
func load(ctx context.Context, gwAddr string, n, workers int, d time.Duration) (ok, failed int64, first string) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: workers}}
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) % n
				url := "http://" + gwAddr + "/" + namespace + "/" + modelName(i) + "/v1/completions"
				body := fmt.Sprintf(`{"model":%q,"prompt":"request %d to the pool","max_tokens":1}`, baseModel, i)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if ctx.Err() != nil {
					return
				}
				var msg string
				if err != nil {
					msg = err.Error()
				} else {
					b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || resp.Header.Get("x-gateway-destination-endpoint") == "" {
						msg = resp.Status + " " + resp.Header.Get("x-gateway-destination-endpoint") + ": " + strings.TrimSpace(string(b))
					}
				}
				mu.Lock()
				if msg == "" {
					ok++
				} else {
					failed++
					if first == "" {
						first = msg
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ok, failed, first
}

// quantile is the q-quantile of xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// PrintTable writes the results as a table.
func PrintTable(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "N\tpickers\tcreate->pool p50 s\tp99 s\twithout picker: create->Service p50 s\tp99 s\twrites/model\twithout picker\twrites at rest\tobjects/model\trest RSS MiB (per picker)\trest CPU cores\tload RSS MiB (per picker)\tload CPU cores\tload req ok/err\toperator RSS MiB")
	for _, r := range rs {
		per := func(v float64) string {
			if r.Pickers == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f (%.1f)", v, v/float64(r.Pickers))
		}
		tot := 0.0
		for _, v := range r.Objects {
			tot += v
		}
		n := strconv.Itoa(r.N)
		if r.Extrapolated {
			n += " (extrapolated)"
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\t%.2f\t%.2f\t-\t%.0f\t%s\t%.3f\t%s\t-\t-\t-\n", n, r.Pickers, r.WritesPerISV, r.WithoutWritesPerISV, tot, per(r.RestRSSMiB), r.RestCPUCores, per(r.LoadRSSMiB))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.0f\t%.0f\t%s\t%.3f\t%s\t%.3f\t%d/%d\t%.1f\n", n, r.Pickers, r.RouteP50S, r.RouteP99S, r.WithoutRouteP50S, r.WithoutRouteP99S, r.WritesPerISV, r.WithoutWritesPerISV, r.RestWrites, tot,
			per(r.RestRSSMiB), r.RestCPUCores, per(r.LoadRSSMiB), r.LoadCPUCores, r.LoadRequests, r.LoadErrors, r.OperatorRSSMiB)
	}
	_ = tw.Flush()
	for _, r := range rs {
		if r.LoadFirstError != "" {
			fmt.Fprintf(w, "N=%d: first load error: %s\n", r.N, r.LoadFirstError)
		}
	}
}
