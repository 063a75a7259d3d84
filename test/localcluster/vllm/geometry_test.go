package vllm

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

func TestGeometryLookup(t *testing.T) {
	for model, want := range map[string]string{
		"Qwen/Qwen3-8B": "Qwen3ForCausalLM", "qwen/qwen3-8b": "Qwen3ForCausalLM", "/models/Qwen3-8B": "Qwen3ForCausalLM",
		"/models/qwen3-30b-a3b/": "Qwen3MoeForCausalLM", "openai/gpt-oss-120b": "GptOssForCausalLM",
		"deepseek-ai/DeepSeek-R1": "DeepseekV3ForCausalLM", "facebook/opt-125m": "OPTForCausalLM",
		"someone/Qwen3-8B": "", "/models/llama": "", "m": "",
	} {
		g, ok := geometryOf(model)
		if g.arch != want || ok != (want != "") {
			t.Errorf("geometryOf(%q) = %q %v, want %q", model, g.arch, ok, want)
		}
	}
	// an unknown model keeps the guesses from its name
	if hfmodel.WeightBytes("m") != 2e9 || defaultMaxModelLen("m") != 8192 || hfmodel.Architecture("org/Mistral-7B") != "MistralForCausalLM" {
		t.Errorf("unknown model: %d bytes, max len %d, %s", hfmodel.WeightBytes("m"), defaultMaxModelLen("m"), hfmodel.Architecture("org/Mistral-7B"))
	}
}

// TestGeometryDerivedMaxLen: the context vLLM derives, printed as Python prints it.
func TestGeometryDerivedMaxLen(t *testing.T) {
	for model, want := range map[string]string{
		"Qwen/Qwen3-8B": "40960", "meta-llama/Llama-3.1-8B-Instruct": "131072", "deepseek-ai/DeepSeek-V3": "163840",
		"openai/gpt-oss-120b": "131072.0", "Qwen/Qwen2.5-72B-Instruct": "32768", "facebook/opt-125m": "2048",
		"mistralai/Mixtral-8x22B-v0.1": "65536",
	} {
		g, _ := geometryOf(model)
		if _, repr := g.derivedMaxLen(); repr != want {
			t.Errorf("%s: derived %s, want %s", model, repr, want)
		}
	}
}

// TestGeometryPipelineSplit: vLLM's get_pp_indices, the remainder on the stages before the last.
func TestGeometryPipelineSplit(t *testing.T) {
	for _, tc := range []struct {
		layers, pp int
		want       []int
		uneven     bool
	}{
		{61, 2, []int{31, 30}, true},
		{36, 5, []int{7, 7, 7, 8, 7}, true},
		{80, 4, []int{20, 20, 20, 20}, false},
		{3, 5, []int{0, 1, 1, 1, 0}, true}, // more stages than layers: vLLM refuses nothing
	} {
		got, uneven := ppPartition(tc.layers, tc.pp)
		if !slices.Equal(got, tc.want) || uneven != tc.uneven {
			t.Errorf("ppPartition(%d, %d) = %v %v, want %v %v", tc.layers, tc.pp, got, uneven, tc.want, tc.uneven)
		}
	}
}

// TestGeometryKVBytes: bytes per token and layer on one GPU.
func TestGeometryKVBytes(t *testing.T) {
	for _, tc := range []struct {
		model string
		tp    int
		want  int64
	}{
		{"Qwen/Qwen3-8B", 1, 2 * 8 * 128 * 2},
		{"Qwen/Qwen3-8B", 2, 2 * 4 * 128 * 2},
		{"Qwen/Qwen3-8B", 16, 2 * 1 * 128 * 2}, // fewer KV heads than ranks: each keeps one
		{"Qwen/Qwen2.5-0.5B-Instruct", 1, 2 * 2 * 64 * 2},
		{"deepseek-ai/DeepSeek-V3", 8, 576 * 2}, // MLA: the latent vector, whole on every rank
		{"openai/gpt-oss-20b", 1, 2 * 8 * 64 * 2},
	} {
		g, _ := geometryOf(tc.model)
		if got := g.kvLayerBytes(tc.tp); got != tc.want {
			t.Errorf("%s tp %d: %d bytes, want %d", tc.model, tc.tp, got, tc.want)
		}
	}
}

