package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/example/inferenceservice-operator/test/localcluster/sglang"
	"github.com/example/inferenceservice-operator/test/localcluster/vllm"
)

// TestServingDispatchesSGLang: a container running SGLang's launcher in the SGLang image gets
// the fake SGLang (ready on /health once warmed up, SGLang's model cards and log), and a vLLM
// container beside it the fake vLLM, as before.
func TestServingDispatchesSGLang(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	oneNodeKubelet(t, ctx, cancel, client, kubeletConfig{serve: true, crashBackoffInitial: time.Second, crashBackoffMax: 2 * time.Second,
		server: vllm.Config{TokenTime: time.Millisecond}}, 203)
	pod := func(name, image string, command, args []string) {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
			Spec: v1.PodSpec{NodeName: nodeName(0), Containers: []v1.Container{{Name: "server", Image: image, Command: command, Args: args,
				Resources:      v1.ResourceRequirements{Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
				ReadinessProbe: &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}}}}}
		if _, err := client.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("sgl", sglang.Image, []string{"python3", "-m", "sglang.launch_server"},
		[]string{"--model-path", "Qwen/Qwen3-0.6B", "--served-model-name", "qwen", "--host", "0.0.0.0", "--port", "8000", "--enable-metrics"})
	pod("vll", "vllm/vllm-openai:v0.11.0", nil, []string{"Qwen/Qwen3-0.6B", "--port", "8000"})
	models := map[string]string{}
	deadline := time.Now().Add(60 * time.Second)
	for _, name := range []string{"sgl", "vll"} {
		for {
			p, err := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
			ready := err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
			if ready {
				res, err := http.Get("http://" + p.Status.PodIP + ":8000/v1/models")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				models[name] = string(b)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not ready: %s\n%s", name, ckState(ctx, client, name), ckEvents(ctx, client, name))
			}
			time.Sleep(20 * time.Millisecond) // poll interval
		}
	}
	if !strings.Contains(models["sgl"], `"owned_by":"sglang"`) || !strings.Contains(models["vll"], `"owned_by":"vllm"`) {
		t.Fatalf("models: %v", models)
	}
}
