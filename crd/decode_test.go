package crd

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

func TestFromUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ai.example.com/v1alpha1", "kind": "InferenceService",
		"metadata": map[string]any{"name": "qwen3", "namespace": "team-a"},
		"spec":     map[string]any{"model": "Qwen/Qwen3-0.6B", "replicas": int64(3), "gpusPerReplica": int64(2)},
	}}
	isvc, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if isvc.Spec.Model != "Qwen/Qwen3-0.6B" || isvc.Spec.Replicas != 3 || isvc.Spec.GPUs() != 2 || isvc.Spec.ImageFor("") != DefaultImage {
		t.Fatalf("decoded %+v", isvc.Spec)
	}
	isvc.Spec.Model = "changed"
	if u.Object["spec"].(map[string]any)["model"] != "Qwen/Qwen3-0.6B" {
		t.Fatal("decoding aliased the cached object")
	}

	u.Object["spec"].(map[string]any)["replicas"] = "three"
	if _, err := FromUnstructured(u); err == nil || !strings.Contains(err.Error(), "team-a/qwen3") {
		t.Fatalf("want a decode error naming the object, got %v", err)
	}
}

func TestValidate(t *testing.T) {
	ok := func() *InferenceService {
		i := &InferenceService{Spec: InferenceServiceSpec{Model: "m", Replicas: 1}}
		i.Name = "qwen3"
		return i
	}
	cases := []struct {
		name   string
		mutate func(*InferenceService)
		want   string
	}{
		{"valid", func(*InferenceService) {}, ""},
		{"long name", func(i *InferenceService) { i.Name = strings.Repeat("a", 51) }, "metadata.name"},
		{"dotted name", func(i *InferenceService) { i.Name = "a.b" }, "metadata.name"},
		{"digit first", func(i *InferenceService) { i.Name = "1abc" }, "metadata.name"},
		{"no model", func(i *InferenceService) { i.Spec.Model = "" }, "spec.model is required"},
		{"model with space", func(i *InferenceService) { i.Spec.Model = "a b" }, "spec.model"},
		{"flag model", func(i *InferenceService) { i.Spec.Model = "--trust-remote-code" }, "must not start with '-'"},
		{"negative replicas", func(i *InferenceService) { i.Spec.Replicas = -1 }, "spec.replicas"},
		{"huge replicas", func(i *InferenceService) { i.Spec.Replicas = MaxReplicas + 1 }, "spec.replicas"},
		{"negative gpus", func(i *InferenceService) { i.Spec.GPUsPerReplica = ptr.To[int32](-1) }, "spec.gpusPerReplica"},
		{"too many gpus", func(i *InferenceService) { i.Spec.GPUsPerReplica = ptr.To[int32](17) }, "spec.gpusPerReplica"},
		{"zero gpus", func(i *InferenceService) { i.Spec.GPUsPerReplica = ptr.To[int32](0) }, ""},
		{"bad image", func(i *InferenceService) { i.Spec.Image = "a\tb" }, "spec.image"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			i := ok()
			c.mutate(i)
			err := Validate(i)
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want error containing %q, got %v", c.want, err)
			}
		})
	}
}

// refusedCase is a v1beta1 spec extension, as the annotation holds it, and a part of the
// message it is refused with.
type refusedCase struct {
	ext  string
	want string
}

