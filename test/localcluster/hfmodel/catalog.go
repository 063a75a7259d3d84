// Package hfmodel is what the fake model servers (vllm/, sglang/) know of a Hugging Face model
// without its weights, whichever engine loads it: its config.json's shape (the catalog, this
// file), its size from its name, whether the Hub gates it (model.go), and what the kubelet's
// volumes already hold of it (cache.go). Each engine's fake makes its own checks on it.
package hfmodel

import (
	"path"
	"strings"
)

// Geometry is a model's config.json as an engine's start-up reads it. A model not in the
// catalog keeps the guesses model.go makes from its name and skips the engines' checks on it.
type Geometry struct {
	Arch                   string // architectures[0], as the engines resolve it
	Heads, KVHeads, Layers int    // num_attention_heads, num_key_value_heads, num_hidden_layers
	Hidden                 int    // hidden_size
	HeadDim                int    // head_dim; 0: hidden_size / num_attention_heads, as the engines derive it
	MaxPosition            int    // max_position_embeddings
	Rope                   RopeScaling
	// MLA is kv_lora_rank + qk_rope_head_dim for DeepSeek's multi-head latent attention: the KV
	// cache keeps one latent vector of that size per token and layer, whole on every TP rank.
	MLA int
	// SlidingLayers of the layers attend only to the last SlidingWindow tokens (gpt-oss: every
	// other layer, 128), so one request needs little of their cache.
	SlidingLayers, SlidingWindow int
	Weights                      int64  // bytes the weights take on the GPUs: parameters x bytes of their dtype
	Dtype                        string // the dtype the engine computes and caches in ("torch.bfloat16")
	Quant                        string // quantization_config.quant_method; "": none
	Source                       string // where the numbers come from
}

// RopeScaling is config.json's rope_scaling, as far as an engine derives the context from it.
type RopeScaling struct {
	Type   string // rope_type ("type" in older configs); "": no rope_scaling
	Factor float64
	// Float: the JSON spells the factor with a point (32.0), so Python's product is a float and
	// an error prints the derived length as one (131072.0).
	Float    bool
	Original int // original_max_position_embeddings, yarn's base
}

// bf16 is the bytes of params parameters in bfloat16 (or float16).
func bf16(params float64) int64 { return int64(params * 2) }

// Builders for the families below; the fields they leave out are zero for the family.
func qwen3(heads, kv, layers, hidden int, weights int64, source string) Geometry {
	return Geometry{Arch: "Qwen3ForCausalLM", Heads: heads, KVHeads: kv, Layers: layers, Hidden: hidden, HeadDim: 128,
		MaxPosition: 40960, Weights: weights, Dtype: "torch.bfloat16", Source: source}
}

// moe is the Qwen3 mixture-of-experts variant: the same attention, experts in place of the MLP.
func moe(g Geometry) Geometry {
	g.Arch = "Qwen3MoeForCausalLM"
	return g
}

// llama is Llama 3.1-3.3: 131072 positions, already scaled by the llama3 rope type, so vLLM
// takes them as they are.
func llama(heads, kv, layers, hidden, headDim int, weights int64, source string) Geometry {
	return Geometry{Arch: "LlamaForCausalLM", Heads: heads, KVHeads: kv, Layers: layers, Hidden: hidden, HeadDim: headDim,
		MaxPosition: 131072, Rope: RopeScaling{Type: "llama3", Original: 8192},
		Weights: weights, Dtype: "torch.bfloat16", Source: source}
}

const (
	srcLLMProf  = "config.json, as copied in citsjtu2020/LLM-Prof sglang/Model_Config.md"
	srcCard     = "from the model card (Hugging Face page), not a config.json copy"
	srcDeepSeek = "config.json of deepseek-ai/DeepSeek-R1 (V3's architecture), as dumped in a public model-config note"
	srcGptOss   = "config.json of openai/gpt-oss-20b via ParagEkbote/hf-model-inspector; 120b's depth from the model card"
)

