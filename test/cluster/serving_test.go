// Serving containers: vLLM images run the fake model server on their pod IP, probed for real,
// their logs read through the kube-apiserver (`kubectl logs`), their environment resolved.

package cluster_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const vllmImage = "vllm/vllm-openai:v0.11.0"

// servingPod is a pod of one vLLM container named server on one GPU (vLLM without a GPU
// fails to start), with extra container fields (probes, env, mounts) and pod spec fields.
func servingPod(name, image, containerFields, podFields string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
%s  containers:
  - name: server
    image: %s
    args: ["--model", "facebook/opt-125m", "--port", "8000"]
    ports:
    - {name: http, containerPort: 8000}
    resources:
      limits: {nvidia.com/gpu: 1}
%s`, name, podFields, image, containerFields)
}

// events lists "reason message" of the namespace's events about pod.
func events(t *testing.T, ns, pod string) string {
	t.Helper()
	out, _, _ := c.Kubectl(context.Background(), "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+pod,
		"-o", `jsonpath={range .items[*]}{.reason} {.message}{"\n"}{end}`)
	return out
}

// podState is phase/started/ready/restartCount of the pod's first container.
func podState(t *testing.T, ns, pod string) string {
	return jsonpath(t, ns, "pod/"+pod, `{.status.phase}/{.status.containerStatuses[0].started}/{.status.containerStatuses[0].ready}/{.status.containerStatuses[0].restartCount}`)
}

func TestServingProbePathAndPortMistakes(t *testing.T) {
	ns := namespace(t)
	probe := func(path, port string) string {
		return fmt.Sprintf("    readinessProbe:\n      httpGet: {path: %s, port: %s}\n      periodSeconds: 1\n", path, port)
	}
	apply(t, ns, servingPod("path", vllmImage, probe("/healthz", "http"), "")+"---\n"+
		servingPod("port", vllmImage, probe("/health", "8001"), ""))
	everReady := map[string]bool{}
	var ip string
	eventually(t, 60*time.Second, func() (bool, string) {
		for _, p := range []string{"path", "port"} {
			if strings.HasSuffix(strings.TrimSuffix(podState(t, ns, p), "/0"), "/true") {
				everReady[p] = true
			}
		}
		ip = jsonpath(t, ns, "pod/port", "{.status.podIP}")
		ev := events(t, ns, "path") + events(t, ns, "port")
		ok := strings.Contains(ev, "Unhealthy Readiness probe failed: HTTP probe failed with statuscode: 404") && ip != "" &&
			strings.Contains(ev, fmt.Sprintf(`Unhealthy Readiness probe failed: Get "http://%s:8001/health": dial tcp %s:8001: connect: connection refused`, ip, ip))
		return ok, "events:\n" + ev
	})
	for _, p := range []string{"path", "port"} {
		if s := podState(t, ns, p); everReady[p] || s != "Running/true/false/0" {
			t.Errorf("%s: %s (ever ready %v), want Running, started, never ready, no restart", p, s, everReady[p])
		}
	}
	out := kubectl(t, "get", "pod", "path", "-n", ns, "--no-headers")
	if f := strings.Fields(out); len(f) < 3 || f[1] != "0/1" || f[2] != "Running" {
		t.Errorf("kubectl get pod: %q, want Running 0/1", out)
	}
}

func TestServingLivenessKillRestarts(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, servingPod("live", vllmImage, `    livenessProbe:
      httpGet: {path: /not-there, port: 8000}
      periodSeconds: 1
      failureThreshold: 2
`, ""))
	eventually(t, 90*time.Second, func() (bool, string) {
		n := jsonpath(t, ns, "pod/live", "{.status.containerStatuses[0].restartCount}")
		return n != "" && n != "0" && n != "1", "restartCount=" + n + " events:\n" + events(t, ns, "live")
	})
	ev := events(t, ns, "live")
	for _, want := range []string{
		"Unhealthy Liveness probe failed: HTTP probe failed with statuscode: 404",
		"Killing Container server failed liveness probe, will be restarted",
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("no event %q in:\n%s", want, ev)
		}
	}
	last := jsonpath(t, ns, "pod/live", "{.status.containerStatuses[0].lastState.terminated.exitCode}/{.status.containerStatuses[0].lastState.terminated.reason}")
	if last != "143/Error" {
		t.Errorf("lastState.terminated %q, want 143/Error (SIGTERM)", last)
	}
	// The previous run's log is there once a run ended.
	eventually(t, 30*time.Second, func() (bool, string) {
		out, _, err := c.Kubectl(context.Background(), "logs", "live", "-n", ns, "--previous")
		return err == nil && strings.TrimSpace(out) != "", fmt.Sprintf("logs --previous: %q %v", out, err)
	})
}

func TestServingStartupProbeBudget(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, servingPod("never-up", vllmImage, `    startupProbe:
      httpGet: {path: /not-there, port: http}
      periodSeconds: 1
      failureThreshold: 2
`, ""))
	eventually(t, 90*time.Second, func() (bool, string) {
		n := jsonpath(t, ns, "pod/never-up", "{.status.containerStatuses[0].restartCount}")
		ev := events(t, ns, "never-up")
		return n != "" && n != "0" && strings.Contains(ev, "Killing Container server failed startup probe, will be restarted") &&
			strings.Contains(ev, "Unhealthy Startup probe failed: HTTP probe failed with statuscode: 404"), "restartCount=" + n + " events:\n" + ev
	})
	if s := jsonpath(t, ns, "pod/never-up", "{.status.containerStatuses[0].started}"); s == "true" {
		t.Errorf("started %s with a startup probe that never passed", s)
	}
}

func TestServingLogs(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, servingPod("model", vllmImage, "", ""))
	eventually(t, 60*time.Second, func() (bool, string) {
		s := podState(t, ns, "model")
		return s == "Running/true/true/0", s
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		out, _, err := c.Kubectl(context.Background(), "logs", "model", "-n", ns, "-c", "server")
		return err == nil && strings.TrimSpace(out) != "", fmt.Sprintf("kubectl logs: %q %v", out, err)
	})
	out := kubectl(t, "logs", "model", "-n", ns, "--tail", "1")
	if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 {
		t.Errorf("--tail 1 gave %d lines:\n%s", n+1, out)
	}
	_, _, err := c.Kubectl(context.Background(), "logs", "model", "-n", ns, "--previous")
	if err == nil || !strings.Contains(err.Error(), `previous terminated container "server" in pod "model" not found`) {
		t.Errorf("logs --previous of a first run: %v", err)
	}
}

func TestServingMissingSecret(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, servingPod("secret", vllmImage, `    env:
    - name: HF_TOKEN
      valueFrom:
        secretKeyRef: {name: hf-token, key: token}
`, ""))
	eventually(t, 60*time.Second, func() (bool, string) {
		w := jsonpath(t, ns, "pod/secret", "{.status.phase}/{.status.containerStatuses[0].state.waiting.reason}/{.status.containerStatuses[0].state.waiting.message}")
		return w == `Pending/CreateContainerConfigError/secret "hf-token" not found` &&
			strings.Contains(events(t, ns, "secret"), `Failed Error: secret "hf-token" not found`), w + "\n" + events(t, ns, "secret")
	})
	_, _, err := c.Kubectl(context.Background(), "logs", "secret", "-n", ns)
	if err == nil || !strings.Contains(err.Error(), `container "server" in pod "secret" is waiting to start: CreateContainerConfigError`) {
		t.Errorf("kubectl logs of a container waiting on its config: %v", err)
	}
	kubectl(t, "create", "secret", "generic", "hf-token", "-n", ns, "--from-literal=token=hf_x")
	eventually(t, 60*time.Second, func() (bool, string) {
		s := podState(t, ns, "secret")
		return s == "Running/true/true/0", s
	})
}

func TestPVCBindsToPVAndPodSchedules(t *testing.T) {
	ns := namespace(t)
	pv := "weights-" + ns
	apply(t, ns, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s
spec:
  capacity: {storage: 50Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath: {path: /tmp/%s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: weights
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  resources:
    requests: {storage: 20Gi}
---
`, pv, pv)+servingPod("cached", vllmImage, `    volumeMounts:
    - {name: cache, mountPath: /root/.cache/huggingface}
`, `  volumes:
  - name: cache
    persistentVolumeClaim: {claimName: weights}
`))
	t.Cleanup(func() { c.Kubectl(context.Background(), "delete", "pv", pv, "--wait=false") })
	eventually(t, 60*time.Second, func() (bool, string) {
		b := jsonpath(t, ns, "pvc/weights", "{.status.phase}/{.spec.volumeName}")
		s := podState(t, ns, "cached")
		return b == "Bound/"+pv && s == "Running/true/true/0", "pvc " + b + ", pod " + s
	})
}

