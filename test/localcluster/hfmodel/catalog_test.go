package hfmodel

import (
	"strings"
	"testing"
)

// TestGeometryCatalog: every entry is a whole config, and every model id the project's tests,
// samples and README name is in the catalog.
func TestGeometryCatalog(t *testing.T) {
	for id, g := range catalog {
		if strings.Count(id, "/") != 1 || g.Arch == "" || g.Dtype == "" || g.Source == "" || g.Weights <= 0 ||
			g.Layers <= 0 || g.MaxPosition <= 0 || g.KVHeads <= 0 || g.Heads%g.KVHeads != 0 {
			t.Errorf("%s: incomplete or inconsistent entry %+v", id, g)
		}
	}
	for _, id := range []string{"Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "Qwen/Qwen2.5-0.5B-Instruct",
		"Qwen/Qwen2.5-72B-Instruct", "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct",
		"meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct", "deepseek-ai/DeepSeek-V3",
		"facebook/opt-125m", "mistralai/Mixtral-8x7B-v0.1"} {
		if _, ok := catalog[id]; !ok {
			t.Errorf("%s is used in the repository but not in the catalog", id)
		}
	}
}
