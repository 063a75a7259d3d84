// The Gateway API Inference Extension's endpoint picker (test/epp: v1.5.0's scoring picker,
// started by operator.StartEPP) behind the test gateway (test/epp/gateway, started by
// operator.StartGateway) on the local cluster: an HTTPRoute sends /NS/model/v1/completions to an
// InferencePool over a Deployment of fake vLLM pods; the gateway asks the picker over ext_proc
// which pod serves each request and says which one did. Only HTTP here: the main module does
// not import envoy's ext_proc types.

package cluster_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/operator"
)

// eppPool is the model's Deployment of 2 fake vLLM pods (Ready once the server answers
// /health), a vLLM pod outside the pool, a Service over the model's pods, the InferencePool
// selecting them (its picker's port is patched in once the picker runs), and the picker's
// ServiceAccount with the namespaced RBAC it needs: read the pool and the pods (see
// test/epp/README.md).
const eppPool = `apiVersion: apps/v1
kind: Deployment
metadata: {name: model}
spec:
  replicas: 2
  selector:
    matchLabels: {app: model}
  template:
    metadata:
      labels: {app: model}
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.11.0
        args: ["--model", "facebook/opt-125m", "--port", "8000"]
        ports: [{name: http, containerPort: 8000}]
        readinessProbe:
          httpGet: {path: /health, port: 8000}
          periodSeconds: 1
        resources:
          limits: {nvidia.com/gpu: 1}
---
apiVersion: v1
kind: Pod
metadata:
  name: outsider
  labels: {app: other}
spec:
  containers:
  - name: server
    image: vllm/vllm-openai:v0.11.0
    args: ["--model", "facebook/opt-125m", "--port", "8000"]
    readinessProbe:
      httpGet: {path: /health, port: 8000}
      periodSeconds: 1
    resources:
      limits: {nvidia.com/gpu: 1}
---
apiVersion: v1
kind: Service
metadata: {name: model-direct}
spec:
  selector: {app: model}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: model}
spec:
  selector:
    matchLabels: {app: model}
  targetPorts: [{number: 8000}]
  endpointPickerRef:
    name: model-epp
    port: {number: 9002}
    failureMode: FailClose
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: model-epp}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: model-epp}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [inference.networking.k8s.io]
  resources: [inferencepools]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: model-epp}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: model-epp}
subjects:
- {kind: ServiceAccount, name: model-epp}
`

// eppRoute is what the operator writes for a model: one rule per inference path, the
// namespace/name prefix replaced, to the InferencePool; and a rule to the plain Service.
const eppRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: model}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /NS/model/v1/completions}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /v1/completions}}}]
    backendRefs: [{group: inference.networking.k8s.io, kind: InferencePool, name: model}]
  - matches: [{path: {type: PathPrefix, value: /NS/model/v1/chat/completions}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /v1/chat/completions}}}]
    backendRefs: [{group: inference.networking.k8s.io, kind: InferencePool, name: model}]
  - matches: [{path: {type: PathPrefix, value: /NS/direct}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
    backendRefs: [{name: model-direct, port: 80}]
`

// eppBins are the picker and the gateway: skipped without them, failed under CI (make test
// builds them).
func eppBins(t *testing.T) (string, string) {
	t.Helper()
	bin, gw := os.Getenv(operator.EPPBinEnv), os.Getenv(operator.GatewayBinEnv)
	if bin == "" || gw == "" {
		msg := operator.EPPBinEnv + " or " + operator.GatewayBinEnv + " is unset: build them with `make epp` and run with " +
			operator.EPPBinEnv + "=$PWD/test/epp/bin/epp " + operator.GatewayBinEnv + "=$PWD/test/epp/bin/gateway"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin, gw
}

func TestEndpointPicker(t *testing.T) {
	bin, gwBin := eppBins(t)
	ns := namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := operator.InstallInferencePoolCRDs(ctx, c, bin); err != nil {
		t.Fatal(err)
	}
	apply(t, ns, eppPool)

	// The two pods of the pool, Ready (their servers answer), and the outsider.
	var pool []string
	eventually(t, 90*time.Second, func() (bool, string) {
		out := jsonpath(t, ns, "pods", `{range .items[*]}{.metadata.labels.app} {.status.podIP} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		pool = pool[:0]
		ready := 0
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			if len(f) == 3 && f[2] == "True" {
				ready++
				if f[0] == "model" {
					pool = append(pool, f[1]+":8000")
				}
			}
		}
		return len(pool) == 2 && ready == 3, out
	})
	slices.Sort(pool)
	t.Logf("pool endpoints: %v", pool)

	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, ns, "model-epp")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	epp, err := operator.StartEPP(ctx, c, bin, dir, operator.EPPOptions{Namespace: ns, Pool: "model", Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := epp.Stop(30 * time.Second); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("picker log %s:\n%s", epp.LogPath, tail(epp.LogPath, 40))
		}
	})
	t.Logf("picker ready: ext_proc %s, health %s, metrics %s", epp.ExtProc, epp.Health, epp.Metrics)

	// The picker's Service: the local cluster's way to name a server outside its pods (an
	// ExternalName that is an IP); the pool points at its port.
	_, eppPort, _ := strings.Cut(epp.ExtProc, ":")
	apply(t, ns, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: model-epp}
spec:
  type: ExternalName
  externalName: 127.0.0.1
  ports: [{name: grpc, port: %s, appProtocol: http2}]
