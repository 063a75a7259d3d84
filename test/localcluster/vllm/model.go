// What the fake vLLM knows about a model without any weights: its shape from the catalog
// (geometry.go) or else its size from its name, whether Hugging Face gates it, and a
// weights cache shared by the servers of one kubelet.

package vllm

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
)

const (
	gib = int64(1) << 30
	// bytesPerParam is bf16, vLLM's default dtype for today's checkpoints.
	bytesPerParam = 2
	// shardBytes is the size of one safetensors shard, as Hugging Face checkpoints split.
	shardBytes = 5 * gib
	// kvBytesPerToken is a Llama-8B-like KV cache entry (32 layers x 8 KV heads x 128 x 2 x
	// bf16); one figure for all models keeps the model simple.
	kvBytesPerToken = 128 << 10
	// hostBaseBytes is the host memory a vLLM process takes before it reads weights
	// (python, torch, CUDA context).
	hostBaseBytes = 2 * gib
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

// modelParams is a model's parameter count from its id or path: "Llama-3.1-8B" 8e9,
// "Qwen2.5-0.5B" 0.5e9, "Mixtral-8x7B" 56e9, "opt-125m" 125e6, a few by name (DeepSeek-V3
// 671e9), anything else 1e9.
func modelParams(model string) float64 {
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

// weightBytes is what the weights take on the GPUs: the catalog's figure, else bf16 from the
// name's size, or FP8 for the models published so.
func weightBytes(model string) int64 {
	if g, ok := geometryOf(model); ok {
		return g.weights
	}
	name := strings.ToLower(model[strings.LastIndex(model, "/")+1:])
	for _, p := range fp8Checkpoints {
		if strings.HasPrefix(name, p) {
			return int64(modelParams(model))
		}
	}
	return int64(modelParams(model) * bytesPerParam)
}

// shards is how many safetensors files the checkpoint has.
func shards(weights int64) int { return int(max(1, (weights+shardBytes-1)/shardBytes)) }

// gatedModel: Hugging Face refuses these without a token. The fake gates meta-llama/*,
// google/gemma* and any id containing "gated".
func gatedModel(id string) bool {
	l := strings.ToLower(id)
	return strings.HasPrefix(l, "meta-llama/") || strings.HasPrefix(l, "google/gemma") ||
		strings.Contains(l, "gated")
}

// hfRepoID says whether s is a Hugging Face repo id vLLM would download ("org/name" or
// "name"), rather than a local path.
func hfRepoID(s string) bool {
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

// architecture is the class vLLM resolves from the model's config.json: the catalog's, else a
// guess from the name.
func architecture(model string) string {
	if g, ok := geometryOf(model); ok {
		return g.arch
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

// mountFor is the mount whose path holds p (the longest one), and whether there is one.
func mountFor(mounts map[string]string, p string) (path, identity string, ok bool) {
	for mp, id := range mounts {
		mp2 := strings.TrimSuffix(mp, "/")
		if (p == mp2 || strings.HasPrefix(p, mp2+"/")) && len(mp2) >= len(path) {
			path, identity, ok = mp2, id, true
		}
	}
	return path, identity, ok
}

// WeightsCache is what each volume already holds: the Hugging Face cache of every model
// downloaded onto it. It lives as long as the kubelet, so a PVC or an emptyDir keeps its
// weights across container restarts exactly as far as its identity says. A nil cache
// holds nothing (every start downloads).
type WeightsCache struct {
	mu   sync.Mutex
	held map[string]bool // volume identity + "\x00" + model id
	// partial are the bytes an interrupted `hf download` left (its .incomplete blobs), which
	// the next one resumes from (hf_download.go).
	partial map[string]int64
	// bytes are what each held repo takes on its volume (0 when not known), so a volume's
	// capacity bounds the next download onto it.
	bytes map[string]int64
}

// NewWeightsCache is the cache one kubelet's servers share.
func NewWeightsCache() *WeightsCache {
	return &WeightsCache{held: map[string]bool{}, partial: map[string]int64{}, bytes: map[string]int64{}}
}

// resumeFrom is what an interrupted download of model left on volume.
func (c *WeightsCache) resumeFrom(volume, model string) int64 {
	if c == nil || volume == "" {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.partial[volume+"\x00"+model]
}

// interrupted records the bytes a stopped download of model left on volume.
func (c *WeightsCache) interrupted(volume, model string, n int64) {
	if c == nil || volume == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial[volume+"\x00"+model] = n
}

func (c *WeightsCache) has(volume, model string) bool {
	if c == nil || volume == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[volume+"\x00"+model]
}

// hasDirs reports whether a fill copied a directory of weights onto volume (an s3:// fill,
// held as "dir:" and its path on the volume): what else is on it is then known.
func (c *WeightsCache) hasDirs(volume string) bool {
	if c == nil || volume == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.held {
		if strings.HasPrefix(k, volume+"\x00dir:") {
			return true
		}
	}
	return false
}

func (c *WeightsCache) put(volume, model string) { c.store(volume, model, 0) }

// store records model held on volume, taking n bytes there.
func (c *WeightsCache) store(volume, model string, n int64) {
	if c == nil || volume == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held[volume+"\x00"+model] = true
	c.bytes[volume+"\x00"+model] = n
	delete(c.partial, volume+"\x00"+model)
}

// usedBy is what the other repos on volume take there, held or partial.
func (c *WeightsCache) usedBy(volume, except string) int64 {
	if c == nil || volume == "" {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, m := range []map[string]int64{c.bytes, c.partial} {
		for k, v := range m {
			if strings.HasPrefix(k, volume+"\x00") && k != volume+"\x00"+except {
				n += v
			}
		}
	}
	return n
}

// forget drops every model held on a volume (the volume was deleted).
func (c *WeightsCache) forget(volume string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.held {
		if strings.HasPrefix(k, volume+"\x00") {
			delete(c.held, k)
		}
	}
	for k := range c.partial {
		if strings.HasPrefix(k, volume+"\x00") {
			delete(c.partial, k)
		}
	}
	for k := range c.bytes {
		if strings.HasPrefix(k, volume+"\x00") {
			delete(c.bytes, k)
		}
	}
}

// ForgetPrefix drops every model held on the volumes whose identity starts with prefix (a
// deleted pod's emptyDirs).
func (c *WeightsCache) ForgetPrefix(prefix string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.held {
		if strings.HasPrefix(k, prefix) {
			delete(c.held, k)
		}
	}
	for k := range c.partial {
		if strings.HasPrefix(k, prefix) {
			delete(c.partial, k)
		}
	}
	for k := range c.bytes {
		if strings.HasPrefix(k, prefix) {
			delete(c.bytes, k)
		}
	}
}

// gibs formats bytes as vLLM prints GiB.
func gibs(b int64) string { return strconv.FormatFloat(float64(b)/float64(gib), 'f', 2, 64) }
