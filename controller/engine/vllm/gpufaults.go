// The GPU faults a crashed vLLM server's last words name: the lines torch, CUDA and vLLM print
// for a fault of the hardware or the driver, whose fix is on the node, not in the model's spec.

package vllm

import "strings"

// gpuFaults are the lines torch, CUDA and vLLM print for a fault of the hardware or the driver,
// lower-cased; each with what it means and what to do. An illegal memory access or CUDA out of
// memory are the software's or the spec's, and stay a crash loop.
var gpuFaults = []struct{ phrase, fault, advice string }{
	{"uncorrectable ecc error", "uncorrectable ECC error (faulty GPU memory)", "cordon the node and delete the pod so it runs elsewhere"},
	{"no cuda gpus are available", "the GPU is gone (lost from the bus or not handed to the container)", "cordon the node and delete the pod so it runs elsewhere"},
	{"no cuda-capable device is detected", "the GPU is gone (lost from the bus or not handed to the container)", "cordon the node and delete the pod so it runs elsewhere"},
	{"gpu has fallen off the bus", "the GPU fell off the bus", "cordon the node and delete the pod so it runs elsewhere"},
	{"unspecified launch failure", "the GPU failed mid-kernel (Xid)", "cordon the node and delete the pod so it runs elsewhere"},
	{"cuda driver version is insufficient", "the node's NVIDIA driver is older than the image's CUDA", "use an image built for the node's driver, or upgrade the driver"},
	{"nvidia driver on your system is too old", "the node's NVIDIA driver is older than the image's CUDA", "use an image built for the node's driver, or upgrade the driver"},
}

// GPUFault names the GPU fault a log line reports, with its advice; "" when it reports none.
func GPUFault(line string) (fault, advice string) {
	if line == "" {
		return "", ""
	}
	l := strings.ToLower(line)
	for _, f := range gpuFaults {
		if strings.Contains(l, f.phrase) {
			return f.fault, f.advice
		}
	}
	return "", ""
}
