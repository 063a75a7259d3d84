// The fake vLLM's fault knobs: a "version" of the model server that answers a share of its
// completions with an engine failure, or whose first token comes N times later. A real vLLM
// has no such knob; the fake reads them from its container's environment, which is part of the
// pod template, so changing one is a new revision of the model as a rollout sees it (the
// canary e2e tests, test/e2e/rollout_test.go). Nothing here fires unless a variable is set.

package vllm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

const (
	// EnvErrorRate is the share of completions answered with an engine failure, 0 to 1.
	EnvErrorRate = "LOCALCLUSTER_VLLM_ERROR_RATE"
	// EnvTTFTFactor is how many times later the first token comes than it would, 1 or more.
	EnvTTFTFactor = "LOCALCLUSTER_VLLM_TTFT_FACTOR"
)

// faults are one process's knobs. The failures are spread evenly, not drawn at random: with a
// rate of 0.2, every fifth completion fails, so a test knows how many failed from how many it
// sent, and a short run fails its share, not a lucky none.
type faults struct {
	errorRate  float64
	ttftFactor float64
	seen       atomic.Uint64 // completions that reached the engine
}

// parseFaults reads the knobs from a container's environment; an unset variable is no fault.
func parseFaults(env map[string]string) (*faults, error) {
	f := &faults{ttftFactor: 1}
	if v, ok := env[EnvErrorRate]; ok {
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(r) || r < 0 || r > 1 {
			return nil, fmt.Errorf("%s '%s' must be a number from 0 to 1", EnvErrorRate, v)
		}
		f.errorRate = r
	}
	if v, ok := env[EnvTTFTFactor]; ok {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 1 {
			return nil, fmt.Errorf("%s '%s' must be a number of 1 or more", EnvTTFTFactor, v)
		}
		f.ttftFactor = x
	}
	return f, nil
}

// active says what the knobs do, for the start log; "" when none is set.
func (f *faults) active() string {
	var parts []string
	if f.errorRate > 0 {
		parts = append(parts, fmt.Sprintf("%s=%g: %g%% of completions fail", EnvErrorRate, f.errorRate, 100*f.errorRate))
	}
	if f.ttftFactor != 1 {
		parts = append(parts, fmt.Sprintf("%s=%g: the first token comes %gx later", EnvTTFTFactor, f.ttftFactor, f.ttftFactor))
	}
	return strings.Join(parts, "; ")
}

// fail counts a completion and says whether it is one of the share that fails: the n-th fails
// when floor(n*rate) steps past floor((n-1)*rate).
func (f *faults) fail() bool {
	if f == nil || f.errorRate == 0 {
		return false
	}
	n := float64(f.seen.Add(1))
	return math.Floor(n*f.errorRate) > math.Floor((n-1)*f.errorRate)
}

// firstTokenDelay is what a slow version adds before its first token, given the time to it
// the request would have had (prefill and one decode step): (factor-1) times that.
func (f *faults) firstTokenDelay(ttft time.Duration) time.Duration {
	if f == nil || f.ttftFactor <= 1 || ttft <= 0 {
		return 0
	}
	return time.Duration(float64(ttft) * (f.ttftFactor - 1))
}
