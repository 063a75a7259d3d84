package vllm

import (
	"testing"
	"time"
)

// TestStepModel: a step's duration as step.go states it, and the scheduler's token budget
// chunking a long prompt while the decodes go first.
func TestStepModel(t *testing.T) {
	c := Config{TokenTime: 20 * time.Millisecond, PrefillTime: time.Millisecond, PrefillBase: 2 * time.Millisecond, PrefillMax: -1}
	m := newStepModel(c, 0, 128<<10, 16<<30) // a Llama-8B-like KV entry against 16 GiB of weights
	if m.budget != 2048 {
		t.Fatalf("budget %d, want vLLM's 2048 on a GPU under 70 GiB", m.budget)
	}
	if h := newStepModel(Config{GPUMemory: 80 * gib}, 0, 0, 0); h.budget != 8192 {
		t.Fatalf("budget %d, want vLLM's 8192 on an 80 GiB GPU", h.budget)
	}
	if h := newStepModel(Config{GPUMemory: 80 * gib}, 512, 0, 0); h.budget != 512 {
		t.Fatalf("budget %d, want --max-num-batched-tokens's 512", h.budget)
	}
	for _, tc := range []struct {
		prefill, decodes, kv int
		want                 time.Duration
	}{
		{prefill: 10, want: 12 * time.Millisecond},                                  // a lone prefill
		{decodes: 1, want: 20 * time.Millisecond},                                   // a lone decode (no context)
		{decodes: 10, want: 20 * time.Millisecond},                                  // under the ridge: the weights' read
		{decodes: 64, want: 64 * time.Millisecond},                                  // compute-bound
		{decodes: 1, kv: 131072, want: 20*time.Millisecond + 20*time.Millisecond/1}, // 16 GiB of KV read: one more weights' read
		{prefill: 100, decodes: 4, want: 102*time.Millisecond + 20*time.Millisecond},
	} {
		if got := m.duration(tc.prefill, tc.decodes, tc.kv); got != tc.want {
			t.Errorf("duration(%d prefill, %d decodes, %d KV) = %v, want %v", tc.prefill, tc.decodes, tc.kv, got, tc.want)
		}
	}

	e := &engine{steps: m}
	long := &stepSeq{toPrefill: 3000, maxTokens: 1}
	d1 := &stepSeq{context: 50, maxTokens: 5}
	d2 := &stepSeq{context: 70, maxTokens: 5}
	e.batch = []*stepSeq{d1, d2, long} // running in the order they were first scheduled
	plan, prefill, decodes, kv := e.planLocked()
	if len(plan) != 3 || prefill != 2046 || decodes != 2 || kv != 120 {
		t.Fatalf("plan %d entries, %d prefill tokens, %d decodes, %d KV tokens; want 3, 2046 (the budget less the decodes), 2, 120", len(plan), prefill, decodes, kv)
	}
}
