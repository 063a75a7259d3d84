package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// freeLoopbackPort returns a port that was free on 127.0.0.1 a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// gatewayParent is the Gateway HTTPRoutes attach to, when the HTTPRoute CRD is served.
const gatewayParent = "gateway-system/public"

// webhookInstall is the v1beta1 install the conversion tests switch to.
type webhookInstall struct {
	port    int
	certDir string
	cache   string // kubectl's private discovery cache
	// restored: the suite's CRD and operator are back (restoreSuiteCRD ran).
	restored bool
}

// applyCRD writes def to a file and applies it with kubectl.
func applyCRD(t *testing.T, cache string, def *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	raw, err := yaml.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(f, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, cache, "apply", "-f", f)
}

func (w *webhookInstall) definition() *apiextensionsv1.CustomResourceDefinition {
	return crd.DefinitionWithV1beta1(apiextensionsv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", w.port, crd.WebhookPath))})
}

// start runs the shared operator serving the webhook and migrating storage every second.
func (w *webhookInstall) start(t *testing.T) {
	t.Helper()
	if env.op != nil {
		return
	}
	if err := startOperator(testenv.Ctx(t, 2*time.Minute), fmt.Sprintf("--webhook-bind-address=127.0.0.1:%d", w.port),
		"--webhook-cert-dir="+w.certDir, "--webhook-ca-sync-period=1s", "--storage-migration-period=1s", "--gateway-parent="+gatewayParent); err != nil {
		t.Fatal(err)
	}
}

// waitStoredVersions polls the CRD until status.storedVersions is exactly want.
func waitStoredVersions(t *testing.T, timeout time.Duration, want ...string) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("storedVersions %v", want), func() error {
		u, err := env.Dyn.Resource(crdGVR).Get(context.Background(), "inferenceservices.ai.example.com", metav1.GetOptions{})
		if err != nil {
			return err
		}
		got, _, _ := unstructured.NestedStringSlice(u.Object, "status", "storedVersions")
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("storedVersions %v", got)
		}
		return nil
	})
}

// rollBack moves storage back to v1alpha1 the documented way: both versions served with
// v1alpha1 as storage, the operator's migration rewrites every object, storedVersions becomes
// [v1alpha1]; only then may v1beta1 leave the CRD.
func (w *webhookInstall) rollBack(t *testing.T) {
	t.Helper()
	w.start(t)
	def := w.definition()
	def.Spec.Versions[0].Storage, def.Spec.Versions[1].Storage = true, false
	applyCRD(t, w.cache, def)
	waitStoredVersions(t, 2*time.Minute, crd.Version)
}

// useWebhookCRD replaces the suite's CRD (v1alpha1 alone, manifests/crd) with the v1beta1 one
// (the storage version), converting through the shared operator, restarted with
// --webhook-bind-address. When the test ends, storage is rolled back to v1alpha1 and the suite's
// CRD and operator are back.
func useWebhookCRD(t *testing.T) *webhookInstall {
	return useCRD(t, (*webhookInstall).definition)
}

// useCRD is useWebhookCRD applying def's CRD, which must convert through w's address.
func useCRD(t *testing.T, def func(*webhookInstall) *apiextensionsv1.CustomResourceDefinition) *webhookInstall {
	t.Helper()
	w := &webhookInstall{port: freeLoopbackPort(t), certDir: filepath.Join(t.TempDir(), "webhook-certs"), cache: "--cache-dir=" + t.TempDir()}
	// The namespace controller finishing a namespace while the CRD's versions change can miss
	// its isvcs (their discovery in flux): seen here, an earlier test's isvc outlived its
	// namespace in etcd, and the operator retried it for the rest of the run. No namespace
	// may be terminating when the swap (or the operator's stop, which holds finalizers) begins.
	quiesce(t)
	stopOperator(t)
	t.Cleanup(func() {
		if !w.restored {
			w.restoreSuiteCRD(t)
		}
	})
	env.Kubectl(t, "apply", "-f", filepath.Join(env.Root, "manifests", "components", "v1beta1", "storage_migration_rbac.yaml"))
	applyCRD(t, w.cache, def(w))
	w.start(t)
	// The operator writes its CA into the CRD; then v1beta1 lists convert.
	ca, err := os.ReadFile(filepath.Join(w.certDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the operator's CA in the CRD's caBundle", func() error {
		u, err := env.Dyn.Resource(crdGVR).Get(context.Background(), "inferenceservices.ai.example.com", metav1.GetOptions{})
		if err != nil {
			return err
		}
		b64, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
		var bundle []byte
		_ = json.Unmarshal([]byte(`"`+b64+`"`), &bundle)
		if !strings.Contains(string(bundle), string(ca)) {
			return fmt.Errorf("caBundle lacks the operator's CA (%d bytes)", len(bundle))
		}
		return nil
	})
	return w
}

