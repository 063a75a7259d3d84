package histogram

import (
	"fmt"
	"testing"
)

func TestBucketsCumulative(t *testing.T) {
	h := New([]float64{0.1, 1, 10})
	h.Observe(0.05, 2) // first bucket
	h.Observe(1, 1)    // le is inclusive
	h.Observe(50, 3)   // +Inf only
	var got string
	h.Buckets(func(le float64, c uint64) { got += fmt.Sprintf("%g:%d ", le, c) })
	if want := "0.1:2 1:3 10:3 "; got != want {
		t.Errorf("buckets %q, want %q", got, want)
	}
	if h.Count() != 6 || h.Sum() != 0.1+1+150 {
		t.Errorf("count %d sum %g, want 6 and 151.1", h.Count(), h.Sum())
	}
}
