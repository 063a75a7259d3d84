package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestCanaryRolloutOnPrometheus: with --rollout-prometheus-url, the version answering 20%
// errors is rolled back within its first step as on the pods' own reads, its numbers now from
// a real Prometheus scraping the model's pods and its canary's as the model's ServiceMonitor
// labels them (namespace, pod, and the model label podTargetLabels carries: NAME for the
// stable, NAME.canary for the canary); Prometheus' query log shows the operator's queries of
// both sides.
func TestCanaryRolloutOnPrometheus(t *testing.T) {
	eppBin, gwBin := poolBins(t)
	crds := filepath.Join(operator.EPPManifests(eppBin), "crd")
	env.Kubectl(t, "apply", "-f", crds)
	env.Kubectl(t, "wait", "--for=condition=Established", "-f", crds, "--timeout=60s")
	t.Cleanup(func() {
		stopOperator(t)
		env.Kubectl(t, "delete", "-f", crds, "--wait=true", "--timeout=60s")
		restartOperator(t)
	})
	prom, queryLog := startModelsPrometheus(t)
	w := useWebhookCRD(t)
	startRolloutOperator(t, w, "--rollout-prometheus-url=http://"+prom.addr)
	gwAddr, _, stopGW, err := operator.StartGateway(testenv.Ctx(t, time.Minute), gwBin, filepath.Join(env.Dir, "gateway-rollout-prom.log"),
		"--kubeconfig="+env.Cluster.KubeconfigPath(), "--gateway="+gatewayParent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopGW() })
	var restartMu sync.Mutex
	testCanaryRollout(t, rolloutCase{name: "errors", env: `[{"name":"MODEL_VERSION","value":"v2"},{"name":"LOCALCLUSTER_VLLM_ERROR_RATE","value":"0.2"}]`,
		want: crd.RolloutRolledBack, failed: "error rate"}, w, gwAddr, buildPlugin(t), &restartMu)

	b, err := os.ReadFile(queryLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`ai_example_com_inferenceservice=\"m.canary\"`, `ai_example_com_inferenceservice=\"m\"`,
		`http_requests_total`, `vllm:time_to_first_token_seconds_bucket`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Prometheus' query log has no query with %s:\n%.3000s", want, b)
		}
	}
}

// startModelsPrometheus runs a real Prometheus scraping every model pod of the cluster every
// second, labelled as the model's ServiceMonitor labels its series, the pods found again each
// second (a file_sd file the test rewrites, as the ServiceMonitor's endpoints follow the
// Services' pods), with its queries logged; it returns the server and the query log's path.
func startModelsPrometheus(t *testing.T) (*promServer, string) {
	t.Helper()
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.yaml")
	write := func() error {
		pods, err := env.Kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: kinds.InstanceLabel})
		if err != nil {
			return err
		}
		var groups []any
		for _, p := range pods.Items {
			if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
				continue
			}
			groups = append(groups, map[string]any{
				"targets": []any{net.JoinHostPort(p.Status.PodIP, fmt.Sprint(reconcile.Port))},
				"labels": map[string]any{"namespace": p.Namespace, "pod": p.Name,
					prometheusLabelName(kinds.InstanceLabel): p.Labels[kinds.InstanceLabel]},
			})
		}
		if groups == nil {
			groups = []any{}
		}
		b, err := yaml.Marshal(groups)
		if err != nil {
			return err
		}
		tmp := targets + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, targets)
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := write(); err != nil {
					t.Logf("scrape targets: %v", err)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	queryLog := filepath.Join(dir, "queries.log")
	prom := runPrometheus(t, dir, map[string]any{
		"global": map[string]any{"scrape_interval": "1s", "query_log_file": queryLog},
		"scrape_configs": []any{map[string]any{"job_name": "models",
			"file_sd_configs": []any{map[string]any{"files": []any{targets}, "refresh_interval": "1s"}}}},
	})
	return prom, queryLog
}
