// The shape of the models the fake vLLM knows by name, and vLLM v0.11's start-up checks on it:
// each catalog entry is the model's config.json as published (attention and KV heads, layers,
// context) and the bytes its weights take on the GPUs. A model not in the catalog keeps the
// guesses model.go makes from its name and skips these checks, as before.
//
// The checks, where vLLM v0.11.0 makes them:
//   - ModelConfig (vllm/config/model.py, _get_and_verify_max_len): --max-model-len above the
//     context derived from config.json, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1;
//   - VllmConfig (ModelConfig.verify_with_parallel_config): attention heads not divisible by
//     --tensor-parallel-size;
//   - the engine core (vllm/v1/core/kv_cache_utils.py, check_enough_kv_cache_memory): a KV
//     cache that cannot hold one max_model_len request.
//
// Weights per GPU against its memory stay in run.go's load, now with the catalog's bytes.

package vllm

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// geometry is a model's config.json as vLLM's start-up reads it.
type geometry struct {
	arch                   string // architectures[0], as vLLM resolves it
	heads, kvHeads, layers int    // num_attention_heads, num_key_value_heads, num_hidden_layers
	hidden                 int    // hidden_size
	headDim                int    // head_dim; 0: hidden_size / num_attention_heads, as vLLM derives it
	maxPosition            int    // max_position_embeddings
	rope                   ropeScaling
	// mla is kv_lora_rank + qk_rope_head_dim for DeepSeek's multi-head latent attention: the KV
	// cache keeps one latent vector of that size per token and layer, whole on every TP rank.
	mla int
	// slidingLayers of the layers attend only to the last slidingWindow tokens (gpt-oss: every
	// other layer, 128), so one request needs little of their cache.
	slidingLayers, slidingWindow int
	weights                      int64  // bytes the weights take on the GPUs: parameters x bytes of their dtype
	dtype                        string // the dtype vLLM computes and caches in ("torch.bfloat16")
	quant                        string // quantization_config.quant_method; "": none
	source                       string // where the numbers come from
}

// ropeScaling is config.json's rope_scaling, as far as vLLM derives the context from it.
type ropeScaling struct {
	typ    string // rope_type ("type" in older configs); "": no rope_scaling
	factor float64
	// float: the JSON spells the factor with a point (32.0), so Python's product is a float and
	// vLLM's error prints the derived length as one (131072.0).
	float    bool
	original int // original_max_position_embeddings, yarn's base
}

// bf16 is the bytes of params parameters in bfloat16 (or float16).
func bf16(params float64) int64 { return int64(params * 2) }

// Builders for the families below; the fields they leave out are zero for the family.
func qwen3(heads, kv, layers, hidden int, weights int64, source string) geometry {
	return geometry{arch: "Qwen3ForCausalLM", heads: heads, kvHeads: kv, layers: layers, hidden: hidden, headDim: 128,
		maxPosition: 40960, weights: weights, dtype: "torch.bfloat16", source: source}
}

// moe is the Qwen3 mixture-of-experts variant: the same attention, experts in place of the MLP.
func moe(g geometry) geometry {
	g.arch = "Qwen3MoeForCausalLM"
	return g
}

// llama is Llama 3.1-3.3: 131072 positions, already scaled by the llama3 rope type, so vLLM
// takes them as they are.
func llama(heads, kv, layers, hidden, headDim int, weights int64, source string) geometry {
	return geometry{arch: "LlamaForCausalLM", heads: heads, kvHeads: kv, layers: layers, hidden: hidden, headDim: headDim,
		maxPosition: 131072, rope: ropeScaling{typ: "llama3", original: 8192},
		weights: weights, dtype: "torch.bfloat16", source: source}
}

const (
	srcLLMProf  = "config.json, as copied in citsjtu2020/LLM-Prof sglang/Model_Config.md"
	srcCard     = "from the model card (Hugging Face page), not a config.json copy"
	srcDeepSeek = "config.json of deepseek-ai/DeepSeek-R1 (V3's architecture), as dumped in a public model-config note"
	srcGptOss   = "config.json of openai/gpt-oss-20b via ParagEkbote/hf-model-inspector; 120b's depth from the model card"
)

