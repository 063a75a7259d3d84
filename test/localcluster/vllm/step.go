// The fake vLLM's engine steps: how long a request's prefill and each of its tokens take when it
// shares the GPU with others, as vLLM v0.11's V1 engine runs them.
//
// vLLM's engine core loops over steps (v1/engine/core.py, step(): schedule, execute_model,
// update_from_output). Scheduler.schedule() (v1/core/sched/scheduler.py) has no prefill or
// decode phase: each step it hands every running request the tokens it lacks, in order, from a
// budget of max_num_batched_tokens (running requests first, one token each once decoding, the
// rest of a prompt chunked to what the budget has left; then waiting requests, which the fake's
// slots already admitted in arrival order), and one forward pass runs them all. Every request in
// a step's batch gets at most one token from it, so a request's time to first token and its
// inter-token latency are the steps' durations, and a step lasts longer the more it carries.
//
// A step's duration is the roofline of that one forward pass, with the fake's timing fields as
// its constants:
//
//	prefill part   PrefillBase + prefill tokens x PrefillTime (at most PrefillMax), when the step
//	               carries prompt tokens: compute-bound, every token a full pass of the weights' FLOPs;
//	decode part    max(TokenTime, decodes x PrefillTime) + KV tokens read x kvTime, when it carries
//	               decodes: reading the weights once (TokenTime, what a lone request's step costs)
//	               until the batch's FLOPs exceed it, plus attention reading every decode's KV
//	               cache (memory-bound; kvTime = TokenTime x the KV bytes per token / the weights'
//	               bytes on the GPU, the read of one KV token against the read of the weights).
//
// So a request alone keeps the figures the fake always had (its prefill, then one TokenTime for
// its first token and one for each next), and a batch of them slows each: decodes once their
// count passes TokenTime/PrefillTime or their contexts grow, everyone while prompts are
// prefilled beside them. The fake's prefill gives no token; the step after it does (vLLM samples
// the first token at the end of the prefill's step: the fake's time to first token is one decode
// step longer, as it always was).
//
// One goroutine per engine runs the steps while a request is running and ends when none is, so
// an idle server costs nothing; a request's handler waits on its sequence's wake channel.

package vllm

import (
	"time"
)

// defaultBatchedTokens is vLLM v0.11's max_num_batched_tokens for the OpenAI API server when
// --max-num-batched-tokens is not given (EngineArgs._set_default_args in
// vllm/engine/arg_utils.py): 8192 on a GPU of at least 70 GiB that is not an A100 ("for GPUs
// like H100 and MI300x"), else 2048. The fake's GPUs have no name; an 80 GiB one (its
// default) is taken for an H100.
func defaultBatchedTokens(gpuMemory int64) int {
	if gpuMemory >= 70*gib {
		return 8192
	}
	return 2048
}

// stepModel is the cost of one engine step (the file's comment).
type stepModel struct {
	token, prefill, base, prefillMax time.Duration
	// kvToken is the time reading one KV token takes in a decode step, in nanoseconds.
	kvToken float64
	// budget is max_num_batched_tokens: the tokens one step carries at most.
	budget int
}

// newStepModel takes the constants from the server's timing and the engine's geometry:
// kvBytes per token and weights bytes on each GPU.
func newStepModel(c Config, budget int, kvBytes, weights int64) stepModel {
	m := stepModel{token: c.TokenTime, prefill: c.PrefillTime, base: c.PrefillBase, prefillMax: c.PrefillMax, budget: budget}
	if m.budget <= 0 {
		m.budget = defaultBatchedTokens(c.GPUMemory)
	}
	if weights > 0 && kvBytes > 0 {
		m.kvToken = float64(c.TokenTime) * float64(kvBytes) / float64(weights)
	}
	return m
}

// duration is one step carrying prefill prompt tokens and decodes, whose caches hold kv tokens.
func (m stepModel) duration(prefill, decodes, kv int) time.Duration {
	var d time.Duration
	if prefill > 0 {
		d = m.base + time.Duration(prefill)*m.prefill
		if m.prefillMax > 0 {
			d = min(d, m.prefillMax)
		}
	}
	if decodes > 0 {
		d += max(m.token, time.Duration(decodes)*m.prefill) + time.Duration(float64(kv)*m.kvToken)
	}
	return d
}

