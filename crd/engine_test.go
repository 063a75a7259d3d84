package crd

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// specOf is a v1beta1 spec from JSON with a base model and replicas.
func specOf(t *testing.T, js string) map[string]any {
	t.Helper()
	s := map[string]any{}
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatal(err)
	}
	s["baseModel"], s["replicas"] = "m", int64(1)
	return s
}

// extOf is the same spec as the decoder reads it.
func extOf(t *testing.T, js string) SpecExtensions {
	t.Helper()
	var e SpecExtensions
	if err := json.Unmarshal([]byte(js), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestEngineTablesByEngine: spec.engine chooses the table spec.engineArgs and spec.env are
// checked against, in CEL and in the decoder alike: a flag refused by one engine's table is
// let through under the other's, and each engine's refusals carry its own message.
func TestEngineTablesByEngine(t *testing.T) {
	evalCEL := newCELSpec(t)
	sg := Refused(EngineSGLang)
	vl := Refused(EngineVLLM)
	cases := []struct {
		name, spec string
		want       string // a message both must refuse with; "" for none
	}{
		{"vllm's -tp on vllm", `{"engineArgs":["-tp","2"]}`, vl.Args[2].Message},
		{"vllm's -tp on sglang (not SGLang's flag: its parser refuses it, the crash says so)", `{"engine":"sglang","engineArgs":["-tp","2"]}`, ""},
		{"--distributed-executor-backend on vllm", `{"engineArgs":["--distributed-executor-backend","ray"]}`, "--distributed-executor-backend is the operator's"},
		{"--distributed-executor-backend on sglang", `{"engine":"sglang","engineArgs":["--distributed-executor-backend","ray"]}`, ""},
		{"--tp-size on sglang", `{"engine":"sglang","engineArgs":["--tp-size","2"]}`, sg.Args[2].Message},
		{"--tp on sglang (argparse's abbreviation)", `{"engine":"sglang","engineArgs":["--tp=2"]}`, sg.Args[2].Message},
		{"--model-path on sglang", `{"engine":"sglang","engineArgs":["--model-path","x"]}`, sg.Args[0].Message},
		{"--nnodes on sglang", `{"engine":"sglang","engineArgs":["--nnodes","2"]}`, "--nnodes, --node-rank and --dist-init-addr are the operator's"},
		{"--dist-init-addr on vllm (not vLLM's)", `{"engineArgs":["--dist-init-addr","x:1"]}`, ""},
		{"--enable-lora on sglang", `{"engine":"sglang","engineArgs":["--enable-lora"]}`, "--enable-lora, --lora-paths"},
		{"--api-key on sglang without adapters", `{"engine":"sglang","engineArgs":["--api-key","k"]}`, ""},
		{"SGLang's own flags", `{"engine":"sglang","engineArgs":["--context-length","8192","--mem-fraction-static","0.85","--enable-metrics-for-all-schedulers","--tool-call-parser","qwen25"]}`, ""},
		{"VLLM_PORT on vllm", `{"env":[{"name":"VLLM_PORT","value":"1"}]}`, "VLLM_PORT is vLLM's internal port"},
		{"VLLM_PORT on sglang", `{"engine":"sglang","env":[{"name":"VLLM_PORT","value":"1"}]}`, ""},
		{"HF_HOME with a cache on sglang", `{"engine":"sglang","cache":{"claimName":"c"},"env":[{"name":"HF_HOME","value":"/x"}]}`, RuleEnvHFHomeWithCacheMsg},
		{"adapters on sglang", `{"engine":"sglang","adapters":[{"name":"a","storageURI":"hf://o/a"}]}`, ""},
		{"no adapters on sglang", `{"engine":"sglang","adapters":[]}`, ""},
		{"adapters on vllm", `{"engine":"vllm","adapters":[{"name":"a","storageURI":"hf://o/a"}]}`, ""},
		{"s3 source on sglang", `{"engine":"sglang","cache":{"size":"10Gi","source":"s3://bucket/p"}}`, RuleSGLangS3Msg},
		{"hub fill on sglang", `{"engine":"sglang","cache":{"size":"10Gi"}}`, ""},
		{"pvc source on sglang", `{"engine":"sglang","cache":{"source":"pvc://c/models/m"}}`, ""},
		{"multi-node on sglang", `{"engine":"sglang","gpusPerReplica":4,"multiNode":{"nodes":2}}`, ""},
		{"pipeline parallel on sglang", `{"engine":"sglang","gpusPerReplica":6,"parallelism":{"tensorParallelSize":2,"pipelineParallelSize":3}}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := specOf(t, tc.spec)
			if g, ok := spec["gpusPerReplica"].(float64); ok {
				spec["gpusPerReplica"] = int64(g)
			}
			for _, k := range []string{"multiNode", "parallelism"} {
				if m, ok := spec[k].(map[string]any); ok {
					for f, v := range m {
						m[f] = int64(v.(float64))
					}
				}
			}
			ext := extOf(t, tc.spec)
			byCEL, byGo := evalCEL(t, spec), append(validateEngine(&ext), validateExtensions(&ext)...)
			for name, got := range map[string][]string{"CEL": byCEL, "Validate": byGo} {
				joined := strings.Join(got, "; ")
				switch {
				case tc.want == "" && len(got) > 0:
					t.Errorf("%s refuses: %q", name, got)
				case tc.want != "" && !strings.Contains(joined, tc.want):
					t.Errorf("%s: want %q, got %q", name, tc.want, got)
				}
			}
		})
	}
}

// sglangSpellings are the items SGLang v0.5.3's argparse reads as flag: each prefix argparse
// may take for it (allow_abbrev), bare and with =value. No '_' for '-', no .key: a plain
// ArgumentParser.
func sglangSpellings(flag string) []string {
	name := strings.TrimPrefix(flag, "--")
	var out []string
	for i := 1; i <= len(name); i++ {
		out = append(out, "--"+name[:i], "--"+name[:i]+"=1")
	}
	return out
}

// TestSGLangArgsRefusedByCELAndValidate: every spelling of every flag SGLang's table refuses is
// refused on an sglang model by the CRD's CEL rules, with its group's message, and by the pure
// Validate with the same messages; no message of vLLM's own is given for an sglang model.
func TestSGLangArgsRefusedByCELAndValidate(t *testing.T) {
	evalCEL := newCELSpec(t)
	r := Refused(EngineSGLang)
	vllmMsgs := map[string]bool{}
	for _, o := range slices.Concat(OwnedArgs, OwnedArgsWithAdapters) {
		vllmMsgs[o.Message] = true
	}
	for _, o := range slices.Concat(r.Args, r.ArgsWithAdapters) {
		delete(vllmMsgs, o.Message) // the same words under both (--port and --host, --served-model-name)
	}
	check := func(t *testing.T, owned []OwnedArg, withAdapters bool) {
		t.Helper()
		for _, o := range owned {
			for _, f := range o.Flags {
				for _, item := range sglangSpellings(f) {
					spec := map[string]any{"baseModel": "m", "replicas": int64(1), "engine": EngineSGLang, "engineArgs": []any{item, "1"}}
					ext := SpecExtensions{Engine: EngineSGLang, EngineArgs: []string{item, "1"}}
					if withAdapters {
						// SGLang's with-adapters table (--api-key) holds only with adapters.
						spec["adapters"] = []any{map[string]any{"name": "a", "storageURI": "/a"}}
						ext.Adapters = []Adapter{{Name: "a", StorageURI: "/a"}}
					}
					byCEL, byGo := evalCEL(t, spec), validateEngine(&ext)
					if !slices.Contains(byCEL, o.Message) || !slices.Contains(byGo, o.Message) {
						t.Errorf("%q (for %s): CEL %q, Validate %q; want %q", item, f, byCEL, byGo, o.Message)
					}
					for _, m := range slices.Concat(byCEL, byGo) {
						if vllmMsgs[m] {
							t.Errorf("%q on sglang: refused with vLLM's %q", item, m)
						}
					}
				}
			}
		}
	}
	check(t, r.Args, false)
	check(t, r.ArgsWithAdapters, true)
}

// TestEngineCELWithinRuntimeBudget: the longest list of the longest items, under either engine,
// stays within the API server's per-call and per-object CEL budgets with both engines' rules.
func TestEngineCELWithinRuntimeBudget(t *testing.T) {
	evalCEL := newCELSpec(t)
	args := make([]any, MaxEngineArgs)
	for i := range args {
		args[i] = "--" + strings.Repeat("a", maxString-2)
	}
	env := make([]any, MaxEnv)
	for i := range env {
		env[i] = map[string]any{"name": "E" + strings.Repeat("a", 200) + string(rune('a'+i%26)) + string(rune('a'+i/26)), "value": "v"}
	}
	for _, e := range Engines {
		spec := map[string]any{"baseModel": "m", "replicas": int64(1), "engine": e, "engineArgs": args, "env": env}
		if got := evalCEL(t, spec); len(got) > 0 {
			t.Fatalf("%s: refused: %q", e, got)
		}
	}
}

// TestEngineFixed: spec.engine cannot change on an update, in the API server's words; the
// default (set on every object by the schema) counts as vllm.
func TestEngineFixed(t *testing.T) {
	v1 := DefinitionWithV1beta1(InClusterWebhook()).Spec.Versions[1].Schema.OpenAPIV3Schema
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, &internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := schema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	v := cel.NewValidator(s, true, perCallLimit)
	obj := func(engine string) map[string]any {
		return map[string]any{"apiVersion": GroupVersionV1beta1.String(), "kind": Kind,
			"metadata": map[string]any{"name": "m", "namespace": "ns"},
			"spec":     map[string]any{"baseModel": "m", "replicas": int64(1), "engine": engine}}
	}
	for _, c := range []struct {
		from, to string
		refused  bool
	}{{"vllm", "sglang", true}, {"sglang", "vllm", true}, {"vllm", "vllm", false}, {"sglang", "sglang", false}} {
		errs, _ := v.Validate(context.Background(), nil, s, obj(c.to), obj(c.from), runtimeCELCostBudget)
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Detail)
		}
		if slices.Contains(msgs, RuleEngineFixedMsg) != c.refused {
			t.Errorf("%s -> %s: %q; want refused %v", c.from, c.to, msgs, c.refused)
		}
	}
	if d := v1.Properties["spec"].Properties["engine"].Default; d == nil || string(d.Raw) != `"vllm"` {
		t.Errorf("spec.engine's default is %v, want vllm", d)
	}
}

// TestValidateEngineName: the decoder refuses an engine the API does not know (an object
// written through v1alpha1's annotation, which no schema checks), and takes "" as vLLM.
func TestValidateEngineName(t *testing.T) {
	for _, c := range []struct{ engine, want string }{{"", ""}, {"vllm", ""}, {"sglang", ""}, {"tgi", `spec.engine "tgi" must be one of vllm, sglang`}} {
		got := strings.Join(validateEngine(&SpecExtensions{Engine: c.engine}), "; ")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("engine %q: %q, want %q", c.engine, got, c.want)
		}
	}
}

// TestEngineRoundTrips: spec.engine survives v1beta1 -> v1alpha1 -> v1beta1 in the annotation,
// EngineOf reads it from there, and a model that names none is vLLM.
func TestEngineRoundTrips(t *testing.T) {
	for _, e := range []string{"", EngineVLLM, EngineSGLang} {
		b := &InferenceServiceV1beta1{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: InferenceServiceSpecV1beta1{BaseModel: "m", Engine: e,
			Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}
		a, err := ConvertFromV1beta1(b)
		if err != nil {
			t.Fatal(err)
		}
		want := e
		if want == "" {
			want = EngineVLLM
		}
		if got := EngineOf(a); got != want {
			t.Errorf("%q: EngineOf %q", e, got)
		}
		ext, _, _ := ExtensionsOf(a)
		if ext.EngineName() != want {
			t.Errorf("%q: EngineName %q", e, ext.EngineName())
		}
		b2, err := ConvertToV1beta1(a)
		if err != nil {
			t.Fatal(err)
		}
		// The default is not kept in the annotation; converted back, it is the API server's
		// default again.
		if b2.Spec.Engine != want || e != EngineSGLang && strings.Contains(a.Annotations[AnnotationV1beta1Spec], `"engine"`) {
			t.Errorf("%q: round trip gave %q, annotation %q", e, b2.Spec.Engine, a.Annotations[AnnotationV1beta1Spec])
		}
		if got := a.Spec.ImageFor(EngineOf(a)); (want == EngineSGLang) != strings.HasPrefix(got, "lmsysorg/sglang:") {
			t.Errorf("%q: image %q", e, got)
		}
	}
	if EngineOf(nil) != EngineVLLM || EngineOf(&InferenceService{}) != EngineVLLM {
		t.Error("no annotation must read as vLLM")
	}
}
