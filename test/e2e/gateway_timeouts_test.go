package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// The test gateway keeps HTTPRoute timeouts as Envoy does (test/epp/gateway/timeouts.go): a
// route without timeouts is cut at 15 s, with a 504 "upstream request timeout" before the
// response's headers and a reset stream after.

// streamCompletion sends a streamed completion of maxTokens tokens to url and reads its
// events to the end: the status, the events read, whether [DONE] came, and the read's error.
func streamCompletion(t *testing.T, url string, maxTokens int) (code int, events int, done bool, body string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "prompt": "tell a long story", "max_tokens": maxTokens, "stream": true, "ignore_eos": true})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return 0, 0, false, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, 0, false, string(msg), nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if line == "data: [DONE]" {
			done = true
			continue
		}
		events++
	}
	return resp.StatusCode, events, done, "", sc.Err()
}

// TestGatewayTimeoutsLongStream: a streamed generation of 900 tokens (18 s at the local
// vLLM's 20 ms a token) through the gateway's pool route comes whole: the operator's route
// carries timeouts.request (300s by default), where a route without it is cut at 15 s as
// Envoy cuts it. A model's own spec.gateway.timeouts reach its route.
func TestGatewayTimeoutsLongStream(t *testing.T) {
	ns := env.Namespace(t)
	gwAddr := withGateway(t, ns, "gateway-timeouts-stream.log")
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: long
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"gateway":{}}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 1, gpusPerReplica: 1}
`)
	testenv.Eventually(t, 3*time.Minute, "routed through the pool, one pod ready", func() error {
		i, err := env.ISVC(ns, "long")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionRouted)
		if c == nil || c.Status != metav1.ConditionTrue || i.Status.ReadyReplicas != 1 {
			return fmt.Errorf("ready %d, Routed %+v", i.Status.ReadyReplicas, c)
		}
		t.Logf("Routed: %s: %s", c.Reason, c.Message)
		return nil
	})
	url := "http://" + gwAddr + "/" + ns + "/long/v1/completions"
	start := time.Now()
	code, events, done, body, err := streamCompletion(t, url, 900)
	t.Logf("streamed completion of 900 tokens through the gateway: %d, %d events, [DONE] %v, read error %v, %s, in %s",
		code, events, done, err, body, time.Since(start).Round(100*time.Millisecond))
	if code != http.StatusOK || !done || err != nil || events < 900 {
		t.Fatalf("a generation longer than 15 s cut by the gateway: %d, %d events of 900, [DONE] %v, %v %s (the route's timeouts: %v)",
			code, events, done, err, body, routeTimeouts(t, ns, "long"))
	}

	// The model's own timeouts replace the default on every rule.
	env.Kubectl(t, "-n", ns, "annotate", "--overwrite", "isvc", "long", crd.AnnotationV1beta1Spec+`={"gateway":{"timeouts":{"request":"10m","backendRequest":"5m"}}}`)
	testenv.Eventually(t, time.Minute, "the route's timeouts from the spec", func() error {
		if got := routeTimeouts(t, ns, "long"); got != "map[backendRequest:5m request:10m]" {
			return fmt.Errorf("timeouts %s", got)
		}
		return nil
	})
}

// routeTimeouts is the first rule's timeouts of the model's HTTPRoute, printed.
func routeTimeouts(t *testing.T, ns, name string) string {
	t.Helper()
	u, err := env.Dyn.Resource(reconcile.HTTPRouteGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	if len(rules) == 0 {
		return "no rules"
	}
	return fmt.Sprint(rules[0].(map[string]any)["timeouts"])
}

// TestGatewayTimeoutsColdStart: a request to a model at zero, through the gateway, is held by
// the activator (its default --max-wait, 3m) while a pod starts (slow-ready-20: 20 s of
// loading, then its probes) and answered: the route's timeout is longer than the hold, where
// a route without timeouts answers 504 after 15 s.
func TestGatewayTimeoutsColdStart(t *testing.T) {
	ns := env.Namespace(t)
	gwAddr := withGateway(t, ns, "gateway-timeouts-cold.log")
	if err := operator.InstallActivator(testenv.Ctx(t, 3*time.Minute), env.Cluster, t.TempDir(), 1, "--refresh-period=2s"); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "-n", "inferenceservice-system", "rollout", "status", "deployment/inferenceservice-activator", "--timeout=120s")
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: cold
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"gateway":{},"autoscaling":{"minReplicas":0,"maxReplicas":1,"idleSeconds":60},"replicasUnset":true}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 0, gpusPerReplica: 1, image: "kubelet.fake/slow-ready-20:v1"}
`)
	testenv.Eventually(t, 4*time.Minute, "routed through the activator, at zero: the Deployment at 0, no pod", func() error {
		i, err := env.ISVC(ns, "cold")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionRouted)
		if c == nil || c.Reason != reconcile.ReasonActivatorRoute {
			return fmt.Errorf("Routed %+v", c)
		}
		d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "cold", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 || len(pods.Items) != 0 {
			return fmt.Errorf("Deployment replicas %v, %d pods", d.Spec.Replicas, len(pods.Items))
		}
		t.Logf("Routed: %s", c.Message)
		return nil
	})
	client := &http.Client{Timeout: 4 * time.Minute, Transport: &http.Transport{Proxy: nil}}
	url := "http://" + gwAddr + "/" + ns + "/cold/v1/completions"
	start := time.Now()
	code, _, _, err := ask(client, url)
	t.Logf("cold start through the gateway and the activator: %d %v, in %s", code, err, time.Since(start).Round(100*time.Millisecond))
	if code != http.StatusOK {
		t.Fatalf("a request held for a cold start, through the gateway: %d %v (the route's timeouts: %v)", code, err, routeTimeouts(t, ns, "cold"))
	}
}

