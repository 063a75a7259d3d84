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
	w.logs.Events = pulledEvents
	got := w.starts(context.Background(), w.key, []reconcile.StartRun{run}, t0.Add(time.Minute))
	want := []string{"GET /api/v1/namespaces/default/pods/qwen3-abc-1/log container=vllm previous= tailLines= limitBytes=131072 timestamps=true",
		"GET /api/v1/namespaces/default/events fieldSelector=involvedObject.uid=pod-uid limit=100"}
	if reads := w.logs.Take(); strings.Join(reads, "\n") != strings.Join(want, "\n") {
		t.Fatalf("reads:\n%s\nwant:\n%s", strings.Join(reads, "\n"), strings.Join(want, "\n"))
	}
	rec := got[run.RunID]
	if rec == nil || rec.TotalSeconds != 8 || rec.Pod != run.Pod {
		t.Fatalf("start %+v", rec)
	}
	if p := rec.Phases; len(p) < 3 || p[1].Name != reconcile.PhaseImagePulled || p[1].Seconds != 0.312 || p[2].Name != reconcile.PhaseContainerStarted || p[2].Seconds != 1.688 {
		t.Errorf("phases %+v, want the pull's 0.312s of the 2s from scheduling to the start", rec.Phases)
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
	// Events not read: the start is told as without them; a restarted run's reads no Events
	w.logs.Take()
	w.logs.EventsCode = 403
	if rec := w.starts(context.Background(), w.key, []reconcile.StartRun{serving(2, t0)}, t0.Add(time.Minute))["pod-uid/vllm/2"]; rec == nil ||
		rec.Phases[1].Name != reconcile.PhaseContainerStarted || rec.Phases[1].Seconds != 2 {
		t.Errorf("Events refused: %+v", rec)
	}
	restarted := serving(3, t0)
	restarted.Restarted = true
	w.logs.Take()
	if rec := w.starts(context.Background(), w.key, []reconcile.StartRun{restarted}, t0.Add(time.Minute))[restarted.RunID]; rec == nil || len(w.logs.Take()) != 1 {
		t.Errorf("restarted run: %+v", rec)
	}
}

// pulledEvents are the pod's Events as the API lists them: the model server's image pulled in 312ms.
const pulledEvents = `{"kind":"EventList","apiVersion":"v1","items":[
{"metadata":{"name":"qwen3-abc-1.1","namespace":"default"},"involvedObject":{"kind":"Pod","uid":"pod-uid","fieldPath":"spec.containers{vllm}"},
 "reason":"Pulled","type":"Normal","firstTimestamp":"2025-12-31T23:59:59Z","lastTimestamp":"2025-12-31T23:59:59Z",
 "message":"Successfully pulled image \"vllm/vllm-openai:v0.11.0\" in 300ms (312ms including waiting). Image size: 4212134 bytes."}]}`