// engineRefused and engineAllowed are what the CRD's CEL rules on engineArgs and env refuse and
// let through, checked alike by Validate (TestExtensions) and by CEL (TestEngineArgsCEL).
var engineRefused = []refusedCase{
	{`{"engineArgs":["--max-model-len","8192","--tensor_parallel_size=2"]}`, "--tensor-parallel-size is spec.gpusPerReplica"},
	{`{"engineArgs":["--model","x"]}`, "the model is spec.baseModel"},
	{`{"engineArgs":["--port=9000"]}`, "--port and --host are the operator's"},
	{`{"engineArgs":["--served-model-name","x"]}`, "--served-model-name is the operator's"},
	{`{"engineArgs":["--lora-modules","a=b"]}`, "list adapters in spec.adapters"},
	{`{"engineArgs":["-tp","2"]}`, "spec.gpusPerReplica"},
	// vLLM reads '_' as '-' in a --flag, and argparse takes a unique prefix of an option.
	{`{"engineArgs":["--tensor-parallel","2"]}`, "--tensor-parallel-size is spec.gpusPerReplica"},
	{`{"engineArgs":["--tensor_parallel","2"]}`, "--tensor-parallel-size is spec.gpusPerReplica"},
	{`{"engineArgs":["--tensor-parallel-s=2"]}`, "--tensor-parallel-size is spec.gpusPerReplica"},
	{`{"engineArgs":["--te=2"]}`, "--tensor-parallel-size is spec.gpusPerReplica"},
	{`{"engineArgs":["-t","2"]}`, "--tensor-parallel-size is spec.gpusPerReplica"},
	{`{"engineArgs":["-tp=2"]}`, "--tensor-parallel-size is spec.gpusPerReplica"},
	{`{"engineArgs":["--pipeline_parallel=2"]}`, "--pipeline-parallel-size is spec.multiNode.pipelineParallelSize"},
	{`{"engineArgs":["-p","2"]}`, "--pipeline-parallel-size is spec.multiNode.pipelineParallelSize"},
	{`{"engineArgs":["--ho","0.0.0.0"]}`, "--port and --host are the operator's"},
	{`{"engineArgs":["--por=9000"]}`, "--port and --host are the operator's"},
	{`{"engineArgs":["--served_model","x"]}`, "--served-model-name is the operator's"},
	{`{"engineArgs":["--served-model-name.x","y"]}`, "--served-model-name is the operator's"},
	{`{"engineArgs":["--no-enable-lora"]}`, "list adapters in spec.adapters"},
	{`{"engineArgs":["--no_enable_lora"]}`, "list adapters in spec.adapters"},
	{`{"engineArgs":["--lora-mod","a=b"]}`, "list adapters in spec.adapters"},
	{`{"engineArgs":["--max_cpu=4"]}`, "list adapters in spec.adapters"},
	{`{"engineArgs":["--disable-log-stats"]}`, "--disable-log-stats"},
	{`{"engineArgs":["--disable_log_stats"]}`, "--disable-log-stats"},
	{`{"engineArgs":["--disable-log-s"]}`, "--disable-log-stats"},
	{`{"engineArgs":["--data-parallel-size","2"]}`, "--data-parallel-size (-dp)"},
	{`{"engineArgs":["--data_parallel_size=2"]}`, "--data-parallel-size (-dp)"},
	{`{"engineArgs":["-dp","2"]}`, "--data-parallel-size (-dp)"},
	{`{"engineArgs":["--distributed-executor-backend","ray"]}`, "--distributed-executor-backend is the operator's"},
	{`{"engineArgs":["--dist=mp"]}`, "--distributed-executor-backend is the operator's"},
	{`{"adapters":[{"name":"a","storageURI":"hf://x"}],"engineArgs":["--api-key","k"]}`, "--api-key cannot be used with spec.adapters"},
	{`{"adapters":[{"name":"a","storageURI":"hf://x"}],"engineArgs":["--api_k=k"]}`, "--api-key cannot be used with spec.adapters"},
	{`{"adapters":[{"name":"a","storageURI":"hf://x"}],"engineArgs":["--api-key.x","k"]}`, "--api-key cannot be used with spec.adapters"},
	{`{"adapters":[{"name":"a","storageURI":"hf://x"}],"env":[{"name":"VLLM_API_KEY","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}}]}`, "VLLM_API_KEY cannot be used with spec.adapters"},
	{`{"env":[{"name":"VLLM_PORT","value":"1"}]}`, "VLLM_PORT is vLLM's internal port"},
	{`{"env":[{"name":"VLLM_ALLOW_RUNTIME_LORA_UPDATING","value":"False"}]}`, "set by the operator for spec.adapters"},
	{`{"env":[{"name":"HF_HOME","value":"/x"}],"cache":{"claimName":"w"}}`, RuleEnvHFHomeWithCacheMsg},
	{`{"adapters":[{"name":"a","storageURI":"hf://org/a"}],"cache":{"size":"20Gi","source":"s3://models/q"}}`, RuleCacheS3HubAdaptersMsg},
}

var engineAllowed = []string{
	`{"engineArgs":["--max-model-len","8192","--gpu-memory-utilization=0.9","--trust-remote-code","--max-loras","4"]}`,
	// Real vLLM v0.11 flags that look like owned ones but are not prefixes of them.
	`{"engineArgs":["--model-impl","vllm","--enable-lora-bias","--max_lora_rank=16","--disable-log-requests","--enable-log-requests"]}`,
	`{"engineArgs":["-dcp","2","--data-parallel-backend","mp","--hf-overrides.max_position_embeddings","4096"]}`,
	`{"engineArgs":["--api-key","k"],"env":[{"name":"VLLM_API_KEY","value":"k"}]}`, // /health and /metrics stay open; no adapter to load
	`{"env":[{"name":"HF_TOKEN","valueFrom":{"secretKeyRef":{"name":"hf","key":"token"}}},{"name":"HF_HOME","value":"/x"}]}`,
	`{"adapters":[{"name":"a","storageURI":"/root/.cache/huggingface/s3/models/q/lora-a"}],"cache":{"size":"20Gi","source":"s3://models/q"}}`,
}

// parallelCase is a replica's GPUs, a v1beta1 spec extension splitting them, and a part of
// the message it is refused with ("" when allowed).
type parallelCase struct {
	gpus int32
	ext  string
	want string
}

