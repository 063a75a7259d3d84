// The LoRA adapters of the local world's hub, as far as vLLM's loader looks at them: the rank
// in their adapter_config.json, checked against --max-lora-rank as vLLM's PEFTHelper does.

package vllm

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
)

// peftDefaultRank is PEFT's LoraConfig default r, the rank of an adapter trained without one.
const peftDefaultRank = 8

// rankInName is how the local hub says an adapter's rank: a name ending in -r64 or -rank64
// (org/sql-lora-r64, /models/chat-rank32) was trained with r=64 or 32.
var rankInName = regexp.MustCompile(`-(?:r|rank)([0-9]+)$`)

// adapterRank is the rank of the adapter at a Hugging Face repository id or a path: the one
// its name states, else PEFT's default.
func adapterRank(repoOrPath string) int {
	if m := rankInName.FindStringSubmatch(path.Base(repoOrPath)); m != nil {
		if r, err := strconv.Atoi(m[1]); err == nil && r > 0 {
			return r
		}
	}
	return peftDefaultRank
}

// loraRankError is what a load of an adapter of rank r answers when the server was started
// with a smaller --max-lora-rank: PEFTHelper.validate_legal's ValueError, raised in the worker
// and carried back by the engine core as "Call to add_lora method failed: ..."
// (v1/engine/core.py); under the mp executor (several GPUs in one pod) the worker's error is
// wrapped once more by MultiprocExecutor.collective_rpc. "" when the rank fits.
func (a *serveArgs) loraRankError(r int) string {
	if r <= a.maxLoRARank {
		return ""
	}
	msg := fmt.Sprintf("LoRA rank %d is greater than max_lora_rank %d.", r, a.maxLoRARank)
	if a.tp*a.pp > 1 && a.backend != "ray" {
		msg = fmt.Sprintf("Worker failed with error '%s', please check the stack trace above for the root cause", msg)
	}
	return "Call to add_lora method failed: " + msg
}