// withOlderPoolCRD is withGateway with the extension's v1.0.2 InferencePool CRD in place of
// v1.5.0's: no spec.appProtocol, which the API server prunes.
func withOlderPoolCRD(t *testing.T, ns, logName string) string {
	t.Helper()
	eppBin, _ := poolBins(t)
	dir := filepath.Join(operator.EPPManifests(eppBin), "crd")
	return withGatewayWorld(t, ns, logName, gatewayWorld{crds: []string{filepath.Join("testdata", "inferencepool-crd-v1.0.2.yaml"),
		filepath.Join(dir, "httproute-crd.yaml"), filepath.Join(dir, "referencegrant-crd.yaml")}})
}

// TestOlderInferencePoolCRD: on a cluster with the extension's v1.0.2 InferencePool CRD (no
// spec.appProtocol before v1.4.0), the operator's pool, pruned of appProtocol by the API
// server, is not drift: the model is routed through its pool and the operator makes no
// writes at rest.
func TestOlderInferencePoolCRD(t *testing.T) {
	ns := env.Namespace(t)
	gwAddr := withOlderPoolCRD(t, ns, "gateway-older-pool.log")
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: old
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"gateway":{}}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 1, gpusPerReplica: 1}
`)
	// The pod ready and the pool made, read from the cluster: not from the model's status,
	// which an operator that never converges does not bring to Ready.
	testenv.Eventually(t, 3*time.Minute, "the model's pod ready, its pool made", func() error {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=old"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || !reconcile.PodReady(&pods.Items[0]) {
			return fmt.Errorf("%d pods, none ready", len(pods.Items))
		}
		_, err = env.Dyn.Resource(reconcile.InferencePoolGVR).Namespace(ns).Get(context.Background(), "old", metav1.GetOptions{})
		return err
	})
	pool, err := env.Dyn.Resource(reconcile.InferencePoolGVR).Namespace(ns).Get(context.Background(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedString(pool.Object, "spec", "appProtocol"); found {
		t.Fatalf("the v1.0.2 CRD kept spec.appProtocol: %v", pool.Object["spec"])
	}
	before := writesSettle(t)
	// Five resync periods (each a reconcile of the model) with nothing changed.
	fams, err := env.op.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	r0 := operator.SumCounter(fams, "controller_runtime_reconcile_total", nil)
	testenv.Eventually(t, time.Minute, "five more reconciles", func() error {
		fams, err := env.op.Scrape()
		if err != nil {
			return err
		}
		if r := operator.SumCounter(fams, "controller_runtime_reconcile_total", nil); r < r0+5 {
			return fmt.Errorf("%v reconciles", r-r0)
		}
		return nil
	})
	after := writesSettle(t)
	t.Logf("writes at rest with the v1.0.2 InferencePool CRD: %v, then %v after five reconciles", before, after)
	if after != before {
		t.Fatalf("%v writes at rest: the pruned appProtocol seen as drift", after-before)
	}

	// And the pool serves: the picker reads the older pool, the route goes to it.
	testenv.Eventually(t, 3*time.Minute, "routed through the pool", func() error {
		i, err := env.ISVC(ns, "old")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionRouted)
		if c == nil || c.Reason != reconcile.ReasonPoolRoute || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Routed %+v", c)
		}
		return nil
	})
	if code, _, _, err := ask(&http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil}}, "http://"+gwAddr+"/"+ns+"/old/v1/completions"); code != http.StatusOK {
		t.Fatalf("through the pool: %d %v", code, err)
	}
}
