// What the fake vLLM knows about a model without any weights beyond package hfmodel's (the
// catalog, the size from its name, the gated repos, the volumes' weights cache): its shards,
// its KV cache entry and the context vLLM derives.

package vllm

import (
	"strconv"
	"strings"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
)

const (
	gib = hfmodel.GiB
	// shardBytes is the size of one safetensors shard, as Hugging Face checkpoints split.
	shardBytes = 5 * gib
	// kvBytesPerToken is a Llama-8B-like KV cache entry (32 layers x 8 KV heads x 128 x 2 x
	// bf16); one figure for all models keeps the model simple.
	kvBytesPerToken = 128 << 10
	// hostBaseBytes is the host memory a vLLM process takes before it reads weights
	// (python, torch, CUDA context).
	hostBaseBytes = 2 * gib
)

// shards is how many safetensors files the checkpoint has.
func shards(weights int64) int { return int(max(1, (weights+shardBytes-1)/shardBytes)) }

// defaultMaxModelLen is the context vLLM derives from the model's config: the catalog's, else
// a guess from the name.
func defaultMaxModelLen(model string) int {
	if g, ok := geometryOf(model); ok {
		n, _ := g.derivedMaxLen()
		return n
	}
	l := strings.ToLower(model)
	switch {
	case strings.Contains(l, "llama-3.1"), strings.Contains(l, "llama-3.2"), strings.Contains(l, "llama-3.3"):
		return 131072
	case strings.Contains(l, "qwen3"), strings.Contains(l, "qwen2.5"), strings.Contains(l, "mistral"):
		return 32768
	case strings.Contains(l, "opt-"):
		return 2048
	}
	return 8192
}

// gibs formats bytes as vLLM prints GiB.
func gibs(b int64) string { return strconv.FormatFloat(float64(b)/float64(gib), 'f', 2, 64) }
