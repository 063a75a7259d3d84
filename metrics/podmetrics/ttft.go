// A pod's time to first token over a window: the p95 of the observations its histogram
// counted in the window, from the difference between two of its cumulative snapshots, as
// Prometheus' histogram_quantile(0.95, rate(..._bucket[window])) gives it. The scraper keeps
// each pod's snapshots (ttftHistory) across its reads.

package podmetrics

import (
	"math"
	"slices"
	"time"
)

// TTFTQuantile is the quantile of the time to first token served: the p95.
const TTFTQuantile = 0.95

// Bounds of what one pod's TTFT history holds: at most maxTTFTBuckets buckets (vLLM v0.11
// declares 22 and +Inf, SGLang v0.5.3 its --bucket-time-to-first-token list, 24 by default);
// a page with more gives no TTFT reading. At most maxTTFTSnapshots snapshots, spread over the
// window last asked for the pod: a pod costs at most 64 x 64 x 8 B = 32 KiB, whatever the
// scrape period and the window.
const (
	maxTTFTBuckets   = 64
	maxTTFTSnapshots = 64
	// MinTTFTWindow and MaxTTFTWindow bound the window served (crd's ttftWindowSeconds).
	MinTTFTWindow = 15 * time.Second
	MaxTTFTWindow = 600 * time.Second
	// DefaultTTFTWindow is the window kept for a pod before any HPA asked for one, and served
	// to a request that names none.
	DefaultTTFTWindow = 60 * time.Second
)

// Histogram is one read of a cumulative histogram, summed over its series: Bounds are the
// buckets' upper bounds, ascending, the last +Inf; Counts the cumulative counts.
type Histogram struct {
	Bounds []float64
	Counts []float64
}

// snapshot is a Histogram's counts at the time they were read.
type snapshot struct {
	at     time.Time
	counts []float64
}

// ttftHistory is one pod's snapshots of its TTFT histogram, oldest first. Not safe for
// concurrent use: the scraper's mutex guards it.
type ttftHistory struct {
	bounds []float64
	snaps  []snapshot
	keep   time.Duration // the window last asked, which snapshots are kept for
}

// add records h read at now. A count lower than the last snapshot's (the server restarted:
// its counters started again from 0), or other buckets, start the history again from a
// snapshot of zeros at the last read, as Prometheus' rate takes a reset's new value as the
// increase: what the new process counted is what happened since.
func (t *ttftHistory) add(h Histogram, now time.Time) {
	if t.keep == 0 {
		t.keep = DefaultTTFTWindow
	}
	if !slices.Equal(h.Bounds, t.bounds) || (len(t.snaps) > 0 && reset(t.snaps[len(t.snaps)-1].counts, h.Counts)) {
		var from []snapshot
		if n := len(t.snaps); n > 0 && slices.Equal(h.Bounds, t.bounds) {
			from = []snapshot{{at: t.snaps[n-1].at, counts: make([]float64, len(h.Counts))}}
		}
		t.bounds, t.snaps = slices.Clone(h.Bounds), from
	}
	// The newest snapshot is always the last read; the ones before it are spaced at least
	// keep/(max-4) apart (a last read closer than that to the one before it is replaced by
	// the next), so the window's start is found within a spacing, and keep, its baseline at
	// or before now-keep and the last read fit in maxTTFTSnapshots.
	spacing := t.keep / (maxTTFTSnapshots - 4)
	if n := len(t.snaps); n >= 2 && t.snaps[n-1].at.Sub(t.snaps[n-2].at) < spacing {
		t.snaps[n-1] = snapshot{at: now, counts: slices.Clone(h.Counts)}
	} else {
		t.snaps = append(t.snaps, snapshot{at: now, counts: slices.Clone(h.Counts)})
	}
	t.prune(now)
}

// prune drops the snapshots older than the one at or before now-keep.
func (t *ttftHistory) prune(now time.Time) {
	cut := now.Add(-t.keep)
	i := 0
	for i+1 < len(t.snaps) && !t.snaps[i+1].at.After(cut) {
		i++
	}
	t.snaps = t.snaps[i:]
	if len(t.snaps) > maxTTFTSnapshots {
		t.snaps = t.snaps[len(t.snaps)-maxTTFTSnapshots:]
	}
}

func reset(prev, next []float64) bool {
	for i := range prev {
		if next[i] < prev[i] {
			return true
		}
	}
	return false
}

// p95 is the p95 over window ending at the last snapshot, in seconds, and the count of
// observations it is of: the counts of the last snapshot less those of the newest one at or
// before its time minus window (the oldest kept when the history is shorter: the pod's
// reads began less than a window ago). ok is false with fewer than two snapshots.
// No observation in the window gives 0: a pod that served no request in the window is not
// over its objective, and the HPA then reads it as room, as it should an idle pod; NaN (what
// histogram_quantile gives) is no value the custom metrics API can carry.
func (t *ttftHistory) p95(window time.Duration) (seconds, observed float64, ok bool) {
	if window > t.keep {
		t.keep = min(window, MaxTTFTWindow)
	}
	n := len(t.snaps)
	if n < 2 {
		return 0, 0, false
	}
	last := t.snaps[n-1]
	from := t.snaps[0]
	for _, s := range t.snaps[:n-1] {
		if !s.at.After(last.at.Add(-window)) {
			from = s
		}
	}
	delta := make([]float64, len(last.counts))
	for i := range delta {
		delta[i] = last.counts[i] - from.counts[i]
	}
	q, observed := BucketQuantile(TTFTQuantile, t.bounds, delta), delta[len(delta)-1]
	if observed == 0 {
		return 0, 0, true
	}
	return q, observed, true
}

// BucketQuantile is Prometheus' bucketQuantile (promql/quantile.go) for cumulative counts in
// buckets of ascending upper bounds, the last +Inf: the rank q x observations is found in the
// first bucket whose count reaches it and interpolated linearly within it, from 0 for the
// lowest bucket (a lower bound of 0 assumed when its upper bound is above 0); a rank in the
// +Inf bucket gives the highest finite bound. Counts are first made monotonic, as
// ensureMonotonic does. NaN without observations, or without a +Inf bucket.
func BucketQuantile(q float64, bounds, counts []float64) float64 {
	nb := len(bounds)
	if nb < 2 || len(counts) != nb || !math.IsInf(bounds[nb-1], +1) {
		return math.NaN()
	}
	c := slices.Clone(counts)
	for i := 1; i < nb; i++ {
		c[i] = max(c[i], c[i-1])
	}
	observations := c[nb-1]
	if observations == 0 {
		return math.NaN()
	}
	rank := q * observations
	b := 0
	for b < nb-1 && c[b] < rank {
		b++
	}
	if b == nb-1 {
		return bounds[nb-2]
	}
	if b == 0 && bounds[0] <= 0 {
		return bounds[0]
	}
	start, end, count := 0.0, bounds[b], c[b]
	if b > 0 {
		start = bounds[b-1]
		count -= c[b-1]
		rank -= c[b-1]
	}
	return start + (end-start)*(rank/count)
}
