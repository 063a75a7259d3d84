package evidence

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/example/inferenceservice-operator/controller/evidence/evidencetest"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

// logWorld is a Reader whose pod log reads go to logs, counted by result.
type logWorld struct {
	*Reader
	logs  *evidencetest.LogEndpoint
	reads map[string]int
	key   queue.Key
}

func newLogWorld(t *testing.T) *logWorld {
	logs := &evidencetest.LogEndpoint{}
	srv := httptest.NewServer(logs)
	t.Cleanup(srv.Close)
	w := &logWorld{logs: logs, reads: map[string]int{}, key: queue.Key{Namespace: "default", Name: "qwen3"}}
	w.Reader = New(Config{Kube: kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL}), CountLogRead: func(r string) { w.reads[r]++ }})
	return w
}

// read is one sync's last words for the runs wanted.
func (w *logWorld) read(wanted ...reconcile.CrashedRun) map[string]string {
	return w.lastWords(context.Background(), w.key, wanted)
}

// crashed is run n of the pod's container: just exited (its current run), or in back-off (its
// previous run).
func crashed(n int32, backingOff bool) reconcile.CrashedRun {
	finished := t0.Add(time.Duration(n)*time.Minute - 5*time.Second)
	return reconcile.CrashedRun{Namespace: "default", Pod: "qwen3-abc-1", PodUID: "pod-uid", Container: kinds.ContainerName,
		RunID: fmt.Sprintf("containerd://run-%d", n), Previous: backingOff, StartedAt: finished.Add(-10 * time.Second), FinishedAt: finished}
}

// Each crashed run's log is read once, with the bounded options, on the sync that first wants
// it; later syncs read nothing; the next run is read once.
func TestLastWordsReadOncePerRun(t *testing.T) {
	w := newLogWorld(t)
	run := crashed(1, true)
	w.logs.Prev = evidencetest.RunLog(t0, 1, "--foo")
	got := w.read(run)
	want := "GET /api/v1/namespaces/default/pods/qwen3-abc-1/log container=vllm previous=true tailLines=50 limitBytes=16384 timestamps=true"
	if reads := w.logs.Take(); len(reads) != 1 || reads[0] != want {
		t.Fatalf("first read:\n%s\nwant one:\n%s", strings.Join(reads, "\n"), want)
	}
	if got[run.RunID] != "vllm serve: error: unrecognized arguments: --foo" || len(got) != 1 {
		t.Fatalf("last words %q", got)
	}
	for i := 0; i < 3; i++ {
		if again := w.read(run); again[run.RunID] != got[run.RunID] {
			t.Fatalf("resync %d: %q", i, again)
		}
	}
	if reads := w.logs.Take(); len(reads) != 0 {
		t.Fatalf("resyncs read %q", reads)
	}
	next := crashed(2, true)
	w.logs.Prev = evidencetest.RunLog(t0, 2, "--bar")
	if got := w.read(next); !strings.Contains(got[next.RunID], "--bar") {
		t.Fatalf("second run's last words %q", got)
	}
	if reads := w.logs.Take(); len(reads) != 1 {
		t.Fatalf("second run's reads: %q", reads)
	}
	if w.reads[ReadOK] != 2 || len(w.reads) != 1 {
		t.Fatalf("reads counted %v", w.reads)
	}
}

// A run that just exited is the container's current one; when the kubelet restarted it before
// the read, the current log is the next run's (its lines stamped later), and the previous run
// is read instead.
func TestLastWordsJustExited(t *testing.T) {
	w := newLogWorld(t)
	run := crashed(1, false)
	w.logs.Current = evidencetest.RunLog(t0, 1, "--foo")
	if got := w.read(run); !strings.Contains(got[run.RunID], "--foo") {
		t.Fatalf("last words %q", got)
	}
	if reads := w.logs.Take(); len(reads) != 1 || !strings.Contains(reads[0], "previous= ") {
		t.Fatalf("reads %q", reads)
	}
	next := crashed(2, false)
	w.logs.Current = evidencetest.Stamp(next.FinishedAt.Add(4*time.Second), "(APIServer pid=1) INFO 01-01 00:01:59 [api_server.py:1842] vLLM API server version 0.11.0")
	w.logs.Prev = evidencetest.RunLog(t0, 2, "--bar")
	if got := w.read(next); !strings.Contains(got[next.RunID], "--bar") || strings.Contains(got[next.RunID], "version 0.11.0") {
		t.Fatalf("last words %q", got)
	}
	if reads := w.logs.Take(); len(reads) != 2 || !strings.Contains(reads[0], "previous= ") || !strings.Contains(reads[1], "previous=true") {
		t.Fatalf("reads %q", reads)
	}
}

// Where RBAC denies pods/log, nothing is quoted and the denial is remembered for the run: one
// read per run, none per resync; a model with no crashed run remembers nothing.
func TestLastWordsForbidden(t *testing.T) {
	w := newLogWorld(t)
	w.logs.Code = http.StatusForbidden
	run := crashed(1, true)
	for i := 0; i < 4; i++ {
		if got := w.read(run); len(got) != 0 {
			t.Fatalf("sync %d quoted %q", i, got)
		}
	}
	if reads := w.logs.Take(); len(reads) != 1 {
		t.Fatalf("reads over a denied run and 3 resyncs: %d, want 1:\n%s", len(reads), strings.Join(reads, "\n"))
	}
	w.read(crashed(2, true))
	if reads := w.logs.Take(); len(reads) != 1 {
		t.Fatalf("the next restart's reads: %q", reads)
	}
	if w.reads[ReadForbidden] != 2 || w.reads[ReadOK] != 0 {
		t.Fatalf("reads counted %v", w.reads)
	}
	// Healthy again: nothing is remembered.
	if got := w.read(); got != nil {
		t.Fatalf("last words without a crash: %q", got)
	}
	if n := w.words.len(); n != 0 {
		t.Fatalf("%d models remembered without a crash", n)
	}
}
