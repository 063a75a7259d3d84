// The fake SGLang as a Deployment on the local cluster: the kubelet runs it for SGLang's
// launcher command in the SGLang image, and it serves completions and its metrics on the pod IP.

package cluster_test

import (
	"context"
	"encoding/json"
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
