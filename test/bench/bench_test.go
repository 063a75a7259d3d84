package main

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestBenchSmall keeps the benchmark working in CI at a small N. It asserts only counts that
// do not depend on the machine's speed: the operator writes nothing while nothing changes.
// The figures are printed; the full run is `go run ./test/bench -n 100,1000`.
func TestBenchSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r, err := Run(ctx, Config{N: 20, QPS: 50, HoldPeriods: 2, Resync: 3 * time.Second, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	PrintTable(os.Stdout, []Result{r})
	if r.WritesSteady != 0 {
		t.Errorf("%v writes at steady state over %.0fs, want 0", r.WritesSteady, r.SteadySeconds)
	}
	if r.WritesPerISVCCreate <= 0 || r.ReadySeconds <= 0 || r.ReconcileP50Ms <= 0 {
		t.Errorf("figures missing: %+v", r)
	}
}
