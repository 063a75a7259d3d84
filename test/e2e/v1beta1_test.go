package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/engine/vllm"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestV1beta1Acts: on the v1beta1 install the operator watches v1beta1 and acts on what only
// v1beta1 holds: adapters are loaded into each ready pod at run time, autoscaling bounds and the
// queue target go to the HPA, two or more pods get a PodDisruptionBudget, the gateway route is
// registered with its path, and status carries the endpoint and the loaded adapters. Where the
// Prometheus Operator's and Gateway API's CRDs are served, a ServiceMonitor and an HTTPRoute
// follow the model. Removing the adapters unloads them and drops the runtime LoRA switch;
// kubectl scale works on v1beta1.
func TestV1beta1Acts(t *testing.T) {
	ns := modelNamespace(t)
	crds := filepath.Join(env.Root, "test", "e2e", "testdata", "optional_crds.yaml")
	env.Kubectl(t, "apply", "-f", crds)
	env.Kubectl(t, "wait", "--for=condition=Established", "-f", crds, "--timeout=60s")
	w := useWebhookCRD(t)
	// Before the operator restarts without them (cleanups run last first).
	t.Cleanup(func() { env.Kubectl(t, "delete", "-f", crds, "--wait=true", "--timeout=60s") })
	kubectl := func(args ...string) string { return env.Kubectl(t, append([]string{w.cache}, args...)...) }
	f := filepath.Join(t.TempDir(), "lora.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: lora}
spec:
  baseModel: Qwen/Qwen3-8B
  adapters:
  - {name: sql, storageURI: "hf://org/sql-lora"}
  - {name: chat, storageURI: "hf://org/chat-lora"}
  autoscaling: {minReplicas: 2, maxReplicas: 6, targetQueueLength: 3}
  gateway: {route: /models/qwen-8b, priority: 10}
  gpusPerReplica: 1
`), 0o600); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	kubectl("apply", "-n", ns, "-f", f)
	ctx := context.Background()

	var endpoint string
	testenv.Eventually(t, 90*time.Second, "lora Ready with endpoint and loaded adapters", func() error {
		u, err := getVersion(t, true, ns, "lora")
		if err != nil {
			return err
		}
		var b crd.InferenceServiceV1beta1
		if err := runtimeFromUnstructured(u, &b); err != nil {
			return err
		}
		if b.Status.Phase != crd.PhaseReady || !slices.Equal(b.Status.LoadedAdapters, []string{"sql", "chat"}) || b.Status.Endpoint == "" {
			return fmt.Errorf("status %+v", b.Status)
		}
		endpoint = b.Status.Endpoint
		return nil
	})
	t.Logf("created to Ready with adapters loaded: %.1fs; endpoint %s", time.Since(created).Seconds(), endpoint)
	if endpoint != "http://lora."+ns+".svc:8000" {
		t.Fatalf("endpoint %q", endpoint)
	}

	d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "lora", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, vllm.EnableLoRAArg) || !slices.Contains(c.Env, corev1.EnvVar{Name: "VLLM_ALLOW_RUNTIME_LORA_UPDATING", Value: "True"}) {
		t.Fatalf("vLLM cannot load adapters at run time: args %v env %v", c.Args, c.Env)
	}
	pods, err := readyModelPods(t, ns, "lora")
	if err != nil || len(pods) == 0 {
		t.Fatalf("ready pods %d: %v", len(pods), err)
	}
	for _, p := range pods {
		if got, err := podAdapters(p.Status.PodIP); err != nil || fmt.Sprint(got) != fmt.Sprint(map[string]string{"chat": "org/chat-lora", "sql": "org/sql-lora"}) {
			t.Fatalf("pod %s serves adapters %v (%v)", p.Name, got, err)
		}
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, reconcile.AdaptersConfigMapName("lora"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("an adapters ConfigMap vLLM never reads: %v", err)
	}
	h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "lora", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *h.Spec.MinReplicas != 2 || h.Spec.MaxReplicas != 6 || h.Spec.Metrics[0].Pods.Target.AverageValue.Value() != 3 {
		t.Fatalf("HPA %d..%d target %v", *h.Spec.MinReplicas, h.Spec.MaxReplicas, h.Spec.Metrics[0].Pods.Target.AverageValue)
	}
	pdb, err := env.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "lora", metav1.GetOptions{})
	if err != nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Fatalf("PodDisruptionBudget: %v %+v", err, pdb)
	}
	if r, ok := env.gateway.route(ns, "lora"); !ok || r.Path != "/models/qwen-8b" || r.Priority != 10 || !slices.Equal(r.Adapters, []string{"sql", "chat"}) {
		t.Fatalf("gateway route %+v (registered %v)", r, ok)
	}
	sm, err := env.Dyn.Resource(reconcile.ServiceMonitorGVR).Namespace(ns).Get(ctx, "lora", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ServiceMonitor: %v", err)
	}
	if ep := fmt.Sprint(nested(sm, "spec", "endpoints")); ep != "[map[interval:15s path:/metrics port:http scheme:http]]" || len(sm.GetOwnerReferences()) != 1 {
		t.Fatalf("ServiceMonitor endpoints %s owners %v", ep, sm.GetOwnerReferences())
	}
	routes := env.Dyn.Resource(reconcile.HTTPRouteGVR).Namespace(ns)
	hr, err := routes.Get(ctx, "lora", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("HTTPRoute: %v", err)
	}
	if got := fmt.Sprint(nested(hr, "spec", "parentRefs"), nested(hr, "spec", "rules")); !strings.Contains(got, "name:public namespace:gateway-system") ||
		!strings.Contains(got, "value:/models/qwen-8b") || !strings.Contains(got, "name:lora port:8000") || !strings.Contains(got, "replacePrefixMatch:/v1/chat/completions") ||
		strings.Contains(got, "lora_adapter") || strings.Contains(got, "value:/models/qwen-8b ") {
		t.Fatalf("HTTPRoute spec %s", got)
	}
	// Deleted by someone: back, with a new UID.
	if err := routes.Delete(ctx, "lora", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the HTTPRoute restored", func() error {
		again, err := routes.Get(ctx, "lora", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if again.GetUID() == hr.GetUID() {
			return fmt.Errorf("same UID")
		}
		return nil
	})
	// The v1beta1 sample docs/api.md shows is valid as shipped.
	kubectl("apply", "--dry-run=server", "-n", ns, "-f", filepath.Join(env.Root, "manifests", "samples", "qwen3-8b-lora.yaml"))
	out := kubectl("get", "inferenceservices.v1beta1.ai.example.com", "lora", "-n", ns)
	t.Logf("kubectl get:\n%s", out)

	// Adapters removed through kubectl: unloaded from every pod, the runtime switch goes.
	kubectl("patch", "inferenceservices.v1beta1.ai.example.com", "lora", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/adapters"}]`)
	testenv.Eventually(t, 60*time.Second, "adapters unloaded, --enable-lora gone", func() error {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "lora", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if args := d.Spec.Template.Spec.Containers[0].Args; slices.Contains(args, vllm.EnableLoRAArg) {
			return fmt.Errorf("args %v", args)
		}
		u, err := getVersion(t, true, ns, "lora")
		if err != nil {
			return err
		}
		if la := nested(u, "status", "loadedAdapters"); la != nil {
			return fmt.Errorf("status.loadedAdapters %v", la)
		}
		return nil
	})

	// kubectl scale on v1beta1: refused while autoscaling is set (the XOR rule), then fixed
	// replicas after switching, with the HPA bounds of the seed (2..12), the raise from 1 to 4
	// held as the minimum until those pods have served (raisehold.go).
	if out, err := kubectlErr(t, nil, w.cache, "scale", "inferenceservices.v1beta1.ai.example.com/lora", "-n", ns, "--replicas=4"); err == nil || !strings.Contains(out, crd.RuleReplicasXorAutoscalingMs) {
		t.Fatalf("kubectl scale of an autoscaled isvc: want the XOR rule's refusal, got %v: %s", err, out)
	}
	kubectl("patch", "inferenceservices.v1beta1.ai.example.com", "lora", "-n", ns, "--type=merge", "-p", `{"spec":{"autoscaling":null,"replicas":1}}`)
	kubectl("scale", "inferenceservices.v1beta1.ai.example.com/lora", "-n", ns, "--replicas=4")
	testenv.Eventually(t, 60*time.Second, "HPA 4..12 after kubectl scale --replicas=4", func() error {
		h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "lora", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *h.Spec.MinReplicas != 4 || h.Spec.MaxReplicas != 12 || h.Spec.Metrics[0].Pods.Target.AverageValue.Value() != reconcile.TargetQueueLength {
			return fmt.Errorf("HPA %d..%d", *h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		return nil
	})
}

// TestStorageMigration: objects stored as v1alpha1 are rewritten as v1beta1 by the operator
// once v1beta1 becomes the storage version, storedVersions is cleared to [v1beta1], nothing in
// the objects or their children changes; the rollback moves them back the same way. What is
// stored is read from etcd itself.
func TestStorageMigration(t *testing.T) {
	ns := env.Namespace(t)
	n := envInt("MIGRATION_N", 20)
	t.Cleanup(func() { env.Kubectl(t, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=120s") })
	ctx := context.Background()
	for i := range n {
		if _, err := env.CreateISVC(ctx, ns, fmt.Sprintf("m%03d", i), map[string]any{"model": "m/x", "replicas": int64(1 + i%3), "gpusPerReplica": int64(0), "image": scheduleImage}); err != nil {
			t.Fatal(err)
		}
	}
	type snap struct {
		spec     any
		children map[string]types.UID
	}
	before := map[string]snap{}
	testenv.Eventually(t, 3*time.Minute, "every object Ready", func() error {
		for i := range n {
			name := fmt.Sprintf("m%03d", i)
			u, err := getVersion(t, false, ns, name)
			if err != nil {
				return err
			}
			if nested(u, "status", "phase") != string(crd.PhaseReady) {
				return fmt.Errorf("%s phase %v", name, nested(u, "status", "phase"))
			}
			d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s, err := env.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			before[name] = snap{spec: u.Object["spec"], children: map[string]types.UID{"Deployment": d.UID, "Service": s.UID}}
		}
		return nil
	})
	storedAs := func(name string) string { return storedVersion(t, ns, name) }
	countStored := func(apiVersion string) int {
		c := 0
		for i := range n {
			if storedAs(fmt.Sprintf("m%03d", i)) == apiVersion {
				c++
			}
		}
		return c
	}
	if got := countStored(crd.GroupVersion.String()); got != n {
		t.Fatalf("before: %d of %d stored as v1alpha1", got, n)
	}

	start := time.Now()
	w := useWebhookCRD(t)
	waitStoredVersions(t, 2*time.Minute, crd.VersionV1beta1)
	migrated := time.Since(start)
	if got := countStored(crd.GroupVersionV1beta1.String()); got != n {
		t.Fatalf("after the migration: %d of %d stored as v1beta1", got, n)
	}
	for name, b := range before {
		u, err := getVersion(t, false, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(u.Object["spec"], b.spec) {
			t.Fatalf("%s spec changed by the migration:\n%v\n%v", name, u.Object["spec"], b.spec)
		}
		d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || d.UID != b.children["Deployment"] {
			t.Fatalf("%s Deployment replaced or gone: %v", name, err)
		}
	}
	t.Logf("storage v1alpha1 -> v1beta1: %d objects rewritten and storedVersions [v1beta1] %.1fs after the CRD change; specs and children unchanged", n, migrated.Seconds())

	start = time.Now()
	w.rollBack(t)
	if got := countStored(crd.GroupVersion.String()); got != n {
		t.Fatalf("after the rollback: %d of %d stored as v1alpha1", got, n)
	}
	t.Logf("rollback v1beta1 -> v1alpha1: %d objects, storedVersions [v1alpha1] in %.1fs", n, time.Since(start).Seconds())
}

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// storedVersion is the apiVersion etcd holds ns/name's InferenceService in.
func storedVersion(t *testing.T, ns, name string) string {
	t.Helper()
	raw, err := env.Cluster.EtcdGet(context.Background(), "/registry/ai.example.com/inferenceservices/"+ns+"/"+name)
	if err != nil || raw == nil {
		t.Fatalf("etcd %s: %v (%d bytes)", name, err, len(raw))
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		t.Fatalf("stored %s is not JSON: %v", name, err)
	}
	return tm.APIVersion
}
