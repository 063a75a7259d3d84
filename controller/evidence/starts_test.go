package evidence

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/evidence/evidencetest"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// serving is run n of a pod's model server, started at start.
func serving(n int, start time.Time) reconcile.StartRun {
	return reconcile.StartRun{Namespace: "default", Pod: "qwen3-abc-1", PodUID: "pod-uid", Container: kinds.ContainerName,
		RunID: "pod-uid/vllm/" + string(rune('0'+n)), Created: start.Add(-3 * time.Second), Scheduled: start.Add(-2 * time.Second), StartedAt: start}
}

// startLog is a short vLLM start read with timestamps: 5 s to serve.
func startLog(start time.Time) string {
	core := "\x1b[1;36m(EngineCore_DP0 pid=243)\x1b[0;0m "
	api := "\x1b[1;36m(APIServer pid=1)\x1b[0;0m "
	stamp := start.UTC().Format("01-02 15:04:05")
	return evidencetest.Stamp(start.Add(time.Second), core+"INFO "+stamp+" [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...") +
		evidencetest.Stamp(start.Add(3*time.Second), core+"INFO "+stamp+" [default_loader.py:267] Loading weights took 2.00 seconds") +
		evidencetest.Stamp(start.Add(3*time.Second), core+"INFO "+stamp+" [gpu_model_runner.py:2653] Model loading took 15.2683 GiB and 2.000000 seconds") +
		evidencetest.Stamp(start.Add(4*time.Second), core+"INFO "+stamp+" [core.py:210] init engine (profile, create kv cache, warmup model) took 1.00 seconds") +
		evidencetest.Stamp(start.Add(5*time.Second), api+"INFO:     Application startup complete.")
}

// A serving run's log head is read once, bounded, with timestamps; its start is told and
// each phase counted once, only for a start that just ended.
func TestStartsReadOncePerRun(t *testing.T) {
	w := newLogWorld(t)
	var observed []string
	w.observeStartPhase = func(phase string, secs float64) { observed = append(observed, phase) }
	run := serving(0, t0)
	w.logs.Current = startLog(t0)
	got := w.starts(context.Background(), w.key, []reconcile.StartRun{run}, t0.Add(time.Minute))
	want := "GET /api/v1/namespaces/default/pods/qwen3-abc-1/log container=vllm previous= tailLines= limitBytes=131072 timestamps=true"
	if reads := w.logs.Take(); len(reads) != 1 || reads[0] != want {
		t.Fatalf("reads:\n%s\nwant one:\n%s", strings.Join(reads, "\n"), want)
	}
	rec := got[run.RunID]
	if rec == nil || rec.TotalSeconds != 8 || rec.Pod != run.Pod {
		t.Fatalf("start %+v", rec)
	}
	if len(observed) != len(rec.Phases) || observed[0] != reconcile.PhaseScheduled {
		t.Errorf("observed %v for phases %+v", observed, rec.Phases)
	}
	for i := 0; i < 3; i++ {
		if again := w.starts(context.Background(), w.key, []reconcile.StartRun{run}, t0.Add(time.Minute)); again[run.RunID] != rec {
			t.Fatalf("resync %d: %+v", i, again)
		}
	}
	if reads := w.logs.Take(); len(reads) != 0 || len(observed) != len(rec.Phases) {
		t.Fatalf("resyncs read %q, observed %v", reads, observed)
	}
	// an old start read again (a restarted operator) is told but not counted again
	observed = nil
	old := serving(1, t0)
	if got := w.starts(context.Background(), w.key, []reconcile.StartRun{old}, t0.Add(time.Hour)); got[old.RunID] == nil || len(observed) != 0 {
		t.Errorf("old start %+v, observed %v", got, observed)
	}
	if w.reads["ok"] != 2 {
		t.Errorf("reads counted %v", w.reads)
	}
}
