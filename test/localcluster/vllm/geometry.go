// The shape of the models the fake vLLM knows by name (package hfmodel's catalog: each entry is
// the model's config.json as published, attention and KV heads, layers, context, and the bytes
// its weights take on the GPUs), and vLLM v0.11's start-up checks on it. A model not in the
// catalog keeps the guesses hfmodel makes from its name and skips these checks, as before.
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
	"strconv"
	"strings"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
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

// geometryOf is the catalog's entry for a model (hfmodel.Lookup), as vLLM's checks read it.
func geometryOf(model string) (geometry, bool) {
	h, ok := hfmodel.Lookup(model)
	if !ok {
		return geometry{}, false
	}
	return geometry{arch: h.Arch, heads: h.Heads, kvHeads: h.KVHeads, layers: h.Layers, hidden: h.Hidden,
		headDim: h.HeadDim, maxPosition: h.MaxPosition,
		rope: ropeScaling{typ: h.Rope.Type, factor: h.Rope.Factor, float: h.Rope.Float, original: h.Rope.Original},
		mla:  h.MLA, slidingLayers: h.SlidingLayers, slidingWindow: h.SlidingWindow, weights: h.Weights,
		dtype: h.Dtype, quant: h.Quant, source: h.Source}, true
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
