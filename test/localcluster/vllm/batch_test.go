package vllm

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// TestVllmBatchSlowsEveryRequest: a request's time to first token and inter-token latency come
// from the engine's steps, as vLLM's do: alone, its prefill then one TokenTime per token; among
// 32, every step carries 32 decodes, compute-bound at 32 x PrefillTime (64 ms here, against the
// 20 ms of one), and their 32 prompts are prefilled in shared steps, which delays each one's
// first token by the others' prefill.
func TestVllmBatchSlowsEveryRequest(t *testing.T) {
	t.Parallel()
	const tokenTime, prefillTime, prompt, tokens = 20 * time.Millisecond, 2 * time.Millisecond, 8, 20
	_, _, url := vtStart(t, proc.Spec{}, Config{TokenTime: tokenTime, PrefillTime: prefillTime, PrefillBase: 2 * time.Millisecond, PrefillMax: 5 * time.Second})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"stream":true}`, strings.Repeat("w ", prompt), tokens)
	// run sends n concurrent streams and returns the mean time to first token and inter-token
	// latency the server's histograms recorded for them.
	var before string
	_, before = vtCall("GET", url+"/metrics", "")
	run := func(n int) (ttft, itl time.Duration) {
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code, b := vtCall("POST", url+"/v1/completions", body); code != 200 {
					t.Errorf("a completion: %d %s", code, b)
				}
			}()
		}
		wg.Wait()
		var after string
		d := func(name string) float64 { return vtMetric(after, name) - vtMetric(before, name) }
		// a request is recorded once its answer is written
		vtEventually(t, fmt.Sprintf("%d requests recorded", n), func() (bool, string) {
			_, after = vtCall("GET", url+"/metrics", "")
			return d("vllm:e2e_request_latency_seconds_count") == float64(n), after
		})
		ttft = time.Duration(d("vllm:time_to_first_token_seconds_sum") / float64(n) * 1e9)
		itl = time.Duration(d("vllm:inter_token_latency_seconds_sum") / d("vllm:inter_token_latency_seconds_count") * 1e9)
		before = after
		return ttft, itl
	}
	ttft1, itl1 := run(1)
	// alone: PrefillBase + 8 x PrefillTime, then one TokenTime; then TokenTime per token (the
	// lower bounds are the model's; the upper ones leave room for a busy machine's timers)
	if want := 2*time.Millisecond + prompt*prefillTime + tokenTime; ttft1 < want || ttft1 > 3*want {
		t.Errorf("alone, time to first token %v, want %v", ttft1, want)
	}
	if itl1 < tokenTime || itl1 > 2*tokenTime {
		t.Errorf("alone, inter-token latency %v, want %v", itl1, tokenTime)
	}
	ttft32, itl32 := run(32)
	// 32 decodes a step: 32 x PrefillTime = 64 ms, plus their KV caches' read (under 1 ms); at
	// most, every prompt prefilled in a step of its own between two of a request's tokens
	// (PrefillBase + 8 x PrefillTime each, as the requests arrive apart on a busy machine)
	step := 32 * prefillTime
	most := (step*(tokens-1) + 32*(2*time.Millisecond+prompt*prefillTime)) / (tokens - 1)
	if itl32 < step*9/10 || itl32 > most*3/2 {
		t.Errorf("among 32, inter-token latency %v, want %v to %v (alone: %v)", itl32, step, most, itl1)
	}
	// 32 prompts of 8 tokens: 512 ms of prefill in shared steps, each of which delays every
	// first token in it, and 64 ms decode steps between them; arriving together, every first
	// token comes after about 580 ms; on average, after 200 ms however they arrive
	if ttft32 < 200*time.Millisecond || ttft32 > 3*time.Second {
		t.Errorf("among 32, mean time to first token %v, want 200 ms to 3 s (alone: %v)", ttft32, ttft1)
	}
	t.Logf("alone: ttft %v, itl %v; among 32: ttft %v, itl %v", ttft1, itl1, ttft32, itl32)
}
