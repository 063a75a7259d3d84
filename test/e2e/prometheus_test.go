package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

const gpuQuota = `apiVersion: v1
kind: ResourceQuota
metadata: {name: gpus}
spec:
  hard: {requests.nvidia.com/gpu: "8"}
`

var twoByTwo = map[string]any{"model": "m", "replicas": int64(2), "gpusPerReplica": int64(2)}

// quotaWithGPUs applies an 8-GPU ResourceQuota and waits for the quota controller to fill its
// status, so admission counts every pod from the first.
func quotaWithGPUs(t *testing.T, ns string) {
	t.Helper()
	applyYAML(t, ns, gpuQuota)
	testenv.Eventually(t, 30*time.Second, "quota status", func() error {
		q, err := env.Kube.CoreV1().ResourceQuotas(ns).Get(context.Background(), "gpus", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := q.Status.Hard["requests.nvidia.com/gpu"]; !ok {
			return fmt.Errorf("status.hard %v", q.Status.Hard)
		}
		return nil
	})
}

// TestMetricsPromlint lints a real scrape of the running operator, once every family it
// exports (per-isvc, quota, workqueue, REST) has series.
func TestMetricsPromlint(t *testing.T) {
	ns := env.Namespace(t)
	quotaWithGPUs(t, ns)
	if _, err := env.CreateISVC(context.Background(), ns, "lint", twoByTwo); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "per-isvc and quota series", func() error {
		fams, err := env.op.Scrape()
		if err != nil {
			return err
		}
		for _, name := range []string{"inferenceservice_info", "inferenceservice_gpus", "inferenceservice_gpu_quota_hard",
			"inferenceservice_gpu_quota_used", "workqueue_depth", "rest_client_requests_total", "controller_runtime_reconcile_time_seconds"} {
			found := false
			for _, m := range fams[name].GetMetric() {
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == "namespace" && l.GetValue() == ns) || !strings.HasPrefix(name, "inferenceservice_")
				}
			}
			if !found {
				return fmt.Errorf("no %s series for namespace %s", name, ns)
			}
		}
		return nil
	})
	resp, err := http.Get("http://" + env.op.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	problems, err := promlint.New(resp.Body).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	t.Logf("promlint on a real scrape: %d problems", len(problems))
}

// secureOperator restarts the shared operator serving /metrics as manifests/ installs it,
// with --metrics-secure, and restores it when the test ends.
func secureOperator(t *testing.T) {
	t.Helper()
	stopOperator(t)
	t.Cleanup(func() {
		stopOperator(t)
		if err := startOperator(testenv.Ctx(t, 2*time.Minute)); err != nil {
			t.Errorf("restarting the operator: %v", err)
		}
	})
	if err := startOperator(testenv.Ctx(t, 2*time.Minute), "--metrics-secure"); err != nil {
		t.Fatal(err)
	}
}