// parallelCases are what the CRD's CEL rules on spec.parallelism and spec.multiNode refuse and
// let through, checked alike by Validate (TestValidateParallelism) and by CEL
// (TestParallelismCEL).
var parallelCases = []parallelCase{
	// Uneven GPU counts, as vLLM advises: pipeline stages take what tensor parallel cannot.
	{6, `{"parallelism":{"tensorParallelSize":2,"pipelineParallelSize":3}}`, ""},
	{6, `{"parallelism":{"tensorParallelSize":1,"pipelineParallelSize":6}}`, ""},
	{3, `{"parallelism":{"tensorParallelSize":1,"pipelineParallelSize":3}}`, ""},
	{1, `{"parallelism":{"tensorParallelSize":1,"pipelineParallelSize":1}}`, ""},
	{16, `{"parallelism":{"tensorParallelSize":16,"pipelineParallelSize":1}}`, ""},
	// spec.parallelism over spec.multiNode's nodes, in its fields' place.
	{16, `{"multiNode":{"nodes":2},"parallelism":{"tensorParallelSize":4,"pipelineParallelSize":4}}`, ""},
	{16, `{"multiNode":{"nodes":2,"tensorParallelSize":8}}`, ""},
	{16, `{"multiNode":{"nodes":2}}`, ""},
	{6, `{"parallelism":{"tensorParallelSize":4,"pipelineParallelSize":2}}`, RuleParallelismGPUsMsg},
	{6, `{"parallelism":{"tensorParallelSize":6,"pipelineParallelSize":6}}`, RuleParallelismGPUsMsg},
	{1, `{"parallelism":{"tensorParallelSize":2,"pipelineParallelSize":1}}`, RuleParallelismGPUsMsg},
	{0, `{"parallelism":{"tensorParallelSize":1,"pipelineParallelSize":1}}`, RuleParallelismGPUsMsg},
	{16, `{"multiNode":{"nodes":2},"parallelism":{"tensorParallelSize":4,"pipelineParallelSize":2}}`, RuleParallelismGPUsMsg},
	{16, `{"multiNode":{"nodes":2,"pipelineParallelSize":2},"parallelism":{"tensorParallelSize":8,"pipelineParallelSize":2}}`, RuleParallelismOnceMsg},
	{16, `{"multiNode":{"nodes":2,"tensorParallelSize":8},"parallelism":{"tensorParallelSize":8,"pipelineParallelSize":2}}`, RuleParallelismOnceMsg},
	{16, `{"multiNode":{"nodes":2,"tensorParallelSize":4}}`, RuleMultiNodeParallelMsg},
	{16, `{"multiNode":{"nodes":3}}`, "must be a multiple of spec.multiNode.nodes"},
}

// TestValidateParallelism: Validate refuses and lets through what the CEL rules do, with their
// messages; sizes out of the schema's bounds are refused too.
func TestValidateParallelism(t *testing.T) {
	for _, tc := range append(parallelCases,
		parallelCase{6, `{"parallelism":{"tensorParallelSize":0,"pipelineParallelSize":6}}`, "must be between 1 and 128"},
		parallelCase{16, `{"parallelism":{"tensorParallelSize":129,"pipelineParallelSize":1}}`, "must be between 1 and 128"},
	) {
		i := &InferenceService{Spec: InferenceServiceSpec{Model: "m", Replicas: 1, GPUsPerReplica: ptr.To(tc.gpus)}}
		i.Name, i.Annotations = "x", map[string]string{AnnotationV1beta1Spec: tc.ext}
		err := Validate(i)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("gpus %d %s: %v", tc.gpus, tc.ext, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("gpus %d %s: want %q, got %v", tc.gpus, tc.ext, tc.want, err)
		}
	}
}