// vtLines is the log without process prefixes, one line an element.
func vtLines(log *proc.Log) []string {
	var out []string
	for _, l := range strings.Split(log.Render(proc.LogOptions{TailLines: -1}), "\n") {
		out = append(out, processPrefixOf(l))
	}
	return out
}

// processPrefixOf strips "(APIServer pid=1) " and the like.
func processPrefixOf(l string) string {
	l = strings.NewReplacer("\x1b[1;36m", "", "\x1b[0;0m", "").Replace(l)
	if strings.HasPrefix(l, "(") {
		if i := strings.Index(l, ") "); i > 0 && strings.Contains(l[:i], " pid=") {
			return l[i+2:]
		}
	}
	return l
}

// TestGeometryStartFailures: a start vLLM v0.11 refuses for the model's shape ends as vLLM
// ends it, exit 1, with vLLM's words as the exception (pydantic's ValidationError, then vLLM's
// text, for the checks made while building its config).
func TestGeometryStartFailures(t *testing.T) {
	hf := map[string]string{"HF_TOKEN": "hf_x"}
	const caution = "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA array out-of-bounds error."
	for _, tc := range []struct {
		name string
		spec proc.Spec
		// exception is the line after the traceback's frames; detail the line after it ("").
		exception, detail string
	}{
		{"heads not divisible by tp", proc.Spec{Args: []string{"Qwen/Qwen3-8B", "--tensor-parallel-size", "3"}, GPUs: 3},
			"pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig",
			"  Value error, Total number of attention heads (32) must be divisible by tensor parallel size (3). [type=value_error, input_value=ArgsKwargs((), {'model_co...additional_config': {}}), input_type=ArgsKwargs]"},
		{"gpt-oss heads not divisible by tp", proc.Spec{Args: []string{"openai/gpt-oss-120b", "-tp", "3"}, GPUs: 4},
			"pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig",
			"  Value error, Total number of attention heads (64) must be divisible by tensor parallel size (3). [type=value_error, input_value=ArgsKwargs((), {'model_co...additional_config': {}}), input_type=ArgsKwargs]"},
		{"max-model-len beyond the context", proc.Spec{Args: []string{"Qwen/Qwen3-8B", "--max-model-len", "50000"}},
			"pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
			"  Value error, User-specified max_model_len (50000) is greater than the derived max_model_len (max_position_embeddings=40960 or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. " + caution + " [type=value_error, input_value=ArgsKwargs((), {'model': ...rocessor_plugin': None}), input_type=ArgsKwargs]"},
		{"yarn context printed as a float", proc.Spec{Args: []string{"openai/gpt-oss-20b", "--max-model-len", "200000"}},
			"pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
			"  Value error, User-specified max_model_len (200000) is greater than the derived max_model_len (max_position_embeddings=131072.0 or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. " + caution + " [type=value_error, input_value=ArgsKwargs((), {'model': ...rocessor_plugin': None}), input_type=ArgsKwargs]"},
		{"70B on one 80 GiB GPU", proc.Spec{Args: []string{"meta-llama/Llama-3.1-70B-Instruct"}, Env: hf},
			"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 7364.53 MiB is free. Including non-PyTorch memory, this process has 72.00 GiB memory in use. Of the allocated memory 71.75 GiB is allocated by PyTorch, and 48.83 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)", ""},
		{"DeepSeek-V3 FP8 on 8 H100s", proc.Spec{Args: []string{"deepseek-ai/DeepSeek-V3", "-tp", "8"}, GPUs: 8},
			"", ""}, // checked below: the weights' 78.6 GiB per GPU exceed 72 GiB
		{"KV cache short of one request", proc.Spec{Args: []string{"Qwen/Qwen3-32B"}},
			"ValueError: To serve at least one request with the models's max seq len (40960), (10.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.98 GiB). Based on the available memory, the estimated maximum model length is 40864. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// shapes, not times: a 671 GB download is 13 s at the default scale
			s, log, _ := vtStart(t, tc.spec, Config{DownloadTime: 10 * time.Millisecond})
			st := vtExit(t, s, log)
			text := log.Render(proc.LogOptions{TailLines: -1})
			if st.Code != 1 || st.Reason != "Error" {
				t.Fatalf("exit %+v, want 1 Error:\n%s", st, text)
			}
			if tc.exception == "" {
				tc.exception = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"
				if !strings.Contains(text, tc.exception) || !strings.Contains(text, "quantization=fp8") {
					t.Fatalf("no CUDA OOM for FP8 weights:\n%s", text)
				}
				return
			}
			lines := vtLines(log)
			i := slices.Index(lines, tc.exception)
			if i < 1 || !strings.HasPrefix(lines[i-1], "    ") {
				t.Fatalf("no exception line %q after a traceback's frames:\n%s", tc.exception, text)
			}
			if tc.detail != "" && lines[i+1] != tc.detail {
				t.Fatalf("line after the exception:\n%q\nwant\n%q", lines[i+1], tc.detail)
			}
			if strings.Contains(tc.exception, "ValidationError") && strings.Contains(text, "EngineCore") {
				t.Fatalf("a config error stops vLLM before its engine starts:\n%s", text)
			}
		})
	}
}

