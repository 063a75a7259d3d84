package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

const (
	adapterNamespace = "inferenceservice-system"
	adapterName      = "inferenceservice-metrics-adapter"
)

var (
	apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	adapterBuild   struct {
		once sync.Once
		bin  string
		err  error
	}
)

// metricsAdapter is the operator's metrics adapter run as the default install runs it: the
// manifests' ServiceAccount and RBAC, the APIServices it registers itself, reached by the
// aggregator through an ExternalName Service on 127.0.0.1 (the local cluster's pods have no
// network of their own, and EndpointSlices refuse loopback addresses).
type metricsAdapter struct {
	*operator.MetricsAdapter
	port               int
	kubeconfig, certs  string
	logPath            string
	args               []string
	startedAt, killsAt int
}

// startMetricsAdapter starts it and, when the test ends, stops it and removes what it
// registered, so the suite's other tests run on a cluster without custom metrics as before.
func startMetricsAdapter(t *testing.T, args ...string) *metricsAdapter {
	t.Helper()
	ctx := testenv.Ctx(t, 5*time.Minute)
	adapterBuild.once.Do(func() { adapterBuild.bin, adapterBuild.err = operator.BuildMetricsAdapter(ctx, env.Dir) })
	if adapterBuild.err != nil {
		t.Fatal(adapterBuild.err)
	}
	for _, f := range []string{"service_account.yaml", "rbac.yaml"} {
		env.Kubectl(t, "apply", "-f", filepath.Join(env.Root, "manifests", "metrics-adapter", f))
	}
	kubeconfig, err := env.Cluster.ServiceAccountKubeconfig(ctx, adapterNamespace, adapterName)
	if err != nil {
		t.Fatal(err)
	}
	m := &metricsAdapter{port: freeLoopbackPort(t), kubeconfig: kubeconfig, certs: t.TempDir(),
		logPath: filepath.Join(env.Dir, fmt.Sprintf("metrics-adapter-%s.log", strings.ReplaceAll(t.Name(), "/", "_")))}
	m.args = append([]string{fmt.Sprintf("--apiservice-port=%d", m.port), "--scrape-period=3s", "-v=2"}, args...)
	applyYAML(t, adapterNamespace, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s}
spec:
  type: ExternalName
  externalName: 127.0.0.1
  ports: [{name: https, port: %d}]
`, adapterName, m.port))
	t.Cleanup(func() {
		if m.MetricsAdapter != nil {
			m.Kill()
		}
		for _, v := range []string{"v1beta2", "v1beta1"} {
			apiService := v + ".custom.metrics.k8s.io"
			if u, err := env.Dyn.Resource(apiServicesGVR).Get(context.Background(), apiService, metav1.GetOptions{}); err == nil &&
				u.GetLabels()["app.kubernetes.io/managed-by"] == "inferenceservice-metrics-adapter" {
				env.Kubectl(t, "delete", "apiservice", apiService, "--ignore-not-found")
			}
		}
		env.Kubectl(t, "delete", "service", "-n", adapterNamespace, adapterName, "--ignore-not-found")
		if t.Failed() {
			if b, err := os.ReadFile(m.logPath); err == nil {
				t.Logf("metrics adapter log (tail):\n%s", tail(string(b), 40))
			}
		}
	})
	m.start(t)
	return m
}

func (m *metricsAdapter) start(t *testing.T) {
	t.Helper()
	a, err := operator.StartMetricsAdapter(testenv.Ctx(t, 2*time.Minute), adapterBuild.bin, m.logPath, m.kubeconfig, m.certs, m.port, m.args...)
	if err != nil {
		t.Fatal(err)
	}
	m.MetricsAdapter = a
}

// waitAvailable waits for the aggregator to serve custom.metrics.k8s.io through the adapter.
func (m *metricsAdapter) waitAvailable(t *testing.T) {
	t.Helper()
	env.Kubectl(t, "wait", "--for=condition=Available", "apiservice/v1beta2.custom.metrics.k8s.io", testenv.Timeout(time.Minute))
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// TestForeignCustomMetricsAPIServiceLeftAlone: where another component (prometheus-adapter
// here) already serves custom.metrics.k8s.io, the adapter leaves its APIService exactly as it
// is, says which Service serves it, and registers only the version left free.
func TestForeignCustomMetricsAPIServiceLeftAlone(t *testing.T) {
	const foreign = "v1beta2.custom.metrics.k8s.io"
	applyYAML(t, "default", `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta2.custom.metrics.k8s.io
  labels: {app.kubernetes.io/name: prometheus-adapter}
spec:
  group: custom.metrics.k8s.io
  version: v1beta2
  groupPriorityMinimum: 100
  versionPriority: 200
  insecureSkipTLSVerify: true
  service: {namespace: monitoring, name: prometheus-adapter, port: 443}
`)
	t.Cleanup(func() { env.Kubectl(t, "delete", "apiservice", foreign, "--ignore-not-found") })
	before, err := env.Dyn.Resource(apiServicesGVR).Get(context.Background(), foreign, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := startMetricsAdapter(t, "--apiservice-resync=1s")
	testenv.Eventually(t, time.Minute, "the adapter to name the other component and register v1beta1 only", func() error {
		log, err := os.ReadFile(m.logPath)
		if err != nil {
			return err
		}
		if !strings.Contains(string(log), `servedBy="monitoring/prometheus-adapter"`) {
			return fmt.Errorf("the adapter has not said who serves %s yet", foreign)
		}
		ours, err := env.Dyn.Resource(apiServicesGVR).Get(context.Background(), "v1beta1.custom.metrics.k8s.io", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ours.GetLabels()["app.kubernetes.io/managed-by"] != "inferenceservice-metrics-adapter" {
			return fmt.Errorf("v1beta1 labels %v", ours.GetLabels())
		}
		return nil
	})
	// The pass that named it is the one that would have taken it over.
	after, err := env.Dyn.Resource(apiServicesGVR).Get(context.Background(), foreign, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, _, _ := unstructured.NestedMap(after.Object, "spec", "service")
	if !sameSpec(before, after) || svc["name"] != "prometheus-adapter" {
		t.Fatalf("the other component's APIService changed: %v", after.Object)
	}
	t.Logf("%s left to monitoring/prometheus-adapter (resourceVersion %s before, %s after: only the aggregator's status moves)", foreign, before.GetResourceVersion(), after.GetResourceVersion())
}

// sameSpec: the aggregator writes an APIService's status (Available), never its spec.
func sameSpec(a, b *unstructured.Unstructured) bool {
	x, _, _ := unstructured.NestedMap(a.Object, "spec")
	y, _, _ := unstructured.NestedMap(b.Object, "spec")
	return fmt.Sprint(x) == fmt.Sprint(y) && fmt.Sprint(a.GetLabels()) == fmt.Sprint(b.GetLabels())
}

// TestMetricsAdapterReadsOnlyTheOperatorsPods: a pod that copies a model pod's labels and spec
// but that no InferenceService's children control (a tenant's impostor) is ready and serves
// vLLM's /metrics, yet the adapter never reads it: the model's HPA query lists its own pods only,
// and the impostor by name has no metric. The owner chain is resolved on the real API server's
// ReplicaSet and Deployment, through the adapter's own RBAC.
func TestMetricsAdapterReadsOnlyTheOperatorsPods(t *testing.T) {
	ns := env.Namespace(t)
	adapter := startMetricsAdapter(t)
	adapter.waitAvailable(t)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: real}
spec: {model: Qwen/Qwen3-0.6B, replicas: 1, gpusPerReplica: 1}
`)
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/real", testenv.Timeout(2*time.Minute))
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ai.example.com/inferenceservice=real"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the model's pods: %v, %v", pods, err)
	}
	model := pods.Items[0]
	// Impostors: the model pod's spec and labels (but the ReplicaSet's pod-template-hash, or
	// the ReplicaSet would adopt it), one beside the model and one in a tenant's own namespace.
	tenant := ns + "-tenant"
	env.Kubectl(t, "create", "namespace", tenant)
	t.Cleanup(func() {
		_, _, _ = env.Cluster.Kubectl(context.Background(), "delete", "namespace", tenant, "--wait=false")
	})
	labels := map[string]string{}
	for k, v := range model.Labels {
		if k != "pod-template-hash" {
			labels[k] = v
		}
	}
	for _, where := range []string{ns, tenant} {
		impostor := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "impostor", Namespace: where, Labels: labels}, Spec: *model.Spec.DeepCopy()}
		impostor.Spec.NodeName = ""
		impostor.Spec.ServiceAccountName, impostor.Spec.DeprecatedServiceAccount = "", ""
		if _, err := env.Kube.CoreV1().Pods(where).Create(context.Background(), impostor, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, "wait", "-n", where, "--for=condition=Ready", "pod/impostor", testenv.Timeout(2*time.Minute))
	}

	// Two scrape rounds after the impostors are ready: they would have been read by then.
	tlsCfg, err := rest.TLSConfigFor(env.Cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	passes := func() float64 {
		fams, err := adapter.Scrape(tlsCfg)
		if err != nil {
			return -1
		}
		return operator.SumCounter(fams, "inferenceservice_metrics_adapter_scrape_passes_total", nil)
	}
	from := passes()
	testenv.Eventually(t, time.Minute, "two scrape rounds since the impostors are ready", func() error {
		if n := passes(); n < from+2 {
			return fmt.Errorf("%v rounds, want %v", n, from+2)
		}
		return nil
	})
	query := func(namespace string) string {
		return "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + namespace + "/pods/*/num_requests_waiting?labelSelector=ai.example.com%2Finferenceservice%3Dreal"
	}
	testenv.Eventually(t, 30*time.Second, "the model's HPA query answered by its own pod only", func() error {
		out, _, err := env.Cluster.Kubectl(context.Background(), "get", "--raw", query(ns))
		if err != nil {
			return err
		}
		if strings.Contains(out, `"name":"impostor"`) {
			t.Fatalf("the impostor pod's reading is served to the model's HPA: %s", out)
		}
		if !strings.Contains(out, `"name":"`+model.Name+`"`) {
			return fmt.Errorf("no reading of %s yet: %s", model.Name, out)
		}
		return nil
	})
	if out, _, err := env.Cluster.Kubectl(context.Background(), "get", "--raw", query(tenant)); err != nil || strings.Contains(out, "impostor") {
		t.Fatalf("the tenant's impostor: %s, %v", out, err)
	}
	// Its readiness includes the first scrape round, passed by now.
	c := tlsCfg.Clone()
	c.InsecureSkipVerify = true // the adapter's self-signed serving certificate
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: c}}).Get("https://" + adapter.Addr + "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "[+]scrape-first-pass ok") {
		t.Fatalf("/readyz: %s\n%s", resp.Status, body)
	}
	t.Logf("the model's pod %s read; the impostors, ready and serving /metrics, never", model.Name)
}

// TestMetricsAdapterReadsLeaderWorkerSetLeaders: a multi-node model's pods are the
// LeaderWorkerSet controller's (pod -> StatefulSet -> LeaderWorkerSet -> InferenceService, and
// a worker's StatefulSet is its leader pod's): the adapter, started with the LeaderWorkerSet API
// served, resolves that chain on the real objects and serves the leaders' queue to the HPA.
func TestMetricsAdapterReadsLeaderWorkerSetLeaders(t *testing.T) {
	startLWS(t)
	w := useWebhookCRD(t) // restarts the operator, which now discovers LeaderWorkerSet
	ns := env.Namespace(t)
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	adapter := startMetricsAdapter(t)
	adapter.waitAvailable(t)
	// Through the webhook CRD's own kubectl cache: the default one must never learn v1beta1,
	// which later tests no longer serve.
	applyYAMLWith(t, w.cache, ns, `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: big}
spec:
  baseModel: deepseek-ai/DeepSeek-V3
  replicas: 1
  gpusPerReplica: 16
  multiNode: {nodes: 2}
`)
	testenv.Eventually(t, 3*time.Minute, "big Ready with its group", func() error {
		i, says := isvcSays(t, ns, "big")
		if i == nil || i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 1 {
			return fmt.Errorf("%s", says)
		}
		return nil
	})
	var leader string
	for _, p := range groupPods(t, ns, "big") {
		if p.Labels[kinds.LWSWorkerLabel] == "0" {
			leader = p.Name
		}
	}
	if leader == "" {
		t.Fatal("no leader pod")
	}
	testenv.Eventually(t, time.Minute, "the leader's queue served", func() error {
		out, _, err := env.Cluster.Kubectl(context.Background(), "get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+
			"/pods/*/num_requests_waiting?labelSelector=ai.example.com%2Finferenceservice%3Dbig")
		if err != nil {
			return err
		}
		if !strings.Contains(out, `"name":"`+leader+`"`) {
			return fmt.Errorf("no reading of %s yet: %s", leader, out)
		}
		return nil
	})
	t.Logf("leader %s read through its StatefulSet and LeaderWorkerSet", leader)
}
