package main

import "testing"

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct{ q, want float64 }{{0.5, 5}, {0.99, 10}, {0.1, 1}} {
		if got := quantile(xs, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing")
	}
}

// TestExtrapolate: per-picker sums scale with N; the times are not extrapolated.
func TestExtrapolate(t *testing.T) {
	r := Result{N: 100, Pickers: 100, RestRSSMiB: 3000, RestCPUCores: 0.5, LoadRSSMiB: 3200, RouteP50S: 7, WritesPerISV: 9}
	got := extrapolate(r, 1000)
	if !got.Extrapolated || got.Pickers != 1000 || got.RestRSSMiB != 30000 || got.RestCPUCores != 5 || got.LoadRSSMiB != 32000 || got.RouteP50S != 0 || got.WritesPerISV != 9 {
		t.Fatalf("extrapolate: %+v", got)
	}
}