// TestPrometheusScrapesOperator runs a real Prometheus against the operator as the default
// install serves /metrics (HTTPS, token authenticated and authorized), with the job of
// manifests/monitoring/prometheus_scrape_config.yaml and a ServiceAccount token bound to the
// metrics reader ClusterRole, and reads, with PromQL, what an SRE's dashboard and alerts read:
// reconcile latency quantiles, queue depth, and GPU figures matching a namespace whose quota
// admits 8 of the 12 GPUs asked for. The same job without a token is refused.
func TestPrometheusScrapesOperator(t *testing.T) {
	ns := env.Namespace(t)
	token := metricsToken(t, ns, "prometheus", true)
	secureOperator(t)
	prom := startPrometheus(t, token)
	quotaWithGPUs(t, ns)
	// 3 isvcs x 2 replicas x 2 GPUs = 12 requested; the quota admits 4 pods, 8 GPUs.
	for i := range 3 {
		if _, err := env.CreateISVC(context.Background(), ns, fmt.Sprintf("m-%d", i), twoByTwo); err != nil {
			t.Fatal(err)
		}
	}

	sel := fmt.Sprintf(`namespace=%q`, ns)
	var gpus map[string]float64
	testenv.Eventually(t, 2*time.Minute, "GPU figures in Prometheus", func() error {
		s, err := prom.query(`sum by (state) (inferenceservice_gpus{` + sel + `})`)
		if err != nil {
			return err
		}
		gpus = map[string]float64{}
		for _, x := range s {
			gpus[x.Labels["state"]] = x.Value
		}
		if gpus["requested"] != 12 || gpus["allocated"] != 8 || gpus["pending"] != 4 {
			return fmt.Errorf("gpus by state %v, want requested 12, allocated 8, pending 4", gpus)
		}
		return nil
	})
	t.Logf("sum by (state) (inferenceservice_gpus{%s}) = %v", sel, gpus)

	quota := func(kind string) string {
		return fmt.Sprintf(`sum(inferenceservice_gpu_quota_%s{%s,resource="requests.nvidia.com/gpu"})`, kind, sel)
	}
	testenv.Eventually(t, 30*time.Second, "quota figures in Prometheus", func() error {
		hard, err := prom.scalar(quota("hard"))
		if err != nil {
			return err
		}
		used, err := prom.scalar(quota("used"))
		if err != nil {
			return err
		}
		if hard != 8 || used != 8 {
			return fmt.Errorf("quota hard %v used %v, want 8 and 8", hard, used)
		}
		t.Logf("%s = %v; %s = %v", quota("hard"), hard, quota("used"), used)
		return nil
	})

	// The rules of manifests/monitoring evaluate on the real series: the namespace sum, and the
	// pending-GPU alert waiting out its `for:`.
	for _, q := range []string{
		`namespace:inferenceservice_gpus:sum{` + sel + `,state="pending"}`,
		`count(ALERTS{alertname="InferenceServiceGPUsPending",` + sel + `})`,
	} {
		testenv.Eventually(t, 30*time.Second, q, func() error {
			v, err := prom.scalar(q)
			if err != nil {
				return err
			}
			if v < 1 {
				return fmt.Errorf("%s = %v", q, v)
			}
			t.Logf("%s = %v", q, v)
			return nil
		})
	}

	// The rules have been evaluated on the real series (the alert above is pending): the default
	// install runs no conversion webhook, so it exports no conversion gauge and that alert is
	// not even pending.
	conv := `ALERTS{alertname="InferenceServiceConversionFailing"} or inferenceservice_conversion_webhook_up`
	if s, err := prom.query(conv); err != nil || len(s) > 0 {
		t.Fatalf("%s: %v (%v), want nothing", conv, s, err)
	}
	t.Logf("%s: nothing", conv)

	// Without a token the operator refuses the scrape.
	testenv.Eventually(t, 30*time.Second, "the scrape without a token refused", func() error {
		health, lastErr, err := prom.target("unauthenticated")
		if err != nil {
			return err
		}
		if health != "down" || !strings.Contains(lastErr, "401") {
			return fmt.Errorf("unauthenticated target: health %q, last error %q", health, lastErr)
		}
		t.Logf("unauthenticated target: %s, %s", health, lastErr)
		return nil
	})

	// Reconcile latency quantiles: the resync (2s) keeps reconciles flowing.
	for _, qq := range []float64{0.5, 0.99} {
		q := fmt.Sprintf(`histogram_quantile(%v, sum by (le) (rate(controller_runtime_reconcile_time_seconds_bucket{controller="inferenceservice"}[30s])))`, qq)
		testenv.Eventually(t, 30*time.Second, "reconcile latency quantile", func() error {
			v, err := prom.scalar(q)
			if err != nil {
				return err
			}
			if math.IsNaN(v) || v <= 0 || v > 10 {
				return fmt.Errorf("%s = %v", q, v)
			}
			t.Logf("%s = %v", q, v)
			return nil
		})
	}
	// Present, and above the floor: queue depth may be 0 between resyncs.
	for q, floor := range map[string]float64{
		`workqueue_depth{name="inferenceservice"}`:                                          0,
		`up{job="inferenceservice-operator"}`:                                               1,
		`sum(rate(controller_runtime_reconcile_total{controller="inferenceservice"}[30s]))`: math.SmallestNonzeroFloat64,
		`sum(rest_client_requests_total{method="GET"})`:                                     1,
	} {
		testenv.Eventually(t, 30*time.Second, q, func() error {
			v, err := prom.scalar(q)
			if err != nil {
				return err
			}
			if v < floor {
				return fmt.Errorf("%s = %v, want at least %v", q, v, floor)
			}
			t.Logf("%s = %v", q, v)
			return nil
		})
	}

	// A deleted isvc's series leave the scrape, so Prometheus marks them stale at once.
	if err := env.Dyn.Resource(crd.Resource).Namespace(ns).Delete(context.Background(), "m-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := fmt.Sprintf(`inferenceservice_info{%s,name="m-2"} or inferenceservice_gpus{%s,name="m-2"}`, sel, sel)
	testenv.Eventually(t, time.Minute, "deleted isvc's series gone", func() error {
		s, err := prom.query(gone)
		if err != nil {
			return err
		}
		if len(s) > 0 {
			return fmt.Errorf("%d series left: %v", len(s), s)
		}
		return nil
	})
	t.Logf("%s: no series after deletion", gone)
}
