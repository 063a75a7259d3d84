package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// activatorMaxWait is the hold bound the test installs the activator with: longer than a
// local cold start, short enough to wait out.
const activatorMaxWait = 40 * time.Second

// installActivator runs the manifests' activator (one replica, reporting every 2s) and returns
// its proxy's address, the pod's IP and port 8080.
func installActivator(t *testing.T) string {
	t.Helper()
	ctx := testenv.Ctx(t, 3*time.Minute)
	if err := operator.InstallActivator(ctx, env.Cluster, t.TempDir(), 1, "--refresh-period=2s", "--max-wait="+activatorMaxWait.String()); err != nil {
		t.Fatal(err)
	}
	d, err := env.Kube.AppsV1().Deployments("inferenceservice-system").Get(ctx, "inferenceservice-activator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	testenv.Eventually(t, time.Minute, "a ready activator pod", func() error {
		pods, err := env.Kube.CoreV1().Pods("inferenceservice-system").List(ctx, metav1.ListOptions{LabelSelector: labels.Set(d.Spec.Selector.MatchLabels).String()})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && reconcile.PodReady(&p) {
				addr = p.Status.PodIP + ":8080"
				return nil
			}
		}
		return fmt.Errorf("%d pods, none ready", len(pods.Items))
	})
	return addr
}

// ask sends one completion through the activator and returns the status, the Retry-After
// header and the time to the response's headers; err carries a refusal's body.
func ask(client *http.Client, url string) (code int, retryAfter string, took time.Duration, err error) {
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "prompt": "hello", "max_tokens": 4})
	start := time.Now()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, "", time.Since(start), err
	}
	took = time.Since(start)
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), took, err
}

// burst sends n requests at once (released together) and returns their outcomes by status.
func burst(t *testing.T, client *http.Client, url string, n int) (codes map[int]int, firstOK, lastOK time.Duration, refusals []refusal) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	codes = map[int]int{}
	var oks []time.Duration
	gate := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			code, ra, took, err := ask(client, url)
			mu.Lock()
			defer mu.Unlock()
			codes[code]++
			switch {
			case code == http.StatusOK:
				oks = append(oks, took)
			case code == http.StatusServiceUnavailable:
				refusals = append(refusals, refusal{ra, err.Error()})
			case err != nil && codes[code] == 1:
				t.Logf("request: %v", err)
			}
		}()
	}
	close(gate)
	wg.Wait()
	sort.Slice(oks, func(i, j int) bool { return oks[i] < oks[j] })
	if len(oks) > 0 {
		firstOK, lastOK = oks[0], oks[len(oks)-1]
	}
	return codes, firstOK, lastOK, refusals
}

// refusal is a 503's Retry-After and body.
type refusal struct{ retryAfter, body string }

