package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/engine/sglang"
	"github.com/example/inferenceservice-operator/controller/engine/vllm"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestSGLangModelAPI: on the v1beta1 install a model with spec.engine sglang gets SGLang's pod
// template (its launcher and flags, its image, the probes on its /health at the Service's
// port), kubectl get shows its engine, and a model that names none is vLLM's as before. The
// API server refuses, in the engine's words, SGLang's own flags, a change of engine, and what
// SGLang does not support here (an s3:// source); vLLM's flags SGLang does not own pass
// SGLang's table. No SGLang server needs to run for any of it.
func TestSGLangModelAPI(t *testing.T) {
	ns := env.Namespace(t)
	w := useWebhookCRD(t)
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	file := func(name, spec string) string {
		t.Helper()
		f := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(f, []byte("apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: "+name+"}\nspec:\n  baseModel: Qwen/Qwen3-0.6B\n  replicas: 1\n"+spec), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", file("sg", "  engine: sglang\n  engineArgs: [--context-length, \"8192\", --distributed-executor-backend, mp]\n"))
	env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", file("vl", ""))

	ctx := context.Background()
	testenv.Eventually(t, time.Minute, "sg's Deployment runs SGLang", func() error {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "sg", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers[0]
		wantArgs := []string{"--model-path", "Qwen/Qwen3-0.6B", "--served-model-name", "Qwen/Qwen3-0.6B", "--host", "0.0.0.0", "--port", "8000",
			"--enable-metrics", "--context-length", "8192", "--distributed-executor-backend", "mp"}
		if strings.Join(c.Command, " ") != "python3 -m sglang.launch_server" || !slices.Equal(c.Args, wantArgs) || c.Image != sglang.Image {
			return fmt.Errorf("command %q args %q image %q", c.Command, c.Args, c.Image)
		}
		for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != sglang.HealthPath || p.HTTPGet.Port.StrVal != reconcile.PortName {
				return fmt.Errorf("%s probe %+v", name, p)
			}
		}
		for _, e := range c.Env {
			if e.Name == vllm.RuntimeLoRAEnv {
				return fmt.Errorf("vLLM's switch on SGLang: %v", c.Env)
			}
		}
		return nil
	})
	testenv.Eventually(t, time.Minute, "vl's Deployment runs vLLM", func() error {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "vl", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := d.Spec.Template.Spec.Containers[0]; strings.Join(c.Command, " ") != "vllm serve" || c.Image != vllm.Image {
			return fmt.Errorf("command %q image %q", c.Command, c.Image)
		}
		return nil
	})
	out := env.Kubectl(t, w.cache, "get", "isvc.v1beta1.ai.example.com", "-n", ns)
	if !strings.Contains(out, "ENGINE") || !strings.Contains(out, "sglang") || !strings.Contains(out, "vllm") {
		t.Fatalf("kubectl get:\n%s", out)
	}
	if got := env.Kubectl(t, w.cache, "get", "isvc.v1beta1.ai.example.com", "-n", ns, "vl", "-o", "jsonpath={.spec.engine}"); got != crd.EngineVLLM {
		t.Fatalf("vl's engine %q, want the default vllm", got)
	}

	sg := crd.Refused(crd.EngineSGLang)
	for _, c := range []struct{ name, spec, want string }{
		{"tp", "  engine: sglang\n  engineArgs: [--tp, \"2\"]\n", sg.Args[2].Message},
		{"dist", "  engine: sglang\n  engineArgs: [--dist-init-addr, \"10.0.0.1:20000\"]\n", "--nnodes, --node-rank and --dist-init-addr are the operator's"},
		{"s3", "  engine: sglang\n  cache: {size: 10Gi, source: \"s3://bucket/m\"}\n", crd.RuleSGLangS3Msg},
		{"bad", "  engine: tgi\n", `Unsupported value: "tgi"`},
		{"vllm-tp", "  engineArgs: [-tp, \"2\"]\n", crd.OwnedArgs[2].Message},
	} {
		out, err := kubectlErr(t, nil, w.cache, "apply", "-n", ns, "-f", file("refused-"+c.name, c.spec))
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: want refused with %q, got %v: %s", c.name, c.want, err, out)
		}
	}
	out, err := kubectlErr(t, nil, w.cache, "patch", "isvc.v1beta1.ai.example.com", "-n", ns, "sg", "--type=merge", "-p", `{"spec":{"engine":"vllm"}}`)
	if err == nil || !strings.Contains(out, crd.RuleEngineFixedMsg) {
		t.Fatalf("a change of engine: %v: %s", err, out)
	}
	out, err = kubectlErr(t, nil, w.cache, "patch", "isvc.v1beta1.ai.example.com", "-n", ns, "vl", "--type=merge", "-p", `{"spec":{"engine":"sglang"}}`)
	if err == nil || !strings.Contains(out, crd.RuleEngineFixedMsg) {
		t.Fatalf("a change of engine on a model that named none: %v: %s", err, out)
	}
}