var (
	deepseekV3 = geometry{arch: "DeepseekV3ForCausalLM", heads: 128, kvHeads: 128, layers: 61, hidden: 7168,
		maxPosition: 163840, rope: ropeScaling{typ: "yarn", factor: 40, original: 4096}, mla: 512 + 64,
		// 671B main-model parameters in FP8 (1 byte), embeddings, head and norms in bf16 and the
		// FP32 block scales: about 675 GB (an estimate). The Hub's ~689 GB also holds the 11.5B
		// MTP module, which vLLM does not load unless speculative decoding asks for it.
		weights: 675e9, dtype: "torch.bfloat16", quant: "fp8", source: srcDeepSeek}
	gptOss = geometry{arch: "GptOssForCausalLM", heads: 64, kvHeads: 8, hidden: 2880, headDim: 64,
		maxPosition: 131072, rope: ropeScaling{typ: "yarn", factor: 32, float: true, original: 4096},
		slidingWindow: 128, dtype: "torch.bfloat16", quant: "mxfp4", source: srcGptOss}
	mixtral8x7B = geometry{arch: "MixtralForCausalLM", heads: 32, kvHeads: 8, layers: 32, hidden: 4096,
		maxPosition: 32768, weights: bf16(46.70e9), dtype: "torch.bfloat16",
		source: "config.json of mistralai/Mixtral-8x7B-v0.1 (public copies in code search)"}
	mixtral8x22B = geometry{arch: "MixtralForCausalLM", heads: 48, kvHeads: 8, layers: 56, hidden: 6144,
		maxPosition: 65536, weights: bf16(140.6e9), dtype: "torch.bfloat16", source: srcCard + "; 65536 from a Cerebras config of it"}
	llama8B   = llama(32, 8, 32, 4096, 128, bf16(8.03e9), srcLLMProf)
	llama70B  = llama(64, 8, 80, 8192, 128, bf16(70.55e9), "vulkomilev/oumi configs/recipes/llama3_1/README.md (from config.json)")
	llama405B = llama(128, 8, 126, 16384, 128, bf16(405.85e9), srcCard)
	llama1B   = llama(32, 8, 16, 2048, 64, bf16(1.24e9), srcCard)
	llama3B   = llama(24, 8, 28, 3072, 128, bf16(3.21e9), srcLLMProf)
)

// modelCatalog is every model the tests, samples and README name, and the popular ones around
// them, keyed by Hugging Face id as the Hub spells it. Weights are what vLLM loads onto the GPUs:
// parameters x 2 bytes for bf16 checkpoints, the checkpoint's own bytes for FP8 (DeepSeek) and
// MXFP4 (gpt-oss, whose experts are 4-bit and the rest bf16).
var modelCatalog = map[string]geometry{
	// vLLM 0.11.0 logs "Model loading took 1.1201 GiB" for it (tied embeddings, loaded once).
	"Qwen/Qwen3-0.6B":    qwen3(16, 8, 28, 1024, 1_202_702_458, "config.json of Qwen/Qwen3-0.6B (public copies in code search)"),
	"Qwen/Qwen3-1.7B":    qwen3(16, 8, 28, 2048, bf16(1.72e9), srcCard),
	"Qwen/Qwen3-4B":      qwen3(32, 8, 36, 2560, bf16(4.02e9), srcLLMProf),
	"Qwen/Qwen3-8B":      qwen3(32, 8, 36, 4096, bf16(8.19e9), srcLLMProf),
	"Qwen/Qwen3-14B":     qwen3(40, 8, 40, 5120, bf16(14.77e9), srcLLMProf),
	"Qwen/Qwen3-32B":     qwen3(64, 8, 64, 5120, bf16(32.76e9), srcLLMProf),
	"Qwen/Qwen3-30B-A3B": moe(qwen3(32, 4, 48, 2048, bf16(30.53e9), srcLLMProf)),
	"Qwen/Qwen3-235B-A22B": moe(qwen3(64, 4, 94, 4096, bf16(235.09e9),
		"THUDM/slime scripts/models/qwen3-235B-A22B.sh (from config.json); context as the Qwen3 family's config.json")),
	"Qwen/Qwen2.5-0.5B-Instruct": {arch: "Qwen2ForCausalLM", heads: 14, kvHeads: 2, layers: 24, hidden: 896, maxPosition: 32768,
		weights: bf16(0.494e9), dtype: "torch.bfloat16", source: "config.json of Qwen/Qwen2.5-0.5B (public dump) and the Instruct model card"},
	// config.json says 32768; the model card's 131,072 needs a YaRN rope_scaling the user adds.
	"Qwen/Qwen2.5-72B-Instruct": {arch: "Qwen2ForCausalLM", heads: 64, kvHeads: 8, layers: 80, hidden: 8192, maxPosition: 32768,
		weights: bf16(72.71e9), dtype: "torch.bfloat16", source: srcCard + "; context as vLLM reports it (max_position_embeddings=32768)"},

	"meta-llama/Llama-3.1-8B":            llama8B,
	"meta-llama/Llama-3.1-8B-Instruct":   llama8B,
	"meta-llama/Llama-3.1-70B":           llama70B,
	"meta-llama/Llama-3.1-70B-Instruct":  llama70B,
	"meta-llama/Llama-3.3-70B-Instruct":  llama70B,
	"meta-llama/Llama-3.1-405B":          llama405B,
	"meta-llama/Llama-3.1-405B-Instruct": llama405B,
	"meta-llama/Llama-3.2-1B":            llama1B,
	"meta-llama/Llama-3.2-1B-Instruct":   llama1B,
	"meta-llama/Llama-3.2-3B":            llama3B,
	"meta-llama/Llama-3.2-3B-Instruct":   llama3B,

	"deepseek-ai/DeepSeek-V3":      deepseekV3,
	"deepseek-ai/DeepSeek-V3-0324": deepseekV3,
	"deepseek-ai/DeepSeek-R1":      deepseekV3,
	"deepseek-ai/DeepSeek-R1-0528": deepseekV3,

	"mistralai/Mixtral-8x7B-v0.1":           mixtral8x7B,
	"mistralai/Mixtral-8x7B-Instruct-v0.1":  mixtral8x7B,
	"mistralai/Mixtral-8x22B-v0.1":          mixtral8x22B,
	"mistralai/Mixtral-8x22B-Instruct-v0.1": mixtral8x22B,

	// The Hub's safetensors totals: MXFP4 experts, bf16 attention and embeddings.
	"openai/gpt-oss-20b":  withDepth(gptOss, 24, 13.8e9),
	"openai/gpt-oss-120b": withDepth(gptOss, 36, 65.3e9),

	"facebook/opt-125m": {arch: "OPTForCausalLM", heads: 12, kvHeads: 12, layers: 12, hidden: 768, maxPosition: 2048,
		weights: bf16(125.2e6), dtype: "torch.float16", source: srcCard + " (config.json's torch_dtype float16)"},
}