// TestScaleToZero: a model with minReplicas 0 serves through the activator, goes to zero after
// its idle window (its GPUs released, the status saying so), and 100 requests sent at once to
// it at zero are all held and answered once the pod it wakes serves; it goes back to zero.
// A model that cannot start gets its held requests refused past the bounds: at once beyond
// 100 held, and after the wait bound, each with 503 and Retry-After.
func TestScaleToZero(t *testing.T) {
	t.Parallel()
	addr := installActivator(t)
	ns := env.Namespace(t)
	ctx := testenv.Ctx(t, 15*time.Minute)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: idle
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"autoscaling":{"minReplicas":0,"maxReplicas":2,"idleSeconds":60},"replicasUnset":true}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 0, gpusPerReplica: 1}
`)
	client := &http.Client{Timeout: 2 * activatorMaxWait, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 128}}
	url := "http://" + addr + "/" + ns + "/idle/v1/completions"
	ready := func(what string, timeout time.Duration, ok func(*crd.InferenceService, *metav1.Condition) bool) *crd.InferenceService {
		t.Helper()
		var got *crd.InferenceService
		testenv.Eventually(t, timeout, what, func() error {
			i, err := env.ISVC(ns, "idle")
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionReady)
			if c == nil || !ok(i, c) {
				return fmt.Errorf("ready %d, Ready %+v", i.Status.ReadyReplicas, c)
			}
			got = i
			return nil
		})
		return got
	}
	awake := func(i *crd.InferenceService, c *metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Reason == reconcile.ReasonAvailable && i.Status.ReadyReplicas == 1
	}
	asleep := func(i *crd.InferenceService, c *metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Reason == reconcile.ReasonScaledToZero && i.Status.ReadyReplicas == 0
	}
	// (status.endpoint, the activator's URL, is v1beta1's: this suite serves v1alpha1.)
	ready("awake with one pod", 3*time.Minute, awake)
	if code, _, _, err := ask(client, url); code != http.StatusOK {
		t.Fatalf("through the activator, awake: %d %v", code, err)
	}
	gpus := func() float64 {
		fams, err := env.op.Scrape()
		if err != nil {
			t.Fatal(err)
		}
		return operator.SumCounter(fams, "inferenceservice_gpus", func(l map[string]string) bool {
			return l["namespace"] == ns && l["name"] == "idle" && l["state"] == "requested"
		})
	}
	if g := gpus(); g != 1 {
		t.Fatalf("awake: %v GPUs requested", g)
	}

	sleep := func(round string) time.Duration {
		t.Helper()
		start := time.Now()
		i := ready(round+": scaled to zero", 4*time.Minute, asleep)
		c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionReady)
		t.Logf("%s: %s after %s: %s", round, c.Reason, time.Since(start).Round(time.Second), c.Message)
		if !strings.Contains(c.Message, "after 1m0s without a request") || i.Status.Reason != reconcile.ReasonScaledToZero {
			t.Fatalf("%s: Ready message %q, reason %q", round, c.Message, i.Status.Reason)
		}
		testenv.Eventually(t, time.Minute, round+": no pods, no HPA, no GPUs", func() error {
			pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=idle"})
			if err != nil {
				return err
			}
			if n := len(pods.Items); n > 0 {
				return fmt.Errorf("%d pods", n)
			}
			if _, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "idle", metav1.GetOptions{}); err == nil {
				return fmt.Errorf("the HPA is still there")
			}
			if g := gpus(); g != 0 {
				return fmt.Errorf("%v GPUs requested", g)
			}
			return nil
		})
		return time.Since(start)
	}
	sleep("first idle")

	// 100 requests at once, at zero: all held, all answered once the pod serves.
	codes, first, last, _ := burst(t, client, url, 100)
	t.Logf("100 requests at zero: %v; first answered after %s (the cold start), last after %s", codes, first.Round(time.Millisecond), last.Round(time.Millisecond))
	if codes[http.StatusOK] != 100 {
		t.Fatalf("at zero, 100 requests: %v, want 100 answered", codes)
	}
	ready("awake after the burst", time.Minute, awake)
	testenv.Eventually(t, time.Minute, "the cold start on the Service", func() error {
		s, err := env.Kube.CoreV1().Services(ns).Get(ctx, "idle", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var cs kinds.ColdStart
		if err := json.Unmarshal([]byte(s.Annotations[kinds.ColdStartAnnotation]), &cs); err != nil || cs.FirstByteSeconds <= 0 {
			return fmt.Errorf("%s %q: %v", kinds.ColdStartAnnotation, s.Annotations[kinds.ColdStartAnnotation], err)
		}
		t.Logf("recorded cold start: %+v", cs)
		return nil
	})
	// While its second idle window runs, a model that cannot start (16 GPUs a pod, 8 a node):
	// past 100 held, refused at once;
	// the 100 held, refused after the wait bound. Each 503 says when to retry.
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: huge
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"autoscaling":{"minReplicas":0,"maxReplicas":1},"replicasUnset":true}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 0, gpusPerReplica: 16}
`)
	start := time.Now()
	codes, _, _, refused := burst(t, client, "http://"+addr+"/"+ns+"/huge/v1/completions", 101)
	if codes[http.StatusServiceUnavailable] != 101 {
		t.Fatalf("101 requests for a model that cannot start: %v, want 101 refused", codes)
	}
	why := map[string]int{}
	for _, r := range refused {
		if r.retryAfter == "" {
			t.Fatalf("a 503 without Retry-After: %s", r.body)
		}
		switch {
		case strings.Contains(r.body, "already holds 100 requests"):
			why["held 100 already"]++
		case strings.Contains(r.body, "did not become ready within "+activatorMaxWait.String()):
			why["wait bound"]++
		default:
			t.Fatalf("a 503 for another reason: %s", r.body)
		}
	}
	t.Logf("101 requests for a model that cannot start: all 503 within %s, Retry-After %s: %v; e.g. %s",
		time.Since(start).Round(time.Second), refused[0].retryAfter, why, refused[0].body)
	if why["held 100 already"] != 1 || why["wait bound"] != 100 {
		t.Fatalf("refusals %v, want 1 past the count bound and 100 past the wait bound", why)
	}
	sleep("second idle")
}

