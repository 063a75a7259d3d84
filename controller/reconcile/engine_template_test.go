package reconcile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine/sglang"
	"github.com/example/inferenceservice-operator/crd"
)

// goldenVLLM are vLLM models as they were before spec.engine: stored with the image the
// schema defaulted, no engine, in several shapes.
func goldenVLLM() map[string]*crd.InferenceService {
	mk := func(name string, spec crd.InferenceServiceSpec, ext *crd.SpecExtensions) *crd.InferenceService {
		isvc := &crd.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("u-" + name)}, Spec: spec}
		if ext != nil {
			b, err := json.Marshal(ext)
			if err != nil {
				panic(err)
			}
			isvc.Annotations = map[string]string{crd.AnnotationV1beta1Spec: string(b)}
		}
		return isvc
	}
	img := "vllm/vllm-openai:v0.11.0"
	return map[string]*crd.InferenceService{
		"plain":   mk("plain", crd.InferenceServiceSpec{Model: "Qwen/Qwen3-0.6B", Replicas: 2, Image: img}, nil),
		"tp":      mk("tp", crd.InferenceServiceSpec{Model: "Qwen/Qwen3-8B", Replicas: 1, Image: img, GPUsPerReplica: ptr.To[int32](4)}, &crd.SpecExtensions{EngineArgs: []string{"--max-model-len", "8192"}}),
		"adapter": mk("adapter", crd.InferenceServiceSpec{Model: "m", Replicas: 1, Image: img}, &crd.SpecExtensions{Adapters: []crd.Adapter{{Name: "sql", StorageURI: "hf://o/sql", Rank: ptr.To[int32](32)}}}),
		"cache":   mk("cache", crd.InferenceServiceSpec{Model: "m", Replicas: 1, Image: img}, &crd.SpecExtensions{Cache: &crd.Cache{Size: "10Gi"}, StartupTimeoutSeconds: ptr.To[int32](600)}),
		"multi":   mk("multi", crd.InferenceServiceSpec{Model: "m", Replicas: 1, Image: img, GPUsPerReplica: ptr.To[int32](4)}, &crd.SpecExtensions{MultiNode: &crd.MultiNode{Nodes: 2}, Adapters: []crd.Adapter{{Name: "a", StorageURI: "/a"}}}),
		"pp":      mk("pp", crd.InferenceServiceSpec{Model: "m", Replicas: 1, Image: img, GPUsPerReplica: ptr.To[int32](6)}, &crd.SpecExtensions{Parallelism: &crd.Parallelism{TensorParallelSize: 2, PipelineParallelSize: 3}}),
	}
}

// goldenTemplates renders each golden model's pod templates.
func goldenTemplates(t *testing.T) []byte {
	t.Helper()
	out := map[string]any{}
	for name, isvc := range goldenVLLM() {
		ext, _, err := crd.ExtensionsOf(isvc)
		if err != nil {
			t.Fatal(err)
		}
		d := DesiredChildren(isvc, &ext, Features{})
		if d.Deployment != nil {
			out[name] = d.Deployment.Spec.Template
		} else {
			out[name] = d.LeaderWorkerSet.Object["spec"]
		}
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVLLMTemplatesUnchanged: a vLLM model stored before spec.engine (with the image the schema
// defaulted then, and no engine) renders the very pod templates it rendered before, so its pod
// template hash does not change and the operator's upgrade rolls no pod. testdata/
// vllm-templates.json was rendered by the operator before spec.engine, and again when the
// model server got its preStop sleep (PreStopSleepSeconds), which rolls every model once.
func TestVLLMTemplatesUnchanged(t *testing.T) {
	got := goldenTemplates(t)
	path := filepath.Join("testdata", "vllm-templates.json")
	if os.Getenv("WRITE_GOLDEN") != "" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("the pod templates of vLLM models changed:\n%s", got)
	}
}

// sglangISVC is a model on SGLang with ext's v1beta1 fields.
func sglangISVC(t *testing.T, spec crd.InferenceServiceSpec, ext crd.SpecExtensions) (*crd.InferenceService, *crd.SpecExtensions) {
	t.Helper()
	ext.Engine = crd.EngineSGLang
	b, err := json.Marshal(&ext)
	if err != nil {
		t.Fatal(err)
	}
	isvc := &crd.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "sg", Namespace: "ns", UID: "u-sg",
		Annotations: map[string]string{crd.AnnotationV1beta1Spec: string(b)}}, Spec: spec}
	got, _, err := crd.ExtensionsOf(isvc)
	if err != nil {
		t.Fatal(err)
	}
	return isvc, &got
}