// restoreSuiteCRD rolls storage back to v1alpha1 (rollBack), then applies the suite's CRD
// (manifests/crd, as manifests/overlays/v1alpha1 installs it) with the operator stopped and
// restarts the suite's operator.
func (w *webhookInstall) restoreSuiteCRD(t *testing.T) {
	t.Helper()
	w.restored = true
	w.rollBack(t)
	// The v1alpha1-only CRD with the operator stopped: while the CRD converts through a webhook,
	// reads of objects stored in another version need it, caches included.
	stopOperator(t)
	env.Kubectl(t, w.cache, "apply", "-k", filepath.Join(env.Root, "manifests", "crd"))
	testenv.Eventually(t, 30*time.Second, "the suite's CRD back", func() error {
		out, _, err := env.Cluster.Kubectl(testenv.Ctx(t, time.Minute), "get", "crd", "inferenceservices.ai.example.com", "-o", "jsonpath={.spec.versions[*].name} {.spec.conversion.strategy}")
		if err != nil {
			return err
		}
		if out != "v1alpha1 None" {
			return fmt.Errorf("CRD versions and conversion: %q", out)
		}
		if _, err := env.Kube.Discovery().ServerResourcesForGroupVersion(crd.GroupVersionV1beta1.String()); !isNotFound(err) {
			return fmt.Errorf("v1beta1 still in discovery: %v", err)
		}
		return nil
	})
	// A kubectl of this test that forgot w.cache left v1beta1 in the suite's discovery cache.
	if err := env.Cluster.ForgetDiscovery(); err != nil {
		t.Errorf("forgetting kubectl's discovery: %v", err)
	}
	if err := startOperator(testenv.Ctx(t, 2*time.Minute)); err != nil {
		t.Errorf("restarting the operator: %v", err)
	}
}

func stopOperator(t *testing.T) {
	t.Helper()
	if env.op == nil {
		return
	}
	if err := env.op.Stop(30 * time.Second); err != nil {
		t.Logf("operator stop: %v", err)
	}
	env.op = nil
}

func getVersion(t *testing.T, gvr bool, ns, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	r := crd.Resource
	if gvr {
		r = crd.ResourceV1beta1
	}
	return env.Dyn.Resource(r).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
}

func nested(u *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}

// TestConversionV1beta1: with the webhook served by the running operator, objects written in
// either version read back in both, unchanged, and the webhook being down is a clear error.
func TestConversionV1beta1(t *testing.T) {
	ns := env.Namespace(t)
	// Runs after the default CRD and operator are back: the isvcs go now, through their
	// finalizers, so their teardown does not overlap later tests' measurements.
	t.Cleanup(func() {
		env.Kubectl(t, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s")
	})
	// A private discovery cache: the shared one must not remember v1beta1 as the preferred
	// version of isvc once the default CRD is back.
	w := useWebhookCRD(t)
	cache := w.cache
	kubectl := func(t *testing.T, args ...string) string { return env.Kubectl(t, append([]string{cache}, args...)...) }
	kubectlErr := func(t *testing.T, env2 []string, args ...string) (string, error) {
		return kubectlErr(t, env2, append([]string{cache}, args...)...)
	}
	applyYAML := func(t *testing.T, ns, manifest string) {
		f := filepath.Join(t.TempDir(), "m.yaml")
		if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		kubectl(t, "apply", "-n", ns, "-f", f)
	}
	// The plural: kubectl expands a short name with a version to the preferred version.
	const v1beta1 = "inferenceservices.v1beta1.ai.example.com"
	const v1alpha1 = "inferenceservices.v1alpha1.ai.example.com"

	testenv.Eventually(t, 30*time.Second, "v1beta1 to be served", func() error {
		_, stderr, err := env.Cluster.Kubectl(testenv.Ctx(t, time.Minute), cache, "get", v1beta1, "-n", ns)
		if err != nil {
			return fmt.Errorf("%v: %s", err, stderr)
		}
		return nil
	})

	// 1. Created as v1alpha1: reads as v1beta1, and as v1alpha1 unchanged.
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: alpha, annotations: {team: search}}
spec: {model: Qwen/Qwen3-0.6B, replicas: 2, gpusPerReplica: 1, queueName: online}
`)
	alphaBefore, err := getVersion(t, false, ns, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	b, err := getVersion(t, true, ns, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if b.GetAPIVersion() != "ai.example.com/v1beta1" || nested(b, "spec", "baseModel") != "Qwen/Qwen3-0.6B" || nested(b, "spec", "replicas") != int64(2) ||
		nested(b, "spec", "queueName") != "online" || nested(b, "spec", "model") != nil || !reflect.DeepEqual(b.GetAnnotations(), alphaBefore.GetAnnotations()) {
		t.Fatalf("v1alpha1 object read as v1beta1: %v", b.Object)
	}
	a, err := getVersion(t, false, ns, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Object["spec"], alphaBefore.Object["spec"]) || !reflect.DeepEqual(a.GetAnnotations(), alphaBefore.GetAnnotations()) {
		t.Fatalf("v1alpha1 read changed:\n%v\n%v", a.Object, alphaBefore.Object)
	}

	// 2. Created as v1beta1 with adapters and autoscaling: reads as v1alpha1 (what it can hold,
	// the rest in an annotation) and back as v1beta1 with nothing lost, also after a v1alpha1 write.
	applyYAML(t, ns, `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: beta}