`, eppPort))
	kubectl(t, "patch", "-n", ns, "inferencepool/model", "--type=merge", "-p", `{"spec":{"endpointPickerRef":{"port":{"number":`+eppPort+`}}}}`)
	apply(t, ns, strings.ReplaceAll(eppRoute, "/NS/", "/"+ns+"/"))

	gwLog := filepath.Join(dir, "gateway.log")
	addr, metricsAddr, stop, err := operator.StartGateway(ctx, gwBin, gwLog, "--gateway="+ns+"/gw", "--kubeconfig="+c.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("gateway log %s:\n%s", gwLog, tail(gwLog, 40))
		}
	})
	t.Logf("gateway %s, metrics %s", addr, metricsAddr)

	// The gateway's status: the route accepted with its backends resolved, the pool accepted
	// by the Gateway with its picker Service found.
	eventually(t, 30*time.Second, func() (bool, string) {
		r := jsonpath(t, ns, "httproute/model", `{range .status.parents[*].conditions[*]}{.type}={.status}/{.observedGeneration} {end}`)
		p := jsonpath(t, ns, "inferencepool/model", `{range .status.parents[?(@.parentRef.name=="gw")].conditions[*]}{.type}={.status} {end}`)
		return strings.Contains(r, "Accepted=True/1") && strings.Contains(r, "ResolvedRefs=True/1") &&
			strings.Contains(p, "Accepted=True") && strings.Contains(p, "ResolvedRefs=True"), "route: " + r + "; pool: " + p
	})

	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
	post := func(path, body string) (int, string, string) {
		t.Helper()
		res, err := hc.Post("http://"+addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("x-gateway-destination-endpoint"), string(b)
	}

	// Requests through the gateway are answered by a pod of the pool, never the outsider.
	completions := "/" + ns + "/model/v1/completions"
	seen := map[string]int{}
	for i := range 6 {
		code, ep, body := post(completions, fmt.Sprintf(`{"model": "facebook/opt-125m", "prompt": "question %d: the capital of France is", "max_tokens": 2}`, i))
		if code != http.StatusOK || !strings.Contains(body, `"choices"`) {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
		if !slices.Contains(pool, ep) {
			t.Fatalf("request %d served by %q, not one of the pool's %v", i, ep, pool)
		}
		seen[ep]++
	}
	t.Logf("short prompts, served per pod: %v", seen)
	code, ep, body := post("/"+ns+"/model/v1/chat/completions", `{"model": "facebook/opt-125m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
	if code != http.StatusOK || !slices.Contains(pool, ep) {
		t.Fatalf("chat completion: %d from %q: %s", code, ep, body)
	}

	// Requests sharing a long prompt prefix land on one pod: the prefix-cache scorer (weight 3)
	// outweighs the queue and KV-cache scorers (2 each) once the first has been routed.
	prefix := strings.Repeat("In a village of La Mancha, the name of which I have no desire to call to mind, ", 30)
	var first string
	for i := range 8 {
		code, ep, body := post(completions, fmt.Sprintf(`{"model": "facebook/opt-125m", "prompt": %q, "max_tokens": 2}`, prefix+fmt.Sprintf("Part %d.", i)))
		if code != http.StatusOK {
			t.Fatalf("prefix request %d: %d %s", i, code, body)
		}
		if i == 0 {
			first = ep
			continue
		}
		if ep != first {
			t.Fatalf("prefix request %d served by %s, the first by %s: the shared prefix did not keep the pod", i, ep, first)
		}
	}
	t.Logf("8 requests sharing a %d-character prefix: all served by %s", len(prefix), first)

	// The Service backend: the selector's Ready pods, round-robin; a missing route is 404.
	res, err := hc.Get("http://" + addr + "/" + ns + "/direct/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !slices.Contains(pool, res.Header.Get("x-gateway-destination-endpoint")) || !strings.Contains(string(b), "facebook/opt-125m") {
		t.Fatalf("Service backend: %d from %q: %s", res.StatusCode, res.Header.Get("x-gateway-destination-endpoint"), b)
	}
	if code, _, body := post("/"+ns+"/nothing/v1/completions", `{}`); code != http.StatusNotFound {
		t.Fatalf("unrouted path: %d %s, want 404", code, body)
	}

	// The gateway's metrics count what it routed.
	res, err = hc.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`test_gateway_requests_total{backend_kind="InferencePool",code="200",endpoint="` + first + `"}`, `test_gateway_ext_proc_duration_seconds_count{pool="` + ns + `/model"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("gateway metrics lack %s:\n%s", want, grep(string(b), "test_gateway"))
		}
	}

	// The picker's own metrics: the pool's Ready pods and what it scraped from them (the
	// collector refreshes every --refresh-prometheus-metrics-interval, 5s).
	var poolMetrics string
	eventually(t, 30*time.Second, func() (bool, string) {
		res, err := hc.Get("http://" + epp.Metrics + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		poolMetrics = grep(string(b), "inference_pool_")
		return strings.Contains(poolMetrics, `inference_pool_ready_pods{name="model"} 2`), poolMetrics
	})
	t.Logf("picker metrics:\n%s", poolMetrics)

	// FailClose: with the picker gone, requests to the pool are refused with a clear 503.
	if err := epp.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	code, _, body = post(completions, `{"model": "facebook/opt-125m", "prompt": "x", "max_tokens": 2}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "endpoint picker unavailable") {
		t.Fatalf("picker stopped, FailClose: %d %s, want 503", code, body)
	}
	// FailOpen: any Ready pod of the pool.
	kubectl(t, "patch", "-n", ns, "inferencepool/model", "--type=merge", "-p", `{"spec":{"endpointPickerRef":{"failureMode":"FailOpen"}}}`)
	eventually(t, 30*time.Second, func() (bool, string) {
		code, ep, body := post(completions, `{"model": "facebook/opt-125m", "prompt": "x", "max_tokens": 2}`)
		return code == http.StatusOK && slices.Contains(pool, ep), fmt.Sprintf("%d from %q: %s", code, ep, body)
	})
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
