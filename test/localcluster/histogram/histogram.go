// Package histogram is one Prometheus histogram's state as a fake model server keeps it,
// whichever engine it fakes: counts per bucket, made cumulative at scrape. How it is written
// out (names, labels, number format) is the engine's own.
package histogram

// Histogram counts observations in buckets bounded above by its bounds, and one +Inf bucket.
type Histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative; the last one is +Inf
	sum    float64
	n      uint64
}

// New is an empty histogram with the upper bounds given, in increasing order.
func New(bounds []float64) Histogram {
	return Histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

// Observe adds n observations of v.
func (h *Histogram) Observe(v float64, n uint64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i] += n
	h.sum += v * float64(n)
	h.n += n
}

// Buckets calls f with each finite bound and the cumulative count at it, in order; the +Inf
// bucket's count is Count.
func (h *Histogram) Buckets(f func(le float64, cumulative uint64)) {
	var cum uint64
	for i, bound := range h.bounds {
		cum += h.counts[i]
		f(bound, cum)
	}
}

// Count is how many observations it holds.
func (h *Histogram) Count() uint64 { return h.n }

// Sum is the sum of the observations.
func (h *Histogram) Sum() float64 { return h.sum }