// TestSGLangTemplate: an SGLang model's pod runs SGLang's launcher with its own flags on the
// Service's port, in SGLang's image when the spec names none, probed on SGLang's /health, with
// no vLLM switch in its environment and the cache's variables as vLLM's.
func TestSGLangTemplate(t *testing.T) {
	isvc, ext := sglangISVC(t, crd.InferenceServiceSpec{Model: "Qwen/Qwen3-8B", Replicas: 1, GPUsPerReplica: ptr.To[int32](2)},
		crd.SpecExtensions{EngineArgs: []string{"--context-length", "8192"}, Cache: &crd.Cache{Size: "20Gi"}})
	if engineOf(isvc).Name() != crd.EngineSGLang {
		t.Fatalf("engineOf: %s", engineOf(isvc).Name())
	}
	d := DesiredChildren(isvc, ext, Features{}).Deployment
	c := d.Spec.Template.Spec.Containers[0]
	want := []string{"--model-path", "Qwen/Qwen3-8B", "--served-model-name", "Qwen/Qwen3-8B", "--host", "0.0.0.0", "--port", "8000",
		"--enable-metrics", "--tp-size", "2", "--context-length", "8192"}
	if strings.Join(c.Command, " ") != "python3 -m sglang.launch_server" || !slices.Equal(c.Args, want) {
		t.Errorf("command %q args %q, want %q", c.Command, c.Args, want)
	}
	if c.Image != sglang.Image {
		t.Errorf("image %q, want %q", c.Image, sglang.Image)
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != sglang.HealthPath || p.HTTPGet.Port.StrVal != PortName {
			t.Errorf("%s probe %+v", name, p)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != Port {
		t.Errorf("ports %+v", c.Ports)
	}
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, []string{HFHomeEnv, HFOfflineEnv, "HF_MODULES_CACHE"}) {
		t.Errorf("env %q", names)
	}
	// The fill Job runs in the model's image too.
	if img := isvc.Spec.ImageFor(crd.EngineOf(isvc)); img != sglang.Image {
		t.Errorf("fill image %q", img)
	}
	// spec.image wins.
	isvc.Spec.Image = "registry.example.com/sglang:mine"
	if c := DesiredChildren(isvc, ext, Features{}).Deployment.Spec.Template.Spec.Containers[0]; c.Image != isvc.Spec.Image {
		t.Errorf("image %q", c.Image)
	}
}

// TestSGLangMultiNodeTemplate: an SGLang model over two nodes runs SGLang's own group launch
// on LeaderWorkerSet, no Ray: every pod runs the launcher with the group's size, its rank and
// the leader's rendezvous address; only the leader serves and is probed.
func TestSGLangMultiNodeTemplate(t *testing.T) {
	isvc, ext := sglangISVC(t, crd.InferenceServiceSpec{Model: "m", Replicas: 1, GPUsPerReplica: ptr.To[int32](4)},
		crd.SpecExtensions{MultiNode: &crd.MultiNode{Nodes: 2}})
	lws := DesiredChildren(isvc, ext, Features{}).LeaderWorkerSet
	leader, _ := lwsTemplate(lws, "leaderTemplate")
	worker, _ := lwsTemplate(lws, "workerTemplate")
	lc, wc := leader.Spec.Containers[0], worker.Spec.Containers[0]
	for _, w := range []string{"exec python3 -m sglang.launch_server '--model-path' 'm'", "'--tp-size' '2' '--pp-size' '2'",
		"--nnodes $(LWS_GROUP_SIZE) --dist-init-addr $(LWS_LEADER_ADDRESS):20000", "--node-rank 0"} {
		if !strings.Contains(lc.Args[0], w) {
			t.Errorf("leader script %q lacks %q", lc.Args[0], w)
		}
	}
	if !strings.Contains(wc.Args[0], "--node-rank $(LWS_WORKER_INDEX)") || strings.Contains(wc.Args[0], "ray") || strings.Contains(lc.Args[0], "ray") {
		t.Errorf("worker script %q", wc.Args[0])
	}
	if lc.ReadinessProbe == nil || lc.ReadinessProbe.HTTPGet.Path != sglang.HealthPath || wc.ReadinessProbe != nil || len(wc.Ports) != 0 {
		t.Errorf("leader probe %+v, worker probe %+v ports %+v", lc.ReadinessProbe, wc.ReadinessProbe, wc.Ports)
	}
	if lc.Image != sglang.Image || wc.Image != sglang.Image {
		t.Errorf("images %q %q", lc.Image, wc.Image)
	}
}
