package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// The operator's pod template run by the local cluster's kubelet and its strict fake vLLM
// (vllm serve's argument parser, GPU memory per tensor-parallel rank, service links, gated
// models, the weights cache).

// servedModels is what a model pod answers on its own /v1/models: the base models' ids.
func servedModels(ip string) ([]string, error) {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Get("http://" + net.JoinHostPort(ip, fmt.Sprint(reconcile.Port)) + "/v1/models")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/models: %d %s %v", resp.StatusCode, b, err)
	}
	var list struct {
		Data []struct {
			ID     string  `json:"id"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range list.Data {
		if m.Parent == nil {
			out = append(out, m.ID)
		}
	}
	return out, nil
}

// servesAs waits for the isvc's pod to be ready and to answer /v1/models with model.
func servesAs(t *testing.T, ns, isvc, model string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, isvc+" serves "+model+" on its pod", func() error {
		pods, err := env.Kube.CoreV1().Pods(ns).List(testenv.Ctx(t, time.Minute), metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + isvc})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.PodIP == "" {
				continue
			}
			got, err := servedModels(p.Status.PodIP)
			if err != nil {
				return fmt.Errorf("pod %s: %w", p.Name, err)
			}
			if fmt.Sprint(got) == fmt.Sprint([]string{model}) {
				return nil
			}
			return fmt.Errorf("pod %s serves %v", p.Name, got)
		}
		return fmt.Errorf("no pod with an IP yet")
	})
}

// TestTemplateTensorParallel70B: a 72B model (144 GB in bf16) does not fit one 80 GiB GPU;
// with gpusPerReplica 4 the template passes --tensor-parallel-size 4 and each rank loads a
// quarter, so the model becomes Ready and serves under its id.
func TestTemplateTensorParallel70B(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const model = "Qwen/Qwen2.5-72B-Instruct"
	if _, err := env.CreateISVC(testenv.Ctx(t, time.Minute), ns, "big", map[string]any{"model": model, "replicas": int64(1), "gpusPerReplica": int64(4)}); err != nil {
		t.Fatal(err)
	}
	i := env.WaitPhase(t, ns, "big", crd.PhaseReady, 3*time.Minute)
	servesAs(t, ns, "big", model)
	if i.Status.ReadyReplicas != 1 {
		t.Fatalf("status %+v", i.Status)
	}
}

// TestTemplateServiceNamedVLLM: a Service named vllm in the namespace would give every pod
// VLLM_PORT=tcp://...:port through service links, and vLLM aborts on it; the template turns
// service links off, so the model starts.
func TestTemplateServiceNamedVLLM(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	applyYAML(t, ns, `apiVersion: v1
kind: Service
metadata: {name: vllm}
spec:
  ports: [{port: 8000}]
`)
	const model = "Qwen/Qwen3-0.6B"
	if _, err := env.CreateISVC(testenv.Ctx(t, time.Minute), ns, "small", map[string]any{"model": model, "replicas": int64(1), "gpusPerReplica": int64(1)}); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "small", crd.PhaseReady, 2*time.Minute)
	servesAs(t, ns, "small", model)
}

// TestTemplateEngineFieldsV1beta1: on the v1beta1 install the API server refuses, with the
// field to use, engine arguments and variables the operator owns; a gated model starts with
// its token from a Secret, its weights on a claim and an engine argument, and status names the
// model clients send.
func TestTemplateEngineFieldsV1beta1(t *testing.T) {
	ns := modelNamespace(t)
	w := useWebhookCRD(t)
	isvc := func(extra string) string {
		return "apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: gated}\nspec:\n  baseModel: meta-llama/Llama-3.1-8B-Instruct\n  replicas: 1\n  gpusPerReplica: 1\n" + extra
	}
	for extra, want := range map[string]string{
		"  engineArgs: [--tensor-parallel-size, \"2\"]\n":                      "--tensor-parallel-size is spec.gpusPerReplica",
		"  engineArgs: [--model=x]\n":                                          "the model is spec.baseModel",
		"  env: [{name: VLLM_PORT, value: \"8001\"}]\n":                        "VLLM_PORT is vLLM's internal port",
		"  cache: {claimName: weights}\n  env: [{name: HF_HOME, value: /x}]\n": "HF_HOME is set by the operator",
	} {
		f := filepath.Join(t.TempDir(), "isvc.yaml")
		if err := os.WriteFile(f, []byte(isvc(extra)), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := kubectlErr(t, nil, w.cache, "apply", "--dry-run=server", "-n", ns, "-f", f)
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("%q: want the API server to refuse with %q, got %v: %s", extra, want, err, out)
		}
	}

	pv := "weights-" + ns
	t.Cleanup(func() { env.Kubectl(t, "delete", "pv", pv, "--wait=false") })
	env.Kubectl(t, "create", "secret", "generic", "hf-token", "-n", ns, "--from-literal=token=hf_x")
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %s}
spec:
  capacity: {storage: 50Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath: {path: /tmp/%s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: weights}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  resources: {requests: {storage: 20Gi}}
`, pv, pv))
	f := filepath.Join(t.TempDir(), "isvc.yaml")
	if err := os.WriteFile(f, []byte(isvc(`  engineArgs: [--max-model-len, "8192"]
  env:
  - name: HF_TOKEN
    valueFrom: {secretKeyRef: {name: hf-token, key: token}}
  cache: {claimName: weights}
`)), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	testenv.Eventually(t, 3*time.Minute, "gated model Ready with its model name in status", func() error {
		u, err := env.Dyn.Resource(crd.ResourceV1beta1).Namespace(ns).Get(testenv.Ctx(t, time.Minute), "gated", metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		name, _, _ := unstructured.NestedString(u.Object, "status", "modelName")
		reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
		if phase != string(crd.PhaseReady) || name != "meta-llama/Llama-3.1-8B-Instruct" {
			return fmt.Errorf("phase %q reason %q modelName %q", phase, reason, name)
		}
		return nil
	})
	servesAs(t, ns, "gated", "meta-llama/Llama-3.1-8B-Instruct")
}