// withDepth is gpt-oss at one size: every other layer slides.
func withDepth(g geometry, layers int, weights int64) geometry {
	g.layers, g.slidingLayers, g.weights = layers, layers/2, weights
	return g
}

// geometryOf is the catalog's entry for a model: its Hugging Face id in any case (the Hub
// resolves ids so), or a local path whose last element names a catalog model
// ("/models/Qwen3-8B"), the usual way a downloaded copy is kept.
func geometryOf(model string) (geometry, bool) {
	local := strings.HasPrefix(model, "/") || strings.HasPrefix(model, "./")
	base := path.Base(strings.TrimSuffix(model, "/"))
	for id, g := range modelCatalog {
		if strings.EqualFold(id, model) || local && strings.EqualFold(id[strings.Index(id, "/")+1:], base) {
			return g, true
		}
	}
	return geometry{}, false
}

// derivedMaxLen is the context vLLM derives from config.json (_get_and_verify_max_len, kept to
// the keys these models have): max_position_embeddings, times rope_scaling's factor unless its
// type already counts it (llama3, su, longrope), yarn's from original_max_position_embeddings.
// repr is the number as Python prints it: a float when the factor was one.
func (g geometry) derivedMaxLen() (n int, repr string) {
	n = g.maxPosition
	switch g.rope.typ {
	case "", "llama3", "su", "longrope":
		return n, strconv.Itoa(n)
	case "yarn":
		n = g.rope.original
	}
	v := float64(n) * g.rope.factor
	if g.rope.float {
		return int(v), strconv.FormatFloat(v, 'f', 1, 64)
	}
	return int(v), strconv.Itoa(int(v))
}

// maxLenTooLong is vLLM's verdict on a user's --max-model-len above the derived context: msg
// and warning as _get_and_verify_max_len builds them (the warning is logged with msg when
// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, else both are the ValueError's text); ok: within it.
func (g geometry) maxLenTooLong(maxLen int) (msg, warning string, ok bool) {
	derived, repr := g.derivedMaxLen()
	if maxLen <= derived {
		return "", "", true
	}
	msg = fmt.Sprintf("User-specified max_model_len (%d) is greater than the derived max_model_len "+
		"(max_position_embeddings=%s or model_max_length=None in model's config.json).", maxLen, repr)
	warning = "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative " +
		"position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model uses " +
		"absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA array " +
		"out-of-bounds error."
	return msg, warning, false
}

// maxLenError is the ValueError's text for a --max-model-len vLLM refuses.
func maxLenError(msg, warning string) string {
	return msg + " To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. " + warning
}

