// The fake SGLang's LoRA adapters: --lora-paths at start and POST /load_lora_adapter and
// /unload_lora_adapter at run time, with SGLang v0.5.3's checks and texts
// (managers/tokenizer_manager.py load_lora_adapter/unload_lora_adapter, lora/lora_registry.py,
// lora/lora_manager.py validate_new_adapter): LoRA must be enabled, a name loads once, an
// adapter's rank must fit --max-lora-rank once the memory pool exists, pinned adapters leave
// one slot, and beyond --max-loaded-loras the least recently used unpinned adapter goes.

package sglang

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
)

// adapter is one loaded adapter.
type adapter struct {
	name, path string
	pinned     bool
	used       time.Time // last registered or requested, for the LRU eviction
}

// loraRegistry is the tokenizer manager's LoRARegistry with the scheduler's LoRAManager.
type loraRegistry struct {
	mu       sync.Mutex
	enabled  bool
	maxRank  int // --max-lora-rank; 0: inferred from --lora-paths at start
	perBatch int
	maxLoad  int // --max-loaded-loras; 0: None
	adapters []*adapter
	pool     bool // the memory pool exists: runtime loads are checked against its shape
	// find is LoRAConfig reading the adapter's adapter_config.json: "" when it is there, else
	// the exception's text; nil: every adapter is found.
	find func(path string) string
}

func newLoRARegistry(a *serverArgs) *loraRegistry {
	r := &loraRegistry{enabled: a.enableLoRA, maxRank: a.maxLoRARank, perBatch: a.maxLoRAsPerBatch, maxLoad: a.maxLoadedLoRAs}
	if r.maxRank == 0 { // init_lora_shapes: the largest rank of the adapters given at start
		for _, p := range a.loraPaths {
			r.maxRank = max(r.maxRank, hfmodel.AdapterRank(p.Path))
		}
	}
	return r
}

// dictKeys is Python's repr of dict.keys().
func (r *loraRegistry) dictKeys() string {
	names := make([]string, len(r.adapters))
	for i, ad := range r.adapters {
		names[i] = "'" + ad.name + "'"
	}
	return "dict_keys([" + strings.Join(names, ", ") + "])"
}

// loaded is loaded_adapters: name to path.
func (r *loraRegistry) loaded() map[string]string {
	out := map[string]string{}
	for _, ad := range r.adapters {
		out[ad.name] = ad.path
	}
	return out
}

// loraResult is LoRAUpdateOutput as the endpoints answer it.
type loraResult struct {
	Success        bool              `json:"success"`
	ErrorMessage   *string           `json:"error_message"`
	LoadedAdapters map[string]string `json:"loaded_adapters"`
}

func failed(msg string) loraResult { return loraResult{ErrorMessage: &msg} }

// load registers an adapter; "" on success, else the error message. Start-up loads (before the
// pool exists) are not checked against the pool's rank.
func (r *loraRegistry) load(name, path string, pinned bool) string {
	res := r.loadResult(name, path, pinned, nil)
	if res.Success {
		return ""
	}
	return *res.ErrorMessage
}

// loadResult is load_lora_adapter's answer; evicted receives what the LRU eviction unloaded.
func (r *loraRegistry) loadResult(name, path string, pinned bool, evicted func(name string, n int)) loraResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.enabled {
		return failed("LoRA is not enabled. Please set `--enable-lora` to enable LoRA.")
	}
	// the backend's load_lora_adapter: validate_new_adapter, whose failure still lists the
	// adapters loaded
	fail := func(msg string) loraResult {
		res := failed(msg)
		res.LoadedAdapters = r.loaded()
		return res
	}
	if r.find != nil {
		if msg := r.find(path); msg != "" {
			return fail(msg)
		}
	}
	for _, ad := range r.adapters {
		if ad.name == name {
			return fail(fmt.Sprintf("Failed to load LoRA adapter %s because it is already loaded", name))
		}
	}
	if rank := hfmodel.AdapterRank(path); r.pool && rank > r.maxRank {
		return fail(fmt.Sprintf("LoRA adapter %s with rank %d is incompatible with the current LoRA memory pool configuration. "+
			"Please ensure that the LoRA adapter's rank is within the configured `--max-lora-rank` and that the target modules are "+
			"included in `--lora-target-modules`.", name, rank))
	}
	if pinned {
		n := 0
		for _, ad := range r.adapters {
			if ad.pinned {
				n++
			}
		}
		if n >= r.perBatch-1 {
			return fail(fmt.Sprintf("Failed to load LoRA adapter %s as a pinned adapter. It is not allowed to pin all slots "+
				"in the LoRA memory pool to avoid starvation for unpinned adapters and base models. Please increase your "+
				"`--max-loras-per-batch` or load it as unpinned LoRA adapters.", name))
		}
	}
	r.adapters = append(r.adapters, &adapter{name: name, path: path, pinned: pinned, used: time.Now()})
	for r.maxLoad > 0 && len(r.adapters) > r.maxLoad {
		victim := -1
		for i, ad := range r.adapters {
			if !ad.pinned && (victim < 0 || ad.used.Before(r.adapters[victim].used)) {
				victim = i
			}
		}
		if victim < 0 {
			return failed(fmt.Sprintf("Didn't find any LoRA adapters when trying to evict LRU LoRA adapter. LoRA registry is: %s", r.dictKeys()))
		}
		if evicted != nil {
			evicted(r.adapters[victim].name, len(r.adapters))
		}
		r.adapters = append(r.adapters[:victim], r.adapters[victim+1:]...)
	}
	empty := ""
	return loraResult{Success: true, ErrorMessage: &empty, LoadedAdapters: r.loaded()}
}

// unload is unload_lora_adapter's answer.
func (r *loraRegistry) unload(name string) loraResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.enabled {
		return failed("LoRA is not enabled. Please set `--enable-lora` to enable LoRA.")
	}
	for i, ad := range r.adapters {
		if ad.name == name {
			r.adapters = append(r.adapters[:i], r.adapters[i+1:]...)
			empty := ""
			return loraResult{Success: true, ErrorMessage: &empty, LoadedAdapters: r.loaded()}
		}
	}
	return failed(fmt.Sprintf("LoRA with name %s does not exist. Loaded LoRAs: %s", name, r.dictKeys()))
}

// acquire is a request naming an adapter: "" when it is loaded (its use counts for the LRU),
// else SGLang's refusal.
func (r *loraRegistry) acquire(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ad := range r.adapters {
		if ad.name == name {
			ad.used = time.Now()
			return ""
		}
	}
	return fmt.Sprintf("The following requested LoRA adapters are not loaded: {'%s'}\nLoaded adapters: %s", name, r.dictKeys())
}

// list is the adapters in load order, for /v1/models.
func (r *loraRegistry) list() []adapter {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]adapter, len(r.adapters))
	for i, ad := range r.adapters {
		out[i] = *ad
	}
	return out
}
