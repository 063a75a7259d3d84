package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestModelPodServes: five lines of YAML give pods that serve, whichever the engine. Each ready
// pod of the model, reached at its IP as a client in the cluster would, lists the model under
// the name clients send on /v1/models, loaded from that model (its root: not the image's default
// model), answers a completion for it, exports the engine's queue gauge labelled with it on
// /metrics (what the ServiceMonitor scrapes and the HPA's metric comes from), and its log, read
// with kubectl through the kubelet API, shows the server started.
func TestModelPodServes(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			testModelPodServes(t, e)
		})
	}
}

func testModelPodServes(t *testing.T, e engineCase) {
	ns := env.Namespace(t)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
`+e.meta("qwen3", "")+`
spec: {model: Qwen/Qwen3-8B, replicas: 2, gpusPerReplica: 1}
`)
	env.WaitPhase(t, ns, "qwen3", crd.PhaseReady, 90*time.Second)
	pods, err := readyModelPods(t, ns, "qwen3")
	if err != nil || len(pods) != 2 {
		t.Fatalf("%d ready pods (%v), want 2", len(pods), err)
	}
	if c := pods[0].Spec.Containers[0]; c.Image != e.eng.Image() {
		t.Fatalf("pod %s runs %s, want %s's image %s", pods[0].Name, c.Image, e.name, e.eng.Image())
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	call := func(method, ip, path, body string) string {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+net.JoinHostPort(ip, fmt.Sprint(reconcile.Port))+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s on %s: %v", method, path, ip, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s on %s: %d %s", method, path, ip, resp.StatusCode, b)
		}
		return string(b)
	}
	for _, p := range pods {
		ip := p.Status.PodIP
		if m := call("GET", ip, "/v1/models", ""); !strings.Contains(m, `"id":"Qwen/Qwen3-8B"`) {
			t.Fatalf("pod %s /v1/models does not list the model clients send:\n%s", p.Name, m)
		} else if !strings.Contains(m, `"root":"Qwen/Qwen3-8B"`) {
			// vLLM's root is the model it loaded; the served name alone proves nothing.
			t.Fatalf("pod %s serves another model under the name clients send:\n%s", p.Name, m)
		}
		out := call("POST", ip, "/v1/completions", `{"model":"Qwen/Qwen3-8B","prompt":"Kubernetes operators are","max_tokens":4}`)
		if !strings.Contains(out, `"completion_tokens":4`) {
			t.Fatalf("pod %s completion: %s", p.Name, out)
		}
		if m := call("GET", ip, "/metrics", ""); !hasSeries(m, e.eng.Metrics().Queue, "Qwen/Qwen3-8B") {
			t.Fatalf("pod %s /metrics has no queue gauge for the model:\n%.2000s", p.Name, m)
		}
	}
	testenv.Eventually(t, 30*time.Second, "kubectl logs shows the server up", func() error {
		out, err := kubectlErr(t, nil, "logs", "-n", ns, pods[0].Name, "--tail=50")
		if err != nil || !strings.Contains(out, "Application startup complete.") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
}

// TestRestartLoadsNotDownloads: without spec.cache, a restarted container finds the weights its
// pod downloaded (HF_HOME on an emptyDir, which outlives a container): its log loads them, it
// does not download them again, as the container's own filesystem would make it.
func TestRestartLoadsNotDownloads(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: restart}
spec: {model: Qwen/Qwen3-8B, replicas: 1, gpusPerReplica: 1}
`)
	env.WaitPhase(t, ns, "restart", crd.PhaseReady, 90*time.Second)
	pods, err := readyModelPods(t, ns, "restart")
	if err != nil || len(pods) != 1 {
		t.Fatalf("%d ready pods (%v)", len(pods), err)
	}
	pod := pods[0].Name
	const downloaded = "Time spent downloading weights"
	if out := env.Kubectl(t, "logs", "-n", ns, pod); !strings.Contains(out, downloaded) {
		t.Fatalf("the first run did not download:\n%s", out)
	}
	// A new behaviour restarts the container in place (the fake kubelet's restart).
	env.Kubectl(t, "annotate", "pod", "-n", ns, pod, "kubelet.fake/behavior=slow-ready-1")
	testenv.Eventually(t, 90*time.Second, "the restarted container loads", func() error {
		out, err := kubectlErr(t, nil, "logs", "-n", ns, pod)
		if err != nil || !strings.Contains(out, "Application startup complete.") {
			return fmt.Errorf("not serving yet (%v)", err)
		}
		if n := env.Kubectl(t, "get", "pod", "-n", ns, pod, "-o", "jsonpath={.status.containerStatuses[0].restartCount}"); n == "0" {
			return fmt.Errorf("not restarted yet")
		}
		if strings.Contains(out, downloaded) {
			return fmt.Errorf("the restarted container downloaded the weights again:\n%s", out)
		}
		return nil
	})
}
