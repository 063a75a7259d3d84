// The LoRA adapters of the local world's hub, as far as vLLM's loader looks at them: the rank
// in their adapter_config.json (hfmodel.AdapterRank), checked against --max-lora-rank as
// vLLM's PEFTHelper does.

package vllm

import "fmt"

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
