// GPU errors in the walk: a crashed run whose decisive log line is the GPU's or the driver's
// (ECC, a GPU lost from the bus, a driver older than the image's CUDA) is reported with the node
// it ran on, since the fix is on the node, not in the model's spec.

package reconcile

// ReasonGPUError: the model's container dies of a GPU fault on its node.
const ReasonGPUError = "GPUError"

// RankGPU ranks a GPU fault before the crash it causes and before an OOM kill.
const RankGPU = 43