// engineReady waits for the pod to be ready and its server to answer /health, and returns its
// IP. These pods have no readiness probe, so Ready comes as the container runs, while vLLM
// still loads: like uvicorn, the server listens only once the engine is up.
func engineReady(t *testing.T, ns, pod string) string {
	t.Helper()
	eventually(t, 90*time.Second, func() (bool, string) {
		s := podState(t, ns, pod)
		return strings.HasPrefix(s, "Running/true/true/"), s
	})
	ip := jsonpath(t, ns, "pod/"+pod, "{.status.podIP}")
	eventually(t, 60*time.Second, func() (bool, string) {
		res, err := http.Get("http://" + ip + ":8000/health")
		if err != nil {
			return false, err.Error()
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, res.Status
	})
	return ip
}

func TestServingModelEndpointsOnPodIP(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, servingPod("model", vllmImage, "", ""))
	ip := engineReady(t, ns, "model")
	get := func(path string) string {
		res, err := http.Get("http://" + ip + ":8000" + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
		}
		return string(b)
	}
	if m := get("/v1/models"); !strings.Contains(m, "facebook/opt-125m") {
		t.Errorf("/v1/models does not list the served model:\n%s", m)
	}
	if m := get("/metrics"); !strings.Contains(m, "vllm:") {
		t.Errorf("/metrics has no vllm: series:\n%.500s", m)
	}
}

