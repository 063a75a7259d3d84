// The Gateway API Inference Extension's endpoint picker (test/epp, started by
// operator.StartEPP) on the local cluster: for an InferencePool over a Deployment of fake vLLM
// pods it answers a gateway's ext_proc exchange for an OpenAI /v1/completions request with one
// of the pool's pods, and that pod serves the request.

package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/example/inferenceservice-operator/test/operator"
)

// eppPool is the model's Deployment of 2 fake vLLM pods (Ready once the server answers
// /health), a vLLM pod outside the pool, the InferencePool selecting the Deployment's pods,
// and the picker's ServiceAccount with the namespaced RBAC it needs: read the pool and the
// pods (see test/epp/README.md).
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

// completion is the body of the OpenAI /v1/completions request the gateway forwards.
const completion = `{"model": "facebook/opt-125m", "prompt": "The capital of France is", "max_tokens": 4}`

func TestEndpointPicker(t *testing.T) {
	// Not operator.Bin: that fails under CI, and `make test` does not build the picker yet
	// (the operator makes no InferencePools); skipped everywhere without EPP_BIN.
	bin := os.Getenv(operator.EPPBinEnv)
	if bin == "" {
		t.Skip(operator.EPPBinEnv + " is unset: build it with `make epp` and run with " + operator.EPPBinEnv + "=$PWD/test/epp/bin/epp")
	}
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
	epp, err := operator.StartEPP(ctx, c, bin, t.TempDir(), operator.EPPOptions{Namespace: ns, Pool: "model", Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := epp.Stop(30 * time.Second); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("picker log %s", epp.LogPath)
		}
	})
	t.Logf("picker ready: ext_proc %s, health %s", epp.ExtProc, epp.Health)
	conn, err := epp.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := extprocv3.NewExternalProcessorClient(conn)

	// Ask until the picker has chosen each pod once (it round-robins over the pool's Ready
	// pods), each answer one of the pool's endpoints, never the outsider.
	seen := map[string]int{}
	for i := 0; i < 20 && len(seen) < 2; i++ {
		var got picked
		eventually(t, 30*time.Second, func() (bool, string) {
			var err error
			got, err = pick(ctx, client, []byte(completion))
			if err != nil {
				return false, err.Error()
			}
			return true, ""
		})
		if !slices.Contains(pool, got.endpoint) {
			t.Fatalf("request %d: picker chose %q, not one of the pool's %v", i, got.endpoint, pool)
		}
		if got.header != got.endpoint {
			t.Errorf("request %d: header x-gateway-destination-endpoint %q, dynamic metadata %q", i, got.header, got.endpoint)
		}
		if !bytes.Equal(got.body, []byte(completion)) {
			t.Errorf("request %d: body passed on %q, want the request's %q", i, got.body, completion)
		}
		seen[got.endpoint]++
		// What the gateway then does: the request, to the chosen pod.
		if i == 0 {
			res, err := (&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}).
				Post("http://"+got.endpoint+"/v1/completions", "application/json", strings.NewReader(completion))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"choices"`) {
				t.Fatalf("the chosen pod %s answered %d: %s", got.endpoint, res.StatusCode, b)
			}
			t.Logf("%s served the completion: %.200s", got.endpoint, b)
		}
	}
	if len(seen) != 2 {
		t.Errorf("picker chose %v, want both of %v", seen, pool)
	}
	t.Logf("picks per endpoint: %v", seen)

	// Scaled down to one pod, the pool follows the pods: the picker chooses only the pod left.
	kubectl(t, "scale", "-n", ns, "deployment/model", "--replicas=1")
	var left string
	eventually(t, 60*time.Second, func() (bool, string) {
		out := jsonpath(t, ns, "pods", `{range .items[?(@.metadata.labels.app=="model")]}{.status.podIP}{"\n"}{end}`)
		ips := strings.Fields(out)
		if len(ips) != 1 {
			return false, "pods of the pool: " + out
		}
		left = ips[0] + ":8000"
		return true, ""
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		for i := range 4 {
			got, err := pick(ctx, client, []byte(completion))
			if err != nil {
				return false, err.Error()
			}
			if got.endpoint != left {
				return false, fmt.Sprintf("pick %d chose %s, only %s is left", i, got.endpoint, left)
			}
		}
		return true, ""
	})
	t.Logf("after the scale-down, every pick is %s", left)
}

// picked is what the picker answered for one request.
type picked struct {
	endpoint string // dynamic metadata envoy.lb / x-gateway-destination-endpoint
	header   string // the request header x-gateway-destination-endpoint it sets
	body     []byte // the request body it streams back
}

// pick runs one request's ext_proc exchange as Envoy does in FULL_DUPLEX_STREAMED request
// body mode: the request headers (not the end of the stream), then the body in one message
// ending the stream; the picker answers the headers once it has the body (with the chosen
// endpoint as a header mutation and as dynamic metadata), then the body, streamed back.
func pick(ctx context.Context, client extprocv3.ExternalProcessorClient, body []byte) (picked, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := client.Process(ctx)
	if err != nil {
		return picked{}, err
	}
	header := func(k, v string) *corev3.HeaderValue { return &corev3.HeaderValue{Key: k, RawValue: []byte(v)} }
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
			header(":method", "POST"), header(":scheme", "http"), header(":authority", "gateway.local"),
			header(":path", "/v1/completions"), header("content-type", "application/json"),
			header("content-length", fmt.Sprint(len(body))),
		}}},
	}}); err != nil {
		return picked{}, err
	}
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true},
	}}); err != nil {
		return picked{}, err
	}
	var got picked
	// Bounded: one headers answer, then body chunks up to the one ending the stream.
	for range 64 {
		res, err := stream.Recv()
		if err != nil {
			return got, fmt.Errorf("ext_proc: %w", err)
		}
		switch r := res.Response.(type) {
		case *extprocv3.ProcessingResponse_RequestHeaders:
			for _, h := range r.RequestHeaders.GetResponse().GetHeaderMutation().GetSetHeaders() {
				if h.GetHeader().GetKey() == "x-gateway-destination-endpoint" {
					got.header = string(h.GetHeader().GetRawValue())
				}
			}
			lb := res.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue()
			got.endpoint = lb.GetFields()["x-gateway-destination-endpoint"].GetStringValue()
			if got.endpoint == "" {
				m, _ := json.Marshal(res.GetDynamicMetadata().AsMap())
				return got, fmt.Errorf("no envoy.lb x-gateway-destination-endpoint in the dynamic metadata %s", m)
			}
		case *extprocv3.ProcessingResponse_RequestBody:
			sr := r.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			got.body = append(got.body, sr.GetBody()...)
			if sr.GetEndOfStream() {
				if got.endpoint == "" {
					return got, errors.New("the body came back before the headers' answer")
				}
				return got, stream.CloseSend()
			}
		default:
			return got, fmt.Errorf("unexpected answer %T", r)
		}
	}
	return got, errors.New("no end of the request body in 64 answers")
}