spec:
  baseModel: Qwen/Qwen3-8B
  adapters:
  - {name: sql, storageURI: "hf://org/sql-lora"}
  - {name: chat, storageURI: "s3://bucket/chat-lora"}
  autoscaling: {minReplicas: 2, maxReplicas: 6, targetQueueLength: 4}
  gateway: {route: /qwen-8b, priority: 10}
  gpusPerReplica: 2
  priorityClassName: online
`)
	betaBefore, err := getVersion(t, true, ns, "beta")
	if err != nil {
		t.Fatal(err)
	}
	a, err = getVersion(t, false, ns, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if nested(a, "spec", "model") != "Qwen/Qwen3-8B" || nested(a, "spec", "replicas") != int64(2) || nested(a, "spec", "gpusPerReplica") != int64(2) ||
		!strings.Contains(a.GetAnnotations()[crd.AnnotationV1beta1Spec], `"sql"`) || nested(a, "spec", "adapters") != nil {
		t.Fatalf("v1beta1 object read as v1alpha1: %v", a.Object)
	}
	kubectl(t, "label", "-n", ns, v1alpha1+"/beta", "written-as=v1alpha1")
	b, err = getVersion(t, true, ns, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.Object["spec"], betaBefore.Object["spec"]) {
		t.Fatalf("v1beta1 spec after a round trip:\n got %v\nwant %v", b.Object["spec"], betaBefore.Object["spec"])
	}
	if _, leaked := b.GetAnnotations()[crd.AnnotationV1beta1Spec]; leaked || b.GetLabels()["written-as"] != "v1alpha1" {
		t.Fatalf("v1beta1 metadata: %v", b.Object["metadata"])
	}

	// 3. kubectl in both versions, with each version's columns.
	if out := kubectl(t, "get", v1alpha1, "-n", ns); !strings.Contains(out, "MODEL") || strings.Contains(out, "BASE MODEL") || !strings.Contains(out, "alpha") || !strings.Contains(out, "beta") {
		t.Fatalf("kubectl get %s:\n%s", v1alpha1, out)
	}
	if out := kubectl(t, "get", v1beta1, "-n", ns); !strings.Contains(out, "BASE MODEL") || !strings.Contains(out, "Qwen/Qwen3-8B") || !strings.Contains(out, "alpha") {
		t.Fatalf("kubectl get %s:\n%s", v1beta1, out)
	}

	// 3b. kubectl edit in either version, read back through the other.
	if out, err := kubectlErr(t, []string{`EDITOR=sed -i -e s/^\ \ replicas:\ 2$/\ \ replicas:\ 3/`}, "edit", "-n", ns, v1alpha1+"/alpha"); err != nil {
		t.Fatalf("kubectl edit %s/alpha: %v: %s", v1alpha1, err, out)
	}
	if b, err := getVersion(t, true, ns, "alpha"); err != nil || nested(b, "spec", "replicas") != int64(3) {
		t.Fatalf("edited in v1alpha1, read in v1beta1: %v %v", err, nested(b, "spec", "replicas"))
	}
	if out, err := kubectlErr(t, []string{`EDITOR=sed -i -e s/maxReplicas:\ 6$/maxReplicas:\ 7/`}, "edit", "-n", ns, v1beta1+"/beta"); err != nil {
		t.Fatalf("kubectl edit %s/beta: %v: %s", v1beta1, err, out)
	}
	if a, err := getVersion(t, false, ns, "beta"); err != nil || !strings.Contains(a.GetAnnotations()[crd.AnnotationV1beta1Spec], `"maxReplicas":7`) {
		t.Fatalf("edited in v1beta1, read in v1alpha1: %v %v", err, a.GetAnnotations())
	}
	t.Log("kubectl edit: v1alpha1 replicas 2->3 reads as v1beta1 replicas 3; v1beta1 maxReplicas 6->7 reads as v1alpha1's kept annotation")

	// 4. The v1beta1 CEL rules, with their messages.
	for _, tc := range []struct{ name, spec, want string }{
		{"dup", `{baseModel: m, replicas: 1, adapters: [{name: a, storageURI: "hf://x"}, {name: a, storageURI: "hf://y"}]}`, crd.RuleAdapterNamesUniqueMsg},
		{"minmax", `{baseModel: m, autoscaling: {minReplicas: 5, maxReplicas: 2}}`, crd.RuleMinLEMaxMessage},
		{"idle", `{baseModel: m, autoscaling: {minReplicas: 1, maxReplicas: 2, idleSeconds: 60}}`, crd.RuleIdleNeedsZeroMessage},
		{"idleshort", `{baseModel: m, autoscaling: {minReplicas: 0, maxReplicas: 2, idleSeconds: 30}}`, crd.RuleIdleSecondsMessage},
		{"zeromultinode", `{baseModel: m, gpusPerReplica: 2, multiNode: {nodes: 2}, autoscaling: {minReplicas: 0, maxReplicas: 2}}`, crd.RuleZeroNotMultiNodeMsg},
		{"both", `{baseModel: m, replicas: 1, autoscaling: {minReplicas: 1, maxReplicas: 2}}`, crd.RuleReplicasXorAutoscalingMs},
		{"neither", `{baseModel: m}`, crd.RuleReplicasXorAutoscalingMs},
		{"dash", `{baseModel: --trust-remote-code, replicas: 1}`, crd.RuleBaseModelMessage},
		{"Bad_Name", `{baseModel: m, replicas: 1}`, crd.RuleNameMessage},
	} {
		f := filepath.Join(t.TempDir(), tc.name+".yaml")
		manifest := fmt.Sprintf("apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: %s}\nspec: %s\n", tc.name, tc.spec)
		if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := kubectlErr(t, nil, "create", "-n", ns, "-f", f)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: want refusal with %q, got %v: %s", tc.name, tc.want, err, out)
		}
	}

	// 5. The webhook unreachable while the operator runs (its Service lost its endpoints; here
	// the CRD points at a dead port): the operator's probe reports it as a gauge and one
	// Warning Event on the CRD with the API server's reason, and the recovery as well.
	dead := w.definition()
	dead.Spec.Conversion.Webhook.ClientConfig.URL = ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", freeLoopbackPort(t), crd.WebhookPath))
	applyCRD(t, cache, dead)
	conversionUp := func() (float64, error) {
		fams, err := env.op.Scrape()
		if err != nil {
			return 0, err
		}
		f := fams["inferenceservice_conversion_webhook_up"]
		if f == nil || len(f.GetMetric()) != 1 {
			return 0, fmt.Errorf("inferenceservice_conversion_webhook_up not exported")
		}
		return f.GetMetric()[0].GetGauge().GetValue(), nil
	}
	waitGauge := func(want float64) {
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("inferenceservice_conversion_webhook_up %v", want), func() error {
			v, err := conversionUp()
			if err != nil {
				return err
			}
			if v != want {
				return fmt.Errorf("gauge %v", v)
			}
			return nil
		})
	}
	waitGauge(0)
	var described string
	testenv.Eventually(t, 30*time.Second, "a ConversionWebhookFailing event on the CRD", func() error {
		described = kubectl(t, "describe", "crd", "inferenceservices.ai.example.com")
		if !strings.Contains(described, "ConversionWebhookFailing") || !strings.Contains(described, "connection refused") {
			return fmt.Errorf("not yet in kubectl describe crd")
		}
		return nil
	})
	for _, l := range strings.Split(described, "\n") {
		if strings.Contains(l, "ConversionWebhookFailing") {
			t.Logf("kubectl describe crd: %s", strings.TrimSpace(l))
		}
	}
	applyCRD(t, cache, w.definition())
	waitGauge(1)
	testenv.Eventually(t, 30*time.Second, "a ConversionWebhookRecovered event", func() error {
		if !strings.Contains(kubectl(t, "describe", "crd", "inferenceservices.ai.example.com"), "ConversionWebhookRecovered") {
			return fmt.Errorf("not yet")
		}
		return nil
	})

	// 6. The webhook down: reads in v1alpha1 of objects stored as v1beta1 fail with the API
	// server's conversion error, naming the webhook and why; hence every replica serves it.
	stopOperator(t)
	out, err := kubectlErr(t, nil, "get", "-n", ns, v1alpha1+"/beta")
	if err == nil || !strings.Contains(out, "conversion webhook for ai.example.com/v1beta1, Kind=InferenceService failed") || !strings.Contains(out, "connection refused") {
		t.Fatalf("with the webhook down, want the API server's conversion error, got %v: %s", err, out)
	}
	t.Logf("webhook down: %s", strings.TrimSpace(out))
}