// stepSeq is one running request as the steps advance it; its fields are guarded by the
// engine's mutex.
type stepSeq struct {
	toPrefill int // prompt tokens not prefilled yet (the prefix cache's hit is not among them)
	context   int // tokens whose KV the request holds: its prompt's computed ones, then its output
	maxTokens int
	generated int
	// prefilled is when its prompt was done (zero: not yet); first and last its first and
	// latest tokens.
	prefilled, first, last time.Time
	gone                   bool
	wake                   chan struct{} // a value after each step that advanced it
}

// stepView is what a handler reads of its sequence.
type stepView struct {
	generated              int
	prefilled, first, last time.Time
}

// planned is one sequence's share of a step.
type planned struct {
	seq     *stepSeq
	prefill int // prompt tokens; 0: a decode
}

// join puts an admitted request into the running batch: uncached prompt tokens to prefill
// (cached ones already in its context; at least one is computed, as vLLM recomputes a fully
// cached prompt's last token), then maxTokens to generate. The step loop starts with
// the first running request.
func (e *engine) join(uncached, cached, maxTokens int) *stepSeq {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := &stepSeq{toPrefill: max(uncached, 1), context: cached, maxTokens: maxTokens, wake: make(chan struct{}, 1)}
	e.batch = append(e.batch, q)
	if !e.stepping {
		e.stepping = true
		go e.runSteps()
	}
	return q
}

// leave takes the request out of the batch (finished, abandoned or stopped).
func (e *engine) leave(q *stepSeq) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q.gone = true
	for i, x := range e.batch {
		if x == q {
			e.batch = append(e.batch[:i], e.batch[i+1:]...)
			return
		}
	}
}

// view reads the sequence's progress.
func (e *engine) view(q *stepSeq) stepView {
	e.mu.Lock()
	defer e.mu.Unlock()
	return stepView{generated: q.generated, prefilled: q.prefilled, first: q.first, last: q.last}
}

// planLocked is Scheduler.schedule()'s token assignment: in order, a decoding request takes one
// token, a prefilling one the rest of its prompt up to what the budget has left.
func (e *engine) planLocked() (plan []planned, prefill, decodes, kv int) {
	budget := e.steps.budget
	for _, q := range e.batch {
		if budget <= 0 {
			break
		}
		switch {
		case q.toPrefill > 0:
			n := min(q.toPrefill, budget)
			plan = append(plan, planned{seq: q, prefill: n})
			prefill += n
			budget -= n
		case q.generated < q.maxTokens:
			plan = append(plan, planned{seq: q})
			decodes++
			kv += q.context
			budget--
		}
	}
	return plan, prefill, decodes, kv
}

// runSteps is the engine core's busy loop: plan a step from the batch, let it last its
// duration, advance what it carried, until no request runs or the server stops.
func (e *engine) runSteps() {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		e.mu.Lock()
		plan, prefill, decodes, kv := e.planLocked()
		if len(plan) == 0 {
			e.stepping = false
			e.mu.Unlock()
			return
		}
		d := e.steps.duration(prefill, decodes, kv)
		e.mu.Unlock()
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		select {
		case <-t.C:
		case <-e.stop:
			e.mu.Lock()
			e.stepping = false
			e.mu.Unlock()
			return
		}
		now := time.Now()
		e.mu.Lock()
		for _, p := range plan {
			q := p.seq
			if q.gone {
				continue
			}
			if p.prefill > 0 {
				q.toPrefill -= p.prefill
				q.context += p.prefill
				if q.toPrefill == 0 {
					q.prefilled = now
				}
			} else {
				q.generated++
				q.context++
				if q.generated == 1 {
					q.first = now
				}
				q.last = now
			}
			select {
			case q.wake <- struct{}{}:
			default:
			}
		}
		e.mu.Unlock()
	}
}
