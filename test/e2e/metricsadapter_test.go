package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
	*operator.Adapter
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
	adapterBuild.once.Do(func() { adapterBuild.bin, adapterBuild.err = operator.BuildAdapter(ctx, env.Dir) })
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
		if m.Adapter != nil {
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
	a, err := operator.StartAdapter(testenv.Ctx(t, 2*time.Minute), adapterBuild.bin, m.logPath, m.kubeconfig, m.certs, m.port, m.args...)
	if err != nil {
		t.Fatal(err)
	}
	m.Adapter = a
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
