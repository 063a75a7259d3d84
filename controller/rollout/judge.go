// A step's judgement: the canary against the stable over the step's window, on error rate and
// p95 time to first token, from the deltas of the pods' own counters and histograms.

package rollout

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/example/inferenceservice-operator/crd"
)

// Sample is what one side's pods answered over a window, or in total at one read: requests
// counted, of which errors (5xx), and the time-to-first-token histogram (cumulative buckets
// by upper bound, seconds, +Inf included as math.Inf(1)).
type Sample struct {
	Requests, Errors float64
	TTFT             map[float64]float64
}

// Add adds o to s.
func (s *Sample) Add(o Sample) {
	s.Requests += o.Requests
	s.Errors += o.Errors
	for le, n := range o.TTFT {
		if s.TTFT == nil {
			s.TTFT = map[float64]float64{}
		}
		s.TTFT[le] += n
	}
}

// Since is s less base, as counters are read: a counter below its base was reset (the
// container restarted) and counts from zero.
func (s Sample) Since(base Sample) Sample {
	d := func(now, was float64) float64 {
		if now < was {
			return now
		}
		return now - was
	}
	reset := s.Requests < base.Requests
	out := Sample{Requests: d(s.Requests, base.Requests), Errors: d(s.Errors, base.Errors)}
	if reset {
		out.Errors = s.Errors
	}
	for le, n := range s.TTFT {
		if out.TTFT == nil {
			out.TTFT = map[float64]float64{}
		}
		if reset {
			out.TTFT[le] = n
			continue
		}
		out.TTFT[le] = d(n, base.TTFT[le])
	}
	return out
}

// Snapshot is one side's pods' cumulative samples at one read, by pod name.
type Snapshot map[string]Sample

// Since sums, over the pods of s, each one's delta from base (a pod new since base counts whole).
func (s Snapshot) Since(base Snapshot) Sample {
	var out Sample
	for pod, now := range s {
		out.Add(now.Since(base[pod]))
	}
	return out
}

// Window is a step's metrics: from Start (when its first snapshots were read) to now.
type Window struct {
	Start          time.Time
	Stable, Canary Sample
}

// Quantile is the q quantile of a cumulative histogram, interpolated linearly inside the
// bucket it falls in as PromQL's histogram_quantile does; ok false without observations.
func Quantile(buckets map[float64]float64, q float64) (float64, bool) {
	les := make([]float64, 0, len(buckets))
	for le := range buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 {
		return 0, false
	}
	total := buckets[les[len(les)-1]]
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	prevLe, prevN := 0.0, 0.0
	for _, le := range les {
		n := buckets[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return prevLe, true // above the last finite bound: its bound, as histogram_quantile
			}
			if n == prevN {
				return le, true
			}
			return prevLe + (le-prevLe)*(rank-prevN)/(n-prevN), true
		}
		prevLe, prevN = le, n
	}
	return prevLe, true
}

// Verdict kinds.
const (
	Wait = iota
	Pass
	Fail
)

// Verdict is a step's judgement: Wait (with when to look again), Pass or Fail, and why.
type Verdict struct {
	Kind    int
	Message string
	Recheck time.Duration
}

// Judge judges step n of steps (1-based) over w at now.
func Judge(r *crd.Rollout, n, steps int32, step crd.RolloutStep, w Window, now time.Time) Verdict {
	maxErr, maxTTFT, minReq := r.Thresholds()
	dur := time.Duration(step.DurationSeconds) * time.Second
	elapsed := now.Sub(w.Start)
	at := fmt.Sprintf("step %d/%d", n, steps)
	if elapsed < dur {
		return Verdict{Kind: Wait, Recheck: dur - elapsed,
			Message: fmt.Sprintf("%s: %d%% to the canary, judged in %s (%.0f requests so far)", at, step.Weight, (dur - elapsed).Round(time.Second), w.Canary.Requests)}
	}
	if w.Canary.Requests < float64(minReq) {
		limit := crd.InconclusiveFactor * dur
		if elapsed < limit {
			return Verdict{Kind: Wait, Recheck: min(limit-elapsed, 10*time.Second),
				Message: fmt.Sprintf("%s: waiting for requests: the canary answered %.0f of the %d needed; extended up to %s", at, w.Canary.Requests, minReq, limit)}
		}
		return Verdict{Kind: Fail, Message: fmt.Sprintf("%s: inconclusive: the canary answered %.0f of the %d requests needed in %s (%d x the step's %s)",
			at, w.Canary.Requests, minReq, limit, crd.InconclusiveFactor, dur)}
	}
	canaryRate := 100 * w.Canary.Errors / w.Canary.Requests
	stableRate := 0.0
	if w.Stable.Requests > 0 {
		stableRate = 100 * w.Stable.Errors / w.Stable.Requests
	}
	if canaryRate > float64(maxErr) {
		return Verdict{Kind: Fail, Message: fmt.Sprintf("%s: canary error rate %.1f%% above %d%% (stable %.1f%%, %.0f canary requests)",
			at, canaryRate, maxErr, stableRate, w.Canary.Requests)}
	}
	ttft := "no stable time to first token to compare"
	cp, cok := Quantile(w.Canary.TTFT, 0.95)
	sp, sok := Quantile(w.Stable.TTFT, 0.95)
	if cok && sok && sp > 0 {
		inc := 100 * (cp - sp) / sp
		if inc > float64(maxTTFT) {
			return Verdict{Kind: Fail, Message: fmt.Sprintf("%s: canary p95 time to first token %.3fs is %.0f%% above the stable's %.3fs (limit %d%%)",
				at, cp, inc, sp, maxTTFT)}
		}
		ttft = fmt.Sprintf("p95 time to first token %.3fs (stable %.3fs)", cp, sp)
	}
	return Verdict{Kind: Pass, Message: fmt.Sprintf("%s passed: canary error rate %.1f%% (stable %.1f%%), %s, %.0f requests", at, canaryRate, stableRate, ttft, w.Canary.Requests)}
}
