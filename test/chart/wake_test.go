package chart

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// wakeMaxWait is the activator's hold bound the test installs: longer than a local cold start.
const wakeMaxWait = 40 * time.Second

// TestHelmScaleToZeroInAnotherNamespace: the chart installed as a platform team installs it,
// helm install -n ai-platform --create-namespace, wakes a model at zero through its own
// activator. Installed with the activator off, the operator is given no activator, and a model
// at minReplicas 0 goes to sleep saying that only a change of spec wakes it; a second release
// is refused, naming the first. helm upgrade turns the activator on: the operator is given the
// activator of the release's namespace, the model's status names it, and a request through it
// (the path form, an InferenceService's in-cluster URL) is held and answered once the pod it
// woke serves: the activator's RBAC subjects, its admission policy and the models'
// NetworkPolicies all name the release's namespace.
func TestHelmScaleToZeroInAnotherNamespace(t *testing.T) {
	const ns = "ai-platform"
	bin, err := Bin(testenv.Ctx(t, 15*time.Minute), env.Root)
	if err != nil {
		t.Fatal(err)
	}
	h := Helm{Bin: bin, Home: t.TempDir(), Kubeconfig: env.Cluster.KubeconfigPath()}
	ctx := testenv.Ctx(t, 15*time.Minute)
	t.Cleanup(func() {
		_, _, _ = h.Run(context.Background(), env.Root, "uninstall", release, "-n", ns, "--wait")
		adoptCRD(t, systemNamespace)
		deleteNamespace(t, ns)
	})

	// The CRD an earlier test's release kept names that release's namespace: Helm refuses to
	// take it over in another, in its own words, until the CRD is adopted (docs/operations.md).
	if _, err := env.Dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{}); err == nil {
		_, stderr, err := h.Run(ctx, env.Root, "install", release, Dir, "-n", ns, "--create-namespace", "--set", "activator.enabled=false")
		if err == nil || !strings.Contains(stderr, "invalid ownership metadata") {
			t.Fatalf("install over a CRD kept by a release in another namespace: %v; want Helm's ownership refusal", err)
		}
		t.Logf("install over a CRD kept by a release in another namespace, refused as documented:\n%s", warnings(stderr))
		adoptCRD(t, ns)
	}

	// Installed with the activator off.
	helmCmd(t, h, "install", release, Dir, "-n", ns, "--create-namespace", "--set", "activator.enabled=false",
		"--wait", "--timeout", testenv.Scaled(3*time.Minute).String())
	if got := activatorArgs(t, ns); !slices.Equal(got, []string{"--activator-service="}) {
		t.Fatalf("operator args %v with the activator off, want --activator-service= (no activator)", got)
	}

	// One release per cluster: a second is refused with the first one named.
	_, stderr, err := h.Run(ctx, env.Root, "install", "second", Dir, "-n", "second-ns", "--create-namespace")
	want := "already installed in this cluster by release " + release + " in namespace " + ns
	if err == nil || !strings.Contains(stderr, want) {
		t.Errorf("a second release: %v; want refused with %q", err, want)
	} else {
		t.Logf("a second release, refused:\n%s", warnings(stderr))
	}
	_ = env.Kube.CoreV1().Namespaces().Delete(ctx, "second-ns", metav1.DeleteOptions{})

	p := runOperatorIn(t, ns, "operator-no-activator")
	models := env.Namespace(t)
	isvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.Group + "/v1alpha1", "kind": "InferenceService",
		"metadata": map[string]any{"name": "idle", "namespace": models, "annotations": map[string]any{
			crd.AnnotationV1beta1Spec: `{"autoscaling":{"minReplicas":0,"maxReplicas":1,"idleSeconds":60},"replicasUnset":true}`}},
		"spec": map[string]any{"model": "Qwen/Qwen3-0.6B", "replicas": int64(0), "gpusPerReplica": int64(1)},
	}}
	if _, err := env.Dyn.Resource(crd.Resource).Namespace(models).Create(ctx, isvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	asleep := func(what, message string) {
		t.Helper()
		testenv.Eventually(t, 4*time.Minute, what, func() error {
			i, err := env.ISVC(models, "idle")
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionReady)
			if c == nil || c.Reason != reconcile.ReasonScaledToZero || i.Status.ReadyReplicas != 0 || !strings.Contains(c.Message, message) {
				return fmt.Errorf("ready %d, Ready %+v", i.Status.ReadyReplicas, c)
			}
			t.Logf("%s: %s", what, c.Message)
			return nil
		})
	}
	asleep("asleep, with no activator to wake it", "no activator is configured (--activator-service), so only a change of spec wakes it")
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	// Upgraded with the activator on (one replica, the test's bounds); the chart's webhook
	// Service back in the CRD first, as before every upgrade here (pointConversionAt).
	unpointConversion(t, ns)
	helmCmd(t, h, "upgrade", release, Dir, "-n", ns, "--set", fmt.Sprintf("activator.replicas=1,activator.maxWait=%s,activator.refreshPeriod=2s", wakeMaxWait),
		"--wait", "--timeout", testenv.Scaled(3*time.Minute).String())
	activator := ns + "/inferenceservice-activator"
	if got := activatorArgs(t, ns); !slices.Equal(got, []string{"--activator-service=" + activator + ":80"}) {
		t.Fatalf("operator args %v with the activator on, want --activator-service=%s:80", got, activator)
	}
	runOperatorIn(t, ns, "operator-activator")
	// The kubelet runs the activator's binary for its image (the chart's args, its pod IP, its
	// ServiceAccount's token), as test/e2e installs it.
	env.Kubectl(t, "-n", ns, "set", "image", "deployment/inferenceservice-activator", "activator="+operator.ActivatorImage+":test")
	env.Kubectl(t, "-n", ns, "rollout", "status", "deployment/inferenceservice-activator", "--timeout=2m")
	addr := activatorAddr(t, ns)
	asleep("asleep, woken by this release's activator", "the next request through the activator "+activator+" wakes it")

	// A request through the activator: held, the model woken, answered.
	client := &http.Client{Timeout: 2 * testenv.Scaled(wakeMaxWait), Transport: &http.Transport{Proxy: nil}}
	url := "http://" + addr + "/" + models + "/idle/v1/completions"
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "prompt": "hello", "max_tokens": 4})
	start := time.Now()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("through the activator at zero: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	t.Logf("through the activator at zero: %s after %s (a cold start)", resp.Status, time.Since(start).Round(time.Millisecond))
	testenv.Eventually(t, time.Minute, "awake with one pod", func() error {
		i, err := env.ISVC(models, "idle")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionReady)
		if c == nil || c.Reason != reconcile.ReasonAvailable || i.Status.ReadyReplicas != 1 {
			return fmt.Errorf("ready %d, Ready %+v", i.Status.ReadyReplicas, c)
		}
		return nil
	})
	t.Logf("$ kubectl get isvc,deploy,pods -n %s\n%s", models, env.Kubectl(t, "get", "isvc,deploy,pods", "-n", models))
}

// activatorArgs returns the release's operator's --activator-service arguments.
func activatorArgs(t *testing.T, ns string) []string {
	t.Helper()
	d, err := env.Kube.AppsV1().Deployments(ns).Get(testenv.Ctx(t, time.Minute), "inferenceservice-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--activator-service") {
			out = append(out, a)
		}
	}
	return out
}

// activatorAddr waits for a ready activator pod running its binary and returns its proxy's
// address, the pod's IP and port 8080.
func activatorAddr(t *testing.T, ns string) string {
	t.Helper()
	ctx := testenv.Ctx(t, 2*time.Minute)
	var addr string
	testenv.Eventually(t, time.Minute, "a ready activator pod", func() error {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=inferenceservice-activator"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && reconcile.PodReady(&p) &&
				strings.HasPrefix(p.Spec.Containers[0].Image, operator.ActivatorImage) {
				addr = p.Status.PodIP + ":8080"
				return nil
			}
		}
		return fmt.Errorf("%d pods, none ready with %s", len(pods.Items), operator.ActivatorImage)
	})
	return addr
}
