// The fake vLLM's KV cache as vLLM v0.11's v1 engine keeps it: a pool of fixed-size blocks, and
// automatic prefix caching over it. Modelled (not copied) from
//   - vllm/v1/core/kv_cache_utils.py: a prompt is cut into blocks of block_size tokens; only full
//     blocks get a hash, and a block's hash covers its parent's hash, its own token ids and the
//     request's extra keys (the LoRA adapter), so equal blocks after different prefixes differ;
//     the first block's parent is NONE_HASH (random per process unless PYTHONHASHSEED is set);
//   - vllm/v1/core/block_pool.py: one queue of free blocks, never-used ones first; a freed block
//     goes to the queue's tail (a request's blocks in reverse order, so its last blocks are
//     reused first) and keeps its hash until it is handed out again, when its cache entry is
//     evicted (LRU among unreferenced blocks); a cache hit takes a free block back out of the
//     queue; block 0 is the null block, so num_gpu_blocks - 1 are usable, and the usage gauge
//     is 1 - free / usable;
//   - vllm/v1/core/kv_cache_manager.py (get_computed_blocks): the longest run of cached blocks
//     from the start, at most num_tokens - 1 tokens (the last token is always computed, for its
//     logits); each lookup adds the prompt's tokens to the queries and the hit blocks' tokens to
//     the hits (PrefixCacheStats in vllm/v1/metrics/stats.py), exported by loggers.py as
//     vllm:prefix_cache_queries and vllm:prefix_cache_hits.
//
// The fake tokenizer is whitespace: one token per word, its id a hash of the word, so the token
// counts are the ones the server always reported. Only prompt blocks are hashed (vLLM also
// hashes blocks of generated tokens; the fake generates the same words every time, so that would
// only produce hits no real client could make), and a block is hashed once its prefill is done,
// as vLLM caches blocks after the step that computed them.

package vllm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/example/inferenceservice-operator/test/localcluster/pyrepr"
)

// tokenize is the fake tokenizer: one token per whitespace-separated word, its id the word's
// 32-bit FNV-1a hash (deterministic across processes and pods).
func tokenize(text string) []uint32 {
	words := strings.Fields(text)
	ids := make([]uint32, len(words))
	for i, w := range words {
		h := fnv.New32a()
		_, _ = h.Write([]byte(w))
		ids[i] = h.Sum32()
	}
	return ids
}

// promptTokens are a completion request's prompt tokens: a string, a list of strings (read one
// after another), or token ids (a list, or lists, of integers, taken as they are).
func promptTokens(raw json.RawMessage) []uint32 {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return tokenize(str)
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var out []uint32
	for _, x := range list {
		var id uint32
		if json.Unmarshal(x, &id) == nil {
			out = append(out, id)
			continue
		}
		out = append(out, promptTokens(x)...)
	}
	return out
}

// contentText is a chat message's content: a string, or its parts' texts one after another.
func contentText(raw json.RawMessage) string {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return ""
	}
	parts := make([]string, 0, len(list))
	for _, x := range list {
		var part struct{ Text string }
		if json.Unmarshal(x, &part) == nil && part.Text != "" {
			parts = append(parts, part.Text)
		} else {
			parts = append(parts, contentText(x))
		}
	}
	return strings.Join(parts, " ")
}

// chatPrompt is the conversation as a ChatML template (Qwen's) renders it for the model, with
// the generation prompt: "<|im_start|>ROLE\nCONTENT\n<|im_end|>\n" per message, then
// "<|im_start|>assistant\n". Under the whitespace tokenizer each message costs two tokens
// beyond its words, and the prompt one more; a conversation that grows by turns keeps its
// earlier turns as a prefix.
func chatPrompt(msgs []chatMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "\n" + contentText(m.Content) + "\n<|im_end|>\n")
	}
	b.WriteString("<|im_start|>assistant\n")
	return b.String()
}

// kvBlock is one block of the KV cache.
type kvBlock struct {
	hash       uint64
	hashed     bool // full, computed and in the cache under hash
	refs       int  // requests holding it; 0: in the free queue
	prev, next *kvBlock
}