var (
	deepseekV3 = Geometry{Arch: "DeepseekV3ForCausalLM", Heads: 128, KVHeads: 128, Layers: 61, Hidden: 7168,
		MaxPosition: 163840, Rope: RopeScaling{Type: "yarn", Factor: 40, Original: 4096}, MLA: 512 + 64,
		// 671B main-model parameters in FP8 (1 byte), embeddings, head and norms in bf16 and the
		// FP32 block scales: about 675 GB (an estimate). The Hub's ~689 GB also holds the 11.5B
		// MTP module, which vLLM does not load unless speculative decoding asks for it.
		Weights: 675e9, Dtype: "torch.bfloat16", Quant: "fp8", Source: srcDeepSeek}
	gptOss = Geometry{Arch: "GptOssForCausalLM", Heads: 64, KVHeads: 8, Hidden: 2880, HeadDim: 64,
		MaxPosition: 131072, Rope: RopeScaling{Type: "yarn", Factor: 32, Float: true, Original: 4096},
		SlidingWindow: 128, Dtype: "torch.bfloat16", Quant: "mxfp4", Source: srcGptOss}
	mixtral8x7B = Geometry{Arch: "MixtralForCausalLM", Heads: 32, KVHeads: 8, Layers: 32, Hidden: 4096,
		MaxPosition: 32768, Weights: bf16(46.70e9), Dtype: "torch.bfloat16",
		Source: "config.json of mistralai/Mixtral-8x7B-v0.1 (public copies in code search)"}
	mixtral8x22B = Geometry{Arch: "MixtralForCausalLM", Heads: 48, KVHeads: 8, Layers: 56, Hidden: 6144,
		MaxPosition: 65536, Weights: bf16(140.6e9), Dtype: "torch.bfloat16", Source: srcCard + "; 65536 from a Cerebras config of it"}
	llama8B   = llama(32, 8, 32, 4096, 128, bf16(8.03e9), srcLLMProf)
	llama70B  = llama(64, 8, 80, 8192, 128, bf16(70.55e9), "vulkomilev/oumi configs/recipes/llama3_1/README.md (from config.json)")
	llama405B = llama(128, 8, 126, 16384, 128, bf16(405.85e9), srcCard)
	llama1B   = llama(32, 8, 16, 2048, 64, bf16(1.24e9), srcCard)
	llama3B   = llama(24, 8, 28, 3072, 128, bf16(3.21e9), srcLLMProf)
)

// catalog is every model the tests, samples and README name, and the popular ones around
// them, keyed by Hugging Face id as the Hub spells it. Weights are what an engine loads onto the GPUs:
// parameters x 2 bytes for bf16 checkpoints, the checkpoint's own bytes for FP8 (DeepSeek) and
// MXFP4 (gpt-oss, whose experts are 4-bit and the rest bf16).
var catalog = map[string]Geometry{
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
	"Qwen/Qwen2.5-0.5B-Instruct": {Arch: "Qwen2ForCausalLM", Heads: 14, KVHeads: 2, Layers: 24, Hidden: 896, MaxPosition: 32768,
		Weights: bf16(0.494e9), Dtype: "torch.bfloat16", Source: "config.json of Qwen/Qwen2.5-0.5B (public dump) and the Instruct model card"},
	// config.json says 32768; the model card's 131,072 needs a YaRN rope_scaling the user adds.
	"Qwen/Qwen2.5-72B-Instruct": {Arch: "Qwen2ForCausalLM", Heads: 64, KVHeads: 8, Layers: 80, Hidden: 8192, MaxPosition: 32768,
		Weights: bf16(72.71e9), Dtype: "torch.bfloat16", Source: srcCard + "; context as vLLM reports it (max_position_embeddings=32768)"},

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

	"facebook/opt-125m": {Arch: "OPTForCausalLM", Heads: 12, KVHeads: 12, Layers: 12, Hidden: 768, MaxPosition: 2048,
		Weights: bf16(125.2e6), Dtype: "torch.float16", Source: srcCard + " (config.json's torch_dtype float16)"},
}

// withDepth is gpt-oss at one size: every other layer slides.
func withDepth(g Geometry, layers int, weights int64) Geometry {
	g.Layers, g.SlidingLayers, g.Weights = layers, layers/2, weights
	return g
}

// Lookup is the catalog's entry for a model: its Hugging Face id in any case (the Hub
// resolves ids so), or a local path whose last element names a catalog model
// ("/models/Qwen3-8B"), the usual way a downloaded copy is kept.
func Lookup(model string) (Geometry, bool) {
	local := strings.HasPrefix(model, "/") || strings.HasPrefix(model, "./")
	base := path.Base(strings.TrimSuffix(model, "/"))
	for id, g := range catalog {
		if strings.EqualFold(id, model) || local && strings.EqualFold(id[strings.Index(id, "/")+1:], base) {
			return g, true
		}
	}
	return Geometry{}, false
}
