package sglang

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// The readers on the local world's fake SGLang (test/localcluster/sglang): testdata/fake holds
// its logs as the operator reads them (the kubelet's stamps on every line), written by that
// package's TestSGLangOperatorFixtures, which fails when the fake's lines drift from them.

func fakeLog(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fake", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStartPhasesOfTheFake: a start of the fake reads as every phase, in order, none going,
// the parts adding up to the whole; without CUDA graphs, no graphs phase.
func TestStartPhasesOfTheFake(t *testing.T) {
	for _, c := range []struct {
		file string
		want []string
	}{
		{"start.log", []string{engine.PhaseProcessStart, engine.PhaseWeightsLoad, engine.PhaseEngineInit, engine.PhaseCUDAGraphs, engine.PhaseAPIServer, engine.PhaseServing}},
		{"start-no-cuda-graph.log", []string{engine.PhaseProcessStart, engine.PhaseWeightsLoad, engine.PhaseEngineInit, engine.PhaseAPIServer, engine.PhaseServing}},
	} {
		t.Run(c.file, func(t *testing.T) {
			ps := SGLang{}.StartPhases(fakeLog(t, c.file), time.Time{})
			if strings.Join(names(ps), ",") != strings.Join(c.want, ",") {
				t.Fatalf("phases %v, want %v", names(ps), c.want)
			}
			sum := 0.0
			for _, p := range ps[:len(ps)-1] {
				if p.Going || p.Seconds < 0 {
					t.Fatalf("phase %+v", p)
				}
				sum += p.Seconds
			}
			if whole := ps[len(ps)-1].Seconds; whole <= 0 || sum-whole > 0.05 || whole-sum > 0.05 {
				t.Fatalf("the parts add up to %.3f s, the whole is %.3f s: %+v", sum, whole, ps)
			}
			if ps[1].Seconds <= 0 || !strings.HasPrefix(ps[1].Source, "Load weight end.") {
				t.Fatalf("weights' load %+v", ps[1])
			}
		})
	}
}

// TestDecisiveLineOfTheFake: each crash of the fake names its cause in SGLang's words, and a
// sick GPU's line is the GPU fault reader's.
func TestDecisiveLineOfTheFake(t *testing.T) {
	for _, c := range []struct{ file, want, fault string }{
		{"crash-cuda-oom.log", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ", ""},
		{"crash-not-enough-memory.log", "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", ""},
		{"crash-bad-argument.log", "launch_server.py: error: unrecognized arguments: --max-model-len 4096", ""},
		{"crash-server-args.log", "AssertionError: max_loaded_loras should be greater than or equal to max_loras_per_batch. max_loaded_loras=4, max_loras_per_batch=8", ""},
		{"crash-gpu-ecc.log", "RuntimeError: CUDA error: uncorrectable ECC error encountered", "ecc"},
		{"crash-group-timeout.log", "torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. 1/2 clients joined.", ""},
	} {
		t.Run(c.file, func(t *testing.T) {
			got := SGLang{}.DecisiveLine(strings.Split(fakeLog(t, c.file), "\n"))
			if !strings.HasPrefix(got, c.want) {
				t.Fatalf("got  %q\nwant %q", got, c.want)
			}
			if fault, _ := (SGLang{}).GPUFault(got); (fault != "") != (c.fault != "") {
				t.Fatalf("GPU fault %q of %q", fault, got)
			}
		})
	}
}