// blockPool is an engine's KV cache blocks and its prefix cache. Guarded by the engine's mutex.
// Blocks are made when first handed out, so an idle server holds none.
type blockPool struct {
	blockSize int
	usable    int // num_gpu_blocks - 1: block 0 is vLLM's null block
	fresh     int // never handed out: the head of the free queue
	// head and tail are the free queue's blocks that were handed out before, the least
	// recently freed first; nFree counts them.
	head, tail *kvBlock
	nFree      int
	cached     map[uint64]*kvBlock // made on first use
	caching    bool                // --enable-prefix-caching (vLLM v1's default)
	noneHash   uint64              // the parent hash of a prompt's first block
	overflow   int                 // blocks running requests hold beyond the pool
	// queries and hits are vLLM's prefix cache counters, in tokens.
	queries, hits uint64
}

// newBlockPool is a pool of numGPUBlocks blocks of blockSize tokens. pythonHashSeed is the
// process's PYTHONHASHSEED: vLLM derives NONE_HASH from it when it is set, else at random.
func newBlockPool(numGPUBlocks, blockSize int, caching bool, pythonHashSeed string) *blockPool {
	p := &blockPool{blockSize: max(blockSize, 1), usable: max(numGPUBlocks-1, 0), caching: caching}
	p.fresh = p.usable
	if pythonHashSeed != "" && pythonHashSeed != "random" {
		sum := sha256.Sum256([]byte(pythonHashSeed))
		p.noneHash = binary.BigEndian.Uint64(sum[:8])
	} else {
		p.noneHash = rand.Uint64()
	}
	return p
}

// blockHashes are the chained hashes of the prompt's full blocks: each covers its parent's
// hash, its token ids and the extra key (the LoRA adapter's name, "" for the base model).
func (p *blockPool) blockHashes(tokens []uint32, extra string) []uint64 {
	n := len(tokens) / p.blockSize
	out := make([]uint64, n)
	parent := p.noneHash
	buf := make([]byte, 8+4*p.blockSize, 8+4*p.blockSize+len(extra))
	for i := range n {
		binary.BigEndian.PutUint64(buf, parent)
		for j, t := range tokens[i*p.blockSize : (i+1)*p.blockSize] {
			binary.BigEndian.PutUint32(buf[8+4*j:], t)
		}
		sum := sha256.Sum256(append(buf, extra...))
		parent = binary.BigEndian.Uint64(sum[:8])
		out[i] = parent
	}
	return out
}

// kvSeq is the blocks one running request holds.
type kvSeq struct {
	blocks    []*kvBlock
	overflow  int      // blocks it needed beyond the pool
	hashes    []uint64 // its prompt's full blocks
	cached    int      // prompt tokens found in the cache
	committed int      // blocks of hashes already in the cache
}

// begin is a request being scheduled: the longest cached prefix of its prompt (at most all but
// its last token) is taken from the cache and counted; the rest of its total tokens (prompt and
// the tokens it may generate) gets fresh blocks, evicting the least recently freed.
func (p *blockPool) begin(tokens []uint32, extra string, total int) *kvSeq {
	seq := &kvSeq{}
	if p.caching {
		seq.hashes = p.blockHashes(tokens, extra)
		limit := 0
		if len(tokens) > 0 {
			limit = min((len(tokens)-1)/p.blockSize, len(seq.hashes))
		}
		for _, h := range seq.hashes[:limit] {
			b := p.cached[h]
			if b == nil {
				break
			}
			if b.refs == 0 {
				p.unlink(b)
			}
			b.refs++
			seq.blocks = append(seq.blocks, b)
		}
		seq.committed = len(seq.blocks)
		seq.cached = len(seq.blocks) * p.blockSize
		p.queries += uint64(len(tokens))
		p.hits += uint64(seq.cached)
	}
	need := (max(total, len(tokens))+p.blockSize-1)/p.blockSize - len(seq.blocks)
	for range max(need, 0) {
		if b := p.take(); b != nil {
			seq.blocks = append(seq.blocks, b)
		} else {
			seq.overflow++
		}
	}
	p.overflow += seq.overflow
	return seq
}

