// Parallelism vLLM refuses: a crashed run whose decisive line is vLLM's check of the model's
// shape against the GPU split (attention heads not divisible by the tensor-parallel size) is the
// spec's GPU count, not a crash to wait out: named, with the split that works.

package reconcile

// ReasonParallelismRefused: vLLM refuses to split the model over the replica's GPUs.
const ReasonParallelismRefused = "ParallelismRefused"

// RankParallelism ranks the refusal with the other causes a crash log names.
const RankParallelism = RankGPU
