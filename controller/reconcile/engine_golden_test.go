package reconcile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

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
// vllm-templates.json was rendered by the operator before spec.engine.
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