// commit caches the request's prompt blocks once they are computed. A block whose hash another
// request cached meanwhile stays out of the cache (vLLM keeps both; one is enough to hit).
func (p *blockPool) commit(seq *kvSeq) {
	for i := seq.committed; i < len(seq.hashes) && i < len(seq.blocks); i++ {
		h := seq.hashes[i]
		if _, dup := p.cached[h]; dup {
			continue
		}
		if p.cached == nil {
			p.cached = map[uint64]*kvBlock{}
		}
		b := seq.blocks[i]
		b.hash, b.hashed = h, true
		p.cached[h] = b
	}
	seq.committed = len(seq.hashes)
}

// free returns a finished request's blocks, last block first, to the free queue's tail.
func (p *blockPool) free(seq *kvSeq) {
	p.overflow -= seq.overflow
	for i := len(seq.blocks) - 1; i >= 0; i-- {
		b := seq.blocks[i]
		if b.refs--; b.refs == 0 {
			p.push(b)
		}
	}
	seq.blocks, seq.overflow = nil, 0
}

// take hands out the free queue's first block: a never-used one, else the least recently freed,
// whose cache entry is evicted. nil: every block is held.
func (p *blockPool) take() *kvBlock {
	if p.fresh > 0 {
		p.fresh--
		return &kvBlock{refs: 1}
	}
	b := p.head
	if b == nil {
		return nil
	}
	p.unlink(b)
	if b.hashed {
		if p.cached[b.hash] == b {
			delete(p.cached, b.hash)
		}
		b.hashed = false
	}
	b.refs = 1
	return b
}

func (p *blockPool) push(b *kvBlock) {
	b.prev, b.next = p.tail, nil
	if p.tail != nil {
		p.tail.next = b
	} else {
		p.head = b
	}
	p.tail = b
	p.nFree++
}

func (p *blockPool) unlink(b *kvBlock) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		p.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		p.tail = b.prev
	}
	b.prev, b.next = nil, nil
	p.nFree--
}

// usage is vllm:kv_cache_usage_perc: the share of usable blocks requests hold (cached blocks
// no request holds are free), 1 at most.
func (p *blockPool) usage() float64 {
	if p.usable <= 0 {
		return 0
	}
	held := p.usable - p.fresh - p.nFree + p.overflow
	return min(1, float64(max(held, 0))/float64(p.usable))
}

// hitRate is the "Prefix cache hit rate" of the periodic stats line (vLLM averages the last
// 1000 requests; the fake, all of them).
func (p *blockPool) hitRate() float64 {
	if p.queries == 0 {
		return 0
	}
	return float64(p.hits) / float64(p.queries)
}

// cacheConfigLabels are vllm:cache_config_info's labels: CacheConfig.metrics_info() (every field
// as Python's str() of it, in the dataclass's order) and engine, as loggers.py's
// log_metrics_info sets them. The endpoint picker reads block_size and num_gpu_blocks.
func cacheConfigLabels(blockSize, numGPUBlocks int, gpuUtil float64, caching bool, override int) string {
	overrideStr := "None"
	if override > 0 {
		overrideStr = strconv.Itoa(override)
	}
	kv := [][2]string{
		{"block_size", strconv.Itoa(blockSize)},
		{"gpu_memory_utilization", pyrepr.Float(gpuUtil)},
		{"swap_space", "4"},
		{"cache_dtype", "auto"},
		{"is_attention_free", "False"},
		{"num_gpu_blocks_override", overrideStr},
		{"sliding_window", "None"},
		{"enable_prefix_caching", pyBoolStr(caching)},
		{"prefix_caching_hash_algo", "sha256"},
		{"cpu_offload_gb", "0"},
		{"calculate_kv_scales", "False"},
		{"cpu_kvcache_space_bytes", "None"},
		{"mamba_page_size_padded", "None"},
		{"mamba_cache_dtype", "auto"},
		{"mamba_ssm_cache_dtype", "auto"},
		{"num_gpu_blocks", strconv.Itoa(numGPUBlocks)},
		{"num_cpu_blocks", "0"},
		{"kv_sharing_fast_prefill", "False"},
		{"kv_cache_memory_bytes", "None"},
		{"engine", "0"},
	}
	parts := make([]string, len(kv))
	for i, x := range kv {
		parts[i] = x[0] + "=" + strconv.Quote(x[1])
	}
	return strings.Join(parts, ",")
}
