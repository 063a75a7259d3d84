// The fake SGLang as a Deployment on the local cluster: the kubelet runs it for SGLang's
// launcher command in the SGLang image, and it serves completions and its metrics on the pod IP.

package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// sglangDeployment is the operator's single-node SGLang container (controller/engine/sglang's
// Server and ServeArgs) in a Deployment, the readiness probe on SGLang's /health.
const sglangDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: sglang
spec:
  replicas: 1
  selector:
    matchLabels: {app: sglang}
  template:
    metadata:
      labels: {app: sglang}
    spec:
      containers:
      - name: server
        image: lmsysorg/sglang:v0.5.3-cu126
        command: ["python3", "-m", "sglang.launch_server"]
        args: ["--model-path", "Qwen/Qwen3-0.6B", "--served-model-name", "qwen", "--host", "0.0.0.0", "--port", "8000", "--enable-metrics"]
        ports:
        - {name: http, containerPort: 8000}
        readinessProbe:
          httpGet: {path: /health, port: http}
          periodSeconds: 1
        resources:
          limits: {nvidia.com/gpu: 1}
`

func TestServingSGLangDeploymentCompletes(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, sglangDeployment)
	var pod string
	eventually(t, 90*time.Second, func() (bool, string) {
		pod = strings.TrimSpace(jsonpath(t, ns, "pods", `{.items[?(@.status.containerStatuses[0].ready==true)].metadata.name}`))
		return pod != "" && !strings.Contains(pod, " "), kubectl(t, "get", "pods", "-n", ns, "-o", "wide")
	})
	base := "http://" + engineReady(t, ns, pod) + ":8000"
	code, body := post(t, base+"/v1/completions", `{"model":"qwen","prompt":"hello there","max_tokens":4}`)
	var res struct {
		Object  string
		Choices []struct{ Text string }
	}
	if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.Object != "text_completion" || len(res.Choices) != 1 || res.Choices[0].Text == "" {
		t.Fatalf("completion: %d %s", code, body)
	}
	if q, err := gauge(base, "sglang:num_queue_reqs"); err != nil || q != 0 {
		t.Fatalf("queue gauge %v %v", q, err)
	}
	logs, _, err := c.Kubectl(context.Background(), "logs", "-n", ns, pod)
	if err != nil || !strings.Contains(logs, "server_args=ServerArgs(model_path='Qwen/Qwen3-0.6B'") ||
		!strings.Contains(logs, "The server is fired up and ready to roll!") {
		t.Fatalf("logs (%v):\n%s", err, logs)
	}
}

// lwsSGLang is one group of two pods running the operator's SGLang multi-node scripts
// (controller/engine/sglang MultiNode): no Ray; each pod runs launch_server with the group's
// size, its rank and the leader's address, which LWS's variables fill in.
const lwsSGLang = `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: sgl
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    restartPolicy: RecreateGroupOnPodRestart
    leaderTemplate:
      spec:
        containers:
        - name: sglang
          image: lmsysorg/sglang:v0.5.3-cu126
          command: ["/bin/sh", "-c"]
          args: ["exec python3 -m sglang.launch_server '--model-path' 'Qwen/Qwen3-8B' '--served-model-name' 'qwen' '--host' '0.0.0.0' '--port' '8000' '--enable-metrics' '--tp-size' '2' --nnodes $(LWS_GROUP_SIZE) --dist-init-addr $(LWS_LEADER_ADDRESS):20000 --dist-timeout 300 --node-rank 0"]
          ports: [{name: http, containerPort: 8000}]
          readinessProbe: {httpGet: {path: /health, port: http}, periodSeconds: 1}
          resources:
            limits: {nvidia.com/gpu: 1}
    workerTemplate:
      spec:
        containers:
        - name: sglang
          image: lmsysorg/sglang:v0.5.3-cu126
          command: ["/bin/sh", "-c"]
          args: ["exec python3 -m sglang.launch_server '--model-path' 'Qwen/Qwen3-8B' '--served-model-name' 'qwen' '--host' '0.0.0.0' '--port' '8000' '--enable-metrics' '--tp-size' '2' --nnodes $(LWS_GROUP_SIZE) --dist-init-addr $(LWS_LEADER_ADDRESS):20000 --dist-timeout 300 --node-rank $(LWS_WORKER_INDEX)"]
          readinessProbe: {httpGet: {path: /health, port: 8000}, periodSeconds: 1}
          resources:
            limits: {nvidia.com/gpu: 1}
`

// TestLeaderWorkerSetSGLangGroup: the worker finds its leader through the cluster DNS at the
// address LWS gives it, the torch.distributed group forms over TCP, the leader serves a
// completion and the worker answers /health; both Ready.
func TestLeaderWorkerSetSGLangGroup(t *testing.T) {
	startLWS(t)
	ns := lwsNamespace(t)
	apply(t, ns, lwsSGLang)
	eventually(t, 2*time.Minute, func() (bool, string) {
		pods := lwsPods(t, ns, "sgl")
		return allReady(pods, 2), fmt.Sprintf("%+v\nleader:\n%s", pods, sglangLog(ns, "sgl-0"))
	})
	ip := jsonpath(t, ns, "pod/sgl-0", "{.status.podIP}")
	if code, body := post(t, "http://"+ip+":8000/v1/completions", `{"model":"qwen","prompt":"hi","max_tokens":2}`); code != 200 {
		t.Fatalf("completion: %d %s", code, body)
	}
	if log := sglangLog(ns, "sgl-0-1"); !strings.Contains(log, " TP1] Init torch distributed ends.") || strings.Contains(log, "c10d") && !strings.Contains(log, "Init torch distributed ends") {
		t.Fatalf("worker log:\n%s", log)
	}
}

// sglangLog is `kubectl logs` of the pod's sglang container, or the error.
func sglangLog(ns, pod string) string {
	out, stderr, err := c.Kubectl(context.Background(), "logs", "-n", ns, pod, "-c", "sglang")
	if err != nil {
		return fmt.Sprintf("%v: %s", err, stderr)
	}
	return out
}