func TestServingSlowLoadWithinAndBeyondStartupBudget(t *testing.T) {
	ns := namespace(t)
	startup := func(threshold int) string {
		return fmt.Sprintf("    startupProbe:\n      httpGet: {path: /health, port: 8000}\n      periodSeconds: 1\n      failureThreshold: %d\n", threshold)
	}
	apply(t, ns, servingPod("within", "kubelet.fake/slow-ready-4", startup(30), "")+"---\n"+
		servingPod("beyond", "kubelet.fake/slow-ready-30", startup(3), ""))
	eventually(t, 60*time.Second, func() (bool, string) {
		s := podState(t, ns, "within")
		return s == "Running/true/true/0", s + "\n" + events(t, ns, "within")
	})
	if ev := events(t, ns, "within"); !strings.Contains(ev, "Unhealthy Startup probe failed: ") {
		t.Errorf("no startup probe failure while loading:\n%s", ev)
	}
	eventually(t, 90*time.Second, func() (bool, string) {
		n := jsonpath(t, ns, "pod/beyond", "{.status.containerStatuses[0].restartCount}")
		ev := events(t, ns, "beyond")
		return n != "" && n != "0" && strings.Contains(ev, "Killing Container server failed startup probe, will be restarted") &&
			strings.Contains(ev, "Unhealthy Startup probe failed: "), "restartCount=" + n + "\n" + ev
	})
}

func TestServingCrashLoopPreviousLog(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, servingPod("crash", "kubelet.fake/crashloop", "", ""))
	eventually(t, 90*time.Second, func() (bool, string) {
		out, _, err := c.Kubectl(context.Background(), "logs", "crash", "-n", ns, "--previous")
		return err == nil && strings.Contains(out, "Traceback"), fmt.Sprintf("%q %v", out, err)
	})
}

func TestServingServiceLinks(t *testing.T) {
	ns := namespace(t)
	// A Service named vllm gives every later pod VLLM_PORT=tcp://..., which vLLM reads as its
	// own setting and refuses.
	apply(t, ns, `apiVersion: v1
kind: Service
metadata:
  name: vllm
spec:
  selector: {app: nothing}
  ports:
  - {name: http, port: 8000}
---
`+servingPod("linked", vllmImage, "", "")+"---\n"+servingPod("unlinked", vllmImage, "", "  enableServiceLinks: false\n"))
	eventually(t, 90*time.Second, func() (bool, string) {
		linked := podState(t, ns, "linked")
		unlinked := podState(t, ns, "unlinked")
		n := jsonpath(t, ns, "pod/linked", "{.status.containerStatuses[0].restartCount}")
		return n != "" && n != "0" && unlinked == "Running/true/true/0", "linked " + linked + ", unlinked " + unlinked
	})
	out, _, _ := c.Kubectl(context.Background(), "logs", "linked", "-n", ns, "--previous")
	if !strings.Contains(out, "VLLM_PORT") {
		t.Errorf("the crashed run's log does not name VLLM_PORT:\n%s", out)
	}
}
