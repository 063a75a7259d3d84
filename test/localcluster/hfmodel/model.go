// What the fake model servers know about a model from its name alone: its size, whether
// Hugging Face gates it, and the architecture it resolves to, for models not in the catalog.

package hfmodel

import (
	"path"
	"regexp"
	"strconv"
	"strings"
)

const (
	// GiB is a gibibyte.
	GiB = int64(1) << 30
	// bytesPerParam is bf16, the engines' default dtype for today's checkpoints.
	bytesPerParam = 2
)

// knownParams sizes models whose id does not carry their size.
var knownParams = map[string]float64{
	"deepseek-v3": 671e9, "deepseek-r1": 671e9, "kimi-k2": 1e12, "gpt2": 124e6,
	"phi-2": 2.7e9, "phi-4": 14e9,
}

var (
	moeSize   = regexp.MustCompile(`(?i)(?:^|[-_/.])(\d+)x(\d+(?:\.\d+)?)b(?:$|[-_.])`)
	plainSize = regexp.MustCompile(`(?i)(?:^|[-_/.])(\d+(?:\.\d+)?)([bm])(?:$|[-_.])`)
)

// Params is a model's parameter count from its id or path: "Llama-3.1-8B" 8e9,
// "Qwen2.5-0.5B" 0.5e9, "Mixtral-8x7B" 56e9, "opt-125m" 125e6, a few by name (DeepSeek-V3
// 671e9), anything else 1e9.
func Params(model string) float64 {
	name := strings.ToLower(model[strings.LastIndex(model, "/")+1:])
	for k, v := range knownParams {
		if strings.HasPrefix(name, k) {
			return v
		}
	}
	if m := moeSize.FindStringSubmatch(name); m != nil {
		n, _ := strconv.ParseFloat(m[1], 64)
		x, _ := strconv.ParseFloat(m[2], 64)
		return n * x * 1e9
	}
	if m := plainSize.FindStringSubmatch(name); m != nil {
		x, _ := strconv.ParseFloat(m[1], 64)
		if strings.EqualFold(m[2], "m") {
			return x * 1e6
		}
		return x * 1e9
	}
	return 1e9
}

// fp8Checkpoints are models published in FP8 (one byte a parameter): DeepSeek-V3/R1's 671B
// take about 700 GB, which is what fits 16 H100s.
var fp8Checkpoints = []string{"deepseek-v3", "deepseek-r1", "kimi-k2"}

// WeightBytes is what the weights take on the GPUs: the catalog's figure, else bf16 from the
// name's size, or FP8 for the models published so.
func WeightBytes(model string) int64 {
	if g, ok := Lookup(model); ok {
		return g.Weights
	}
	name := strings.ToLower(model[strings.LastIndex(model, "/")+1:])
	for _, p := range fp8Checkpoints {
		if strings.HasPrefix(name, p) {
			return int64(Params(model))
		}
	}
	return int64(Params(model) * bytesPerParam)
}

// Gated: Hugging Face refuses these without a token. The fake gates meta-llama/*,
// google/gemma* and any id containing "gated".
func Gated(id string) bool {
	l := strings.ToLower(id)
	return strings.HasPrefix(l, "meta-llama/") || strings.HasPrefix(l, "google/gemma") ||
		strings.Contains(l, "gated")
}

// Architecture is the class the engine resolves from the model's config.json: the catalog's, else a
// guess from the name.
func Architecture(model string) string {
	if g, ok := Lookup(model); ok {
		return g.Arch
	}
	l := strings.ToLower(model)
	for _, a := range []struct{ key, arch string }{
		{"mixtral", "MixtralForCausalLM"}, {"mistral", "MistralForCausalLM"},
		{"qwen3", "Qwen3ForCausalLM"}, {"qwen", "Qwen2ForCausalLM"}, {"gemma", "Gemma3ForCausalLM"},
		{"deepseek", "DeepseekV3ForCausalLM"}, {"phi", "Phi3ForCausalLM"}, {"opt", "OPTForCausalLM"},
		{"gpt2", "GPT2LMHeadModel"},
	} {
		if strings.Contains(l, a.key) {
			return a.arch
		}
	}
	return "LlamaForCausalLM"
}

// MountFor is the mount whose path holds p (the longest one), and whether there is one.
func MountFor(mounts map[string]string, p string) (path, identity string, ok bool) {
	for mp, id := range mounts {
		mp2 := strings.TrimSuffix(mp, "/")
		if (p == mp2 || strings.HasPrefix(p, mp2+"/")) && len(mp2) >= len(path) {
			path, identity, ok = mp2, id, true
		}
	}
	return path, identity, ok
}

// RepoID says whether s is a Hugging Face repo id an engine would download ("org/name" or
// "name"), rather than a local path.
func RepoID(s string) bool {
	if s == "" || strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") || strings.Count(s, "/") > 1 {
		return false
	}
	for _, c := range s {
		if !(c == '/' || c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// peftDefaultRank is PEFT's LoraConfig default r, the rank of an adapter trained without one.
const peftDefaultRank = 8

// rankInName is how the local hub says an adapter's rank: a name ending in -r64 or -rank64
// (org/sql-lora-r64, /models/chat-rank32) was trained with r=64 or 32.
var rankInName = regexp.MustCompile(`-(?:r|rank)([0-9]+)$`)

// AdapterRank is the rank of the adapter at a Hugging Face repository id or a path: the one
// its name states, else PEFT's default.
func AdapterRank(repoOrPath string) int {
	if m := rankInName.FindStringSubmatch(path.Base(repoOrPath)); m != nil {
		if r, err := strconv.Atoi(m[1]); err == nil && r > 0 {
			return r
		}
	}
	return peftDefaultRank
}
