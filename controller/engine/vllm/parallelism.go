// Parallelism vLLM refuses: its check of the model's shape against the GPU split (attention
// heads not divisible by the tensor-parallel size), read from a crashed run's last words, with
// the split that works.

package vllm

import (
	"fmt"
	"regexp"
	"strconv"
)

// headsRefusal is vllm/config/model.py's verify_with_parallel_config.
var headsRefusal = regexp.MustCompile(`Total number of attention heads \((\d+)\) must be divisible by tensor parallel size \((\d+)\)`)

// ParallelismRefusal is the finding's message for a decisive line that refuses the split; ""
// when it is not one. The advice is vLLM's for a GPU count the heads do not divide: tensor
// parallel over a divisor of the heads, pipeline parallel over the rest.
func ParallelismRefusal(line string) string {
	m := headsRefusal.FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	heads, _ := strconv.Atoi(m[1])
	tp, _ := strconv.Atoi(m[2])
	msg := fmt.Sprintf("vLLM refuses tensor parallel size %d: the model has %d attention heads", tp, heads)
	if t, p, ok := evenSplit(heads, tp); ok {
		return msg + fmt.Sprintf("; split the %d GPUs as spec.parallelism {tensorParallelSize: %d, pipelineParallelSize: %d}, or use a GPU count that divides %d", tp, t, p, heads)
	}
	return msg + fmt.Sprintf("; use a GPU count that divides %d", heads)
}

// evenSplit is the largest tensor-parallel size t dividing both the heads and the GPUs, with
// pipeline parallel p = gpus / t over the rest; ok false when only t = 1 works.
func evenSplit(heads, gpus int) (t, p int, ok bool) {
	for t = gpus; t > 1; t-- {
		if gpus%t == 0 && heads%t == 0 {
			return t, gpus / t, true
		}
	}
	return 1, gpus, gpus > 1
}