// parallelError is ModelConfig.verify_with_parallel_config's refusal of a tensor-parallel size,
// "" when the heads divide evenly. (Its other refusal, pipeline parallelism for a model without
// SupportsPP, concerns none of the catalog's architectures.)
func (g geometry) parallelError(tp int) string {
	if g.heads%tp == 0 {
		return ""
	}
	return fmt.Sprintf("Total number of attention heads (%d) must be divisible by tensor parallel size (%d).", g.heads, tp)
}

// ppPartition is how vLLM spreads layers over pipeline stages (vllm/distributed/utils.py,
// get_pp_indices): evenly, the remainder one each to the stages before the last; uneven says
// vLLM logs the split. vLLM refuses no size: with more stages than layers some stages get none
// (a check was left out on purpose, vllm-project/vllm#6115).
func ppPartition(layers, pp int) (parts []int, uneven bool) {
	pp = max(pp, 1)
	parts = make([]int, pp)
	for i := range parts {
		parts[i] = layers / pp
	}
	rem := layers % pp
	for i := 2; i < rem+2; i++ {
		parts[pp-i]++
	}
	return parts, rem > 0
}

// joinInts is Python's ",".join(str(p) for p in parts).
func joinInts(parts []int) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

const (
	// kvBlockTokens is vLLM's default --block-size on CUDA: the cache is handed out in blocks.
	kvBlockTokens = 16
	// maxBatchedTokens is the chunked-prefill budget the fake logs (scheduler.py), which bounds
	// what a sliding-window layer holds at once.
	maxBatchedTokens = 2048
)

// kvLayerBytes is one layer's KV cache for one token on one GPU: K and V for the GPU's share
// of the KV heads (each GPU keeps one when there are fewer than TP ranks), or the MLA latent
// vector, whole on every rank; 2 bytes an element (the cache takes the model's bf16/fp16).
func (g geometry) kvLayerBytes(tp int) int64 {
	if g.mla > 0 {
		return int64(g.mla) * 2
	}
	hd := g.headDim
	if hd == 0 {
		hd = g.hidden / g.heads
	}
	return int64(2*max(1, g.kvHeads/tp)*hd) * 2
}

func cdiv(a, b int64) int64 { return (a + b - 1) / b }

// kvNeeded is what one request of maxLen tokens needs of a stage's cache with layers layers, as
// check_enough_kv_cache_memory adds it up: whole blocks of every full-attention layer, and of a
// sliding layer only its window plus one chunk (and one block for the window's misalignment).
func (g geometry) kvNeeded(tp, layers, maxLen int) int64 {
	sliding := 0
	if g.layers > 0 {
		sliding = layers * g.slidingLayers / g.layers
	}
	page := kvBlockTokens * g.kvLayerBytes(tp)
	need := int64(layers-sliding) * cdiv(int64(maxLen), kvBlockTokens) * page
	if sliding > 0 {
		window := int64(min(g.slidingWindow-1+maxBatchedTokens, maxLen))
		need += int64(sliding) * (cdiv(window, kvBlockTokens) + 1) * page
	}
	return need
}

// kvBlocks is how many blocks a stage's free memory makes: each block spans one layer of every
// KV cache group, and vLLM groups a hybrid model's layers by kind in groups of equal size.
func (g geometry) kvBlocks(tp, layers int, free int64) int64 {
	group := layers
	if g.slidingLayers > 0 {
		sliding := layers * g.slidingLayers / g.layers
		group = max(sliding, layers-sliding)
	}
	if group == 0 {
		return 0
	}
	return free / (int64(group) * kvBlockTokens * g.kvLayerBytes(tp))
}

// kvCache is an engine's KV cache as vLLM sizes it at start.
type kvCache struct {
	tokens int // GPU KV cache size in tokens: its blocks x the block size, the smallest stage's
	// short: a stage cannot hold one max_model_len request; needed is that stage's need, and
	// estimate the longest max_model_len it could hold (0: none).
	short    bool
	needed   int64
	estimate int
}