// TestGeometryServes: what fits serves, on the number of GPUs it needs.
func TestGeometryServes(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec proc.Spec
		want []string // in the log
	}{
		{"tp 2 divides 32 heads", proc.Spec{Args: []string{"Qwen/Qwen3-8B", "-tp", "2"}, GPUs: 2},
			[]string{"Resolved architecture: Qwen3ForCausalLM", "Using max model len 40960", "rank 1 in world size 2"}},
		{"long context allowed", proc.Spec{Args: []string{"Qwen/Qwen3-8B", "--max-model-len", "50000"}, Env: map[string]string{"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}},
			[]string{"WARNING", "User-specified max_model_len (50000) is greater than the derived max_model_len (max_position_embeddings=40960 or model_max_length=None in model's config.json). VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution.", "Using max model len 50000"}},
		{"Qwen3-32B at a 32K context", proc.Spec{Args: []string{"Qwen/Qwen3-32B", "--max-model-len", "32768"}},
			[]string{"Maximum concurrency for 32,768 tokens per request"}},
		{"gpt-oss-120b on one GPU", proc.Spec{Args: []string{"openai/gpt-oss-120b"}},
			[]string{"Resolved architecture: GptOssForCausalLM", "quantization=mxfp4", "Using max model len 131072"}},
		{"gpt-oss-20b on one GPU", proc.Spec{Args: []string{"openai/gpt-oss-20b"}}, []string{"Model loading took 12.8523 GiB"}},
		{"DeepSeek-V3 on 16 GPUs, two stages", proc.Spec{Args: []string{"deepseek-ai/DeepSeek-V3", "-tp", "8", "-pp", "2"}, GPUs: 16},
			[]string{"quantization=fp8", "Hidden layers were unevenly partitioned: [31,30]. This can be manually overridden using the VLLM_PP_LAYER_PARTITION environment variable", "Using max model len 163840"}},
		{"opt-125m in float16", proc.Spec{Args: []string{"facebook/opt-125m"}}, []string{"dtype=torch.float16", "Using max model len 2048"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, log, url := vtStart(t, tc.spec, Config{LoadTime: 10 * time.Millisecond, DownloadTime: 10 * time.Millisecond})
			vtWaitStatus(t, "GET", url+"/health", "", 200)
			text := log.Render(proc.LogOptions{TailLines: -1})
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Fatalf("log lacks %q:\n%s", w, text)
				}
			}
		})
	}
}