// TestScaleToZeroThroughTheGateway: a model with minReplicas 0 and spec.gateway is routed
// through the activator, which is in another namespace: the operator makes the ReferenceGrant
// a gateway needs for that, and the test gateway (which, as the Gateway API says, answers 500
// for a cross-namespace backendRef no grant permits) forwards requests through the activator to
// the model's pod. The grant deleted, requests fail until the operator makes it again.
func TestScaleToZeroThroughTheGateway(t *testing.T) {
	ns := env.Namespace(t)
	gwAddr := withGateway(t, ns, "gateway-zero.log")
	installActivator(t)

	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: zr
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"gateway":{},"autoscaling":{"minReplicas":0,"maxReplicas":2,"idleSeconds":600},"replicasUnset":true}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 0, gpusPerReplica: 1}
`)
	testenv.Eventually(t, 3*time.Minute, "routed through the activator, one pod ready", func() error {
		i, err := env.ISVC(ns, "zr")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionRouted)
		if c == nil || c.Reason != reconcile.ReasonActivatorRoute || i.Status.ReadyReplicas != 1 {
			return fmt.Errorf("ready %d, Routed %+v", i.Status.ReadyReplicas, c)
		}
		t.Logf("Routed: %s", c.Message)
		return nil
	})
	grant := reconcile.ActivatorGrantName(ns)
	env.Kubectl(t, "-n", "inferenceservice-system", "get", "referencegrants.gateway.networking.k8s.io", grant)

	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil}}
	url := "http://" + gwAddr + "/" + ns + "/zr/v1/completions"
	if code, _, _, err := ask(client, url); code != http.StatusOK {
		t.Fatalf("through the gateway and the activator: %d %v", code, err)
	}

	// Without the grant (the operator stopped meanwhile) the gateway refuses the route's
	// backend; the operator started again makes it again, and requests are answered.
	stopOperator(t)
	env.Kubectl(t, "-n", "inferenceservice-system", "delete", "referencegrants.gateway.networking.k8s.io", grant)
	testenv.Eventually(t, time.Minute, "the gateway refusing the route without the grant", func() error {
		code, _, _, err := ask(client, url)
		if code != http.StatusInternalServerError {
			return fmt.Errorf("%d %v", code, err)
		}
		t.Logf("without the grant: %v", err)
		return nil
	})
	if err := startOperator(testenv.Ctx(t, 2*time.Minute), "--gateway-parent="+gatewayParent); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "answered again once the operator made the grant", func() error {
		if code, _, _, err := ask(client, url); code != http.StatusOK {
			return fmt.Errorf("%d %v", code, err)
		}
		return nil
	})
	env.Kubectl(t, "-n", "inferenceservice-system", "get", "referencegrants.gateway.networking.k8s.io", grant)
}