// kvCacheOf sizes the engine's cache from free bytes per GPU: by the catalog's geometry per
// pipeline stage, or, for a model it does not know, as one Llama-8B-like figure
// (kvBytesPerToken) spread over the tp x pp GPUs.
func kvCacheOf(g geometry, known bool, tp, pp, maxLen int, free int64) kvCache {
	if !known {
		world := int64(tp * pp)
		kv := kvCache{tokens: int(free * world / kvBytesPerToken), needed: int64(maxLen) * kvBytesPerToken / world}
		kv.short, kv.estimate = kv.tokens < maxLen, kv.tokens
		return kv
	}
	tp = max(tp, 1)
	parts, _ := ppPartition(g.layers, pp)
	kv := kvCache{tokens: -1}
	for _, layers := range parts {
		if layers == 0 {
			continue // a stage without layers keeps no cache
		}
		if t := int(g.kvBlocks(tp, layers, free) * kvBlockTokens); kv.tokens < 0 || t < kv.tokens {
			kv.tokens = t
		}
		if need := g.kvNeeded(tp, layers, maxLen); need > free && !kv.short {
			kv.short, kv.needed = true, need
			kv.estimate = g.longestFitting(tp, layers, maxLen, free)
		}
	}
	kv.tokens = max(kv.tokens, 0)
	return kv
}

// longestFitting is vLLM's estimate_max_model_len: the longest max_model_len below maxLen whose
// one request fits the free bytes (a binary search, as vLLM does it), 0 when none does.
func (g geometry) longestFitting(tp, layers, maxLen int, free int64) int {
	lo, hi, best := 1, maxLen, 0
	for lo <= hi {
		mid := (lo + hi) / 2
		if g.kvNeeded(tp, layers, mid) <= free {
			best, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// kvShortError is check_enough_kv_cache_memory's ValueError, "models's" included.
func kvShortError(maxLen int, kv kvCache, free int64) string {
	estimated := ""
	if kv.estimate > 0 {
		estimated = fmt.Sprintf("Based on the available memory, the estimated maximum model length is %d.", kv.estimate)
	}
	return fmt.Sprintf("ValueError: To serve at least one request with the models's max seq len (%d), "+
		"(%s GiB KV cache is needed, which is larger than the available KV cache memory (%s GiB). %s "+
		"Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
		maxLen, gibs(kv.needed), gibs(free), estimated)
}

// configFrames lead from `vllm serve` into the building of its config (vllm/engine/arg_utils.py,
// create_engine_config). Line numbers are v0.11.0's where a log of it shows them (api_server.py),
// else near them.
var configFrames = []string{
	`  File "` + pyLib + `/vllm/entrypoints/openai/api_server.py", line 1884, in run_server`,
	"    await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
	`  File "` + pyLib + `/vllm/entrypoints/openai/api_server.py", line 1902, in run_server_worker`,
	"    async with build_async_engine_client(",
	`  File "/usr/lib/python3.12/contextlib.py", line 210, in __aenter__`,
	"    return await anext(self.gen)",
	`  File "` + pyLib + `/vllm/entrypoints/openai/api_server.py", line 180, in build_async_engine_client`,
	"    async with build_async_engine_client_from_engine_args(",
	`  File "/usr/lib/python3.12/contextlib.py", line 210, in __aenter__`,
	"    return await anext(self.gen)",
	`  File "` + pyLib + `/vllm/entrypoints/openai/api_server.py", line 206, in build_async_engine_client_from_engine_args`,
	"    vllm_config = engine_args.create_engine_config(usage_context=usage_context)",
}

// failConfig ends the process on a ValueError raised while vLLM builds cls ("ModelConfig" or
// "VllmConfig"). Both are pydantic dataclasses, so the exception line is pydantic's
// ValidationError and vLLM's own text follows it, indented, as "Value error, <text> [...]".
func (s *Server) failConfig(cls, text string) {
	frames := append([]string(nil), configFrames...)
	input := "ArgsKwargs((), {'model_co...additional_config': {}})" // pydantic cuts the repr to 50 characters
	if cls == "ModelConfig" {
		input = "ArgsKwargs((), {'model': ...rocessor_plugin': None})"
		frames = append(frames,
			`  File "`+pyLib+`/vllm/engine/arg_utils.py", line 1142, in create_engine_config`,
			"    model_config = self.create_model_config()",
			`  File "`+pyLib+`/vllm/engine/arg_utils.py", line 994, in create_model_config`,
			"    return ModelConfig(")
	} else {
		frames = append(frames,
			`  File "`+pyLib+`/vllm/engine/arg_utils.py", line 1431, in create_engine_config`,
			"    config = VllmConfig(")
	}
	frames = append(frames,
		`  File "`+pyLib+`/pydantic/_internal/_dataclasses.py", line 123, in __init__`,
		"    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)")
	s.failPython(frames,
		"pydantic_core._pydantic_core.ValidationError: 1 validation error for "+cls,
		"  Value error, "+text+" [type=value_error, input_value="+input+", input_type=ArgsKwargs]",
		"    For further information visit https://errors.pydantic.dev/2.11/v/value_error")
}