// TestExtensions: a v1beta1 object from the cache decodes to v1alpha1 plus its extensions, which
// Validate checks like the API server's rules would; a v1alpha1 replicas change drops the kept
// autoscaling as conversion does.
func TestExtensions(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ai.example.com/v1beta1", "kind": "InferenceService",
		"metadata": map[string]any{"name": "lora", "namespace": "ns"},
		"spec": map[string]any{"baseModel": "m", "adapters": []any{map[string]any{"name": "sql", "storageURI": "hf://o/sql"}},
			"autoscaling": map[string]any{"minReplicas": int64(2), "maxReplicas": int64(6)}},
		"status": map[string]any{"endpoint": "http://lora.ns.svc:8000", "loadedAdapters": []any{"sql"}},
	}}
	isvc, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	spec, status, err := ExtensionsOf(isvc)
	if err != nil || isvc.Spec.Model != "m" || isvc.Spec.Replicas != 2 || len(spec.Adapters) != 1 || spec.Autoscaling == nil || spec.Autoscaling.MaxReplicas != 6 ||
		status.Endpoint != "http://lora.ns.svc:8000" || len(status.LoadedAdapters) != 1 {
		t.Fatalf("decoded %+v %+v %+v: %v", isvc.Spec, spec, status, err)
	}
	if err := Validate(isvc); err != nil {
		t.Fatal(err)
	}
	isvc.Spec.Replicas = 5 // kubectl scale through v1alpha1
	if spec, _, _ := ExtensionsOf(isvc); spec.Autoscaling != nil {
		t.Fatal("a v1alpha1 replicas change must win over the kept autoscaling")
	}

	for _, tc := range append([]refusedCase{
		{`{"adapters":[{"name":"a","storageURI":"hf://x"},{"name":"a","storageURI":"hf://y"}]}`, RuleAdapterNamesUniqueMsg},
		{`{"autoscaling":{"minReplicas":5,"maxReplicas":2},"replicasUnset":true}`, RuleMinLEMaxMessage},
		{`{"adapters":[{"name":"-bad","storageURI":"hf://x"}]}`, "spec.adapters[0].name"},
		{`{"gateway":{"route":"no-slash"}}`, "spec.gateway.route"},
		{`{"adapters":7}`, "annotation ai.example.com/v1beta1-spec"},
		{`{"env":[{"name":"A","value":"1"},{"name":"A","value":"2"}]}`, "unique"},
		{`{"cache":{"claimName":"Bad_Name"}}`, "spec.cache.claimName"},
		{`{"startupTimeoutSeconds":5}`, "spec.startupTimeoutSeconds"},
		{`{"autoscaling":{"minReplicas":1,"maxReplicas":2,"scaleDownDelaySeconds":3601}}`, RuleScaleDownDelayMessage},
		{`{"autoscaling":{"minReplicas":1,"maxReplicas":2,"scaleDownDelaySeconds":-1}}`, RuleScaleDownDelayMessage},
		{`{"autoscaling":{"minReplicas":0,"maxReplicas":2,"idleSeconds":30}}`, RuleIdleSecondsMessage},
		{`{"autoscaling":{"minReplicas":1,"maxReplicas":2,"idleSeconds":60}}`, RuleIdleNeedsZeroMessage},
		{`{"autoscaling":{"minReplicas":-1,"maxReplicas":2}}`, "minReplicas must be between 0"},
		{`{"autoscaling":{"minReplicas":0,"maxReplicas":2},"multiNode":{"nodes":2}}`, RuleZeroNotMultiNodeMsg},
	}, engineRefused...) {
		i := &InferenceService{Spec: InferenceServiceSpec{Model: "m", Replicas: 5}}
		i.Name, i.Annotations = "x", map[string]string{AnnotationV1beta1Spec: tc.ext}
		if err := Validate(i); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q, got %v", tc.ext, tc.want, err)
		}
	}
	for _, ok := range append([]string{
		`{"cache":{"claimName":"weights"},"startupTimeoutSeconds":7200}`,
		`{"autoscaling":{"minReplicas":1,"maxReplicas":2,"scaleDownDelaySeconds":0}}`,
		`{"autoscaling":{"minReplicas":0,"maxReplicas":2,"idleSeconds":60}}`,
		`{"autoscaling":{"minReplicas":0,"maxReplicas":2}}`,
		`{"autoscaling":{"minReplicas":1,"maxReplicas":2,"scaleDownDelaySeconds":3600}}`,
		`{"adapters":[{"name":"chat","storageURI":"s3://b/chat"}]}`, // reported at run time, never blocks the base model
	}, engineAllowed...) {
		i := &InferenceService{Spec: InferenceServiceSpec{Model: "m", Replicas: 5}}
		i.Name, i.Annotations = "x", map[string]string{AnnotationV1beta1Spec: ok}
		if err := Validate(i); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// Every field of the status and its v1beta1 additions reaches a v1beta1 status write: a field
// added to the types and forgotten here would be dropped at each write (status.history was).
func TestStatusToUnstructuredV1beta1KeepsEveryField(t *testing.T) {
	st := &InferenceServiceStatus{}
	ext := &StatusExtensions{}
	fill := func(v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.String:
				f.SetString("x")
			case reflect.Int32, reflect.Int64:
				f.SetInt(1)
			case reflect.Slice:
				f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			case reflect.Pointer:
				f.Set(reflect.New(f.Type().Elem()))
			}
		}
	}
	fill(reflect.ValueOf(st).Elem())
	fill(reflect.ValueOf(ext).Elem())
	u, err := StatusToUnstructuredV1beta1(st, ext)
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(InferenceServiceStatusV1beta1{})
	for i := 0; i < typ.NumField(); i++ {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if _, ok := u[name]; !ok {
			t.Errorf("status.%s is dropped by a v1beta1 status write", name)
		}
	}
}
