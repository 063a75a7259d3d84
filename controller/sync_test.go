package controller

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/example/inferenceservice-operator/controller/evidence"
	"github.com/example/inferenceservice-operator/controller/evidence/evidencetest"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// sync's path through the evidence (package evidence reads it; its tests pin the reads): what
// it reads reaches the status and the Warning Event, and a resync reads and writes nothing.

// logCounts counts log reads by result, beside what fakeMetrics counts.
type logCounts struct {
	*fakeMetrics
	reads map[string]int
}

func (m *logCounts) PodLogRead(result string) { m.reads[result]++ }

// crashWorld is a one-replica isvc whose only pod crash-loops, with the API's pod log
// endpoint behind a real client.
type crashWorld struct {
	*fixture
	logs   *evidencetest.LogEndpoint
	counts *logCounts
	w      adapterWorld
	pod    *corev1.Pod
}

func newCrashWorld(t *testing.T) *crashWorld {
	isvc := newISVCObject(1)
	want := desired(t, isvc)
	f := newFixture(t, isvc, nil)
	w := newAdapterWorld()
	w.isvc = isvc
	d := readyDeployment(t, isvc)
	d.UID, d.Status.ReadyReplicas, d.Status.AvailableReplicas = w.d.UID, 0, 0
	f.caches.d, f.caches.svc, f.caches.hpa = d, want.Service, want.HPA
	f.ctrl.caches = &adapterCaches{fakeCaches: f.caches, rs: []*appsv1.ReplicaSet{w.rs}}
	logs := &evidencetest.LogEndpoint{}
	srv := httptest.NewServer(logs)
	t.Cleanup(srv.Close)
	f.ctrl.kube = kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	counts := &logCounts{fakeMetrics: f.metrics, reads: map[string]int{}}
	f.ctrl.metrics = counts
	f.ctrl.evidence = evidence.New(evidenceConfig(Config{Kube: f.ctrl.kube, Dynamic: f.dyn, Caches: f.ctrl.caches, Queue: f.ctrl.queue, Metrics: counts}))
	return &crashWorld{fixture: f, logs: logs, counts: counts, w: w}
}

// crash makes the pod's container show run n crashed: just exited (its current run), or in
// back-off (its previous run).
func (c *crashWorld) crash(n int32, backingOff bool) {
	finished := t0.Add(time.Duration(n)*time.Minute - 5*time.Second)
	run := &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", ContainerID: fmt.Sprintf("containerd://run-%d", n),
		StartedAt: metav1.NewTime(finished.Add(-10 * time.Second)), FinishedAt: metav1.NewTime(finished)}
	cs := corev1.ContainerStatus{Name: kinds.ContainerName, RestartCount: n, State: corev1.ContainerState{Terminated: run}}
	if backingOff {
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		cs.LastTerminationState.Terminated = run
	}
	p := c.w.pod("qwen3-abc-1", "")
	p.Status.Phase, p.Status.Conditions = corev1.PodRunning, nil
	p.Spec.NodeName = "node-1"
	p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	c.pod = p
	c.caches.pods = []*corev1.Pod{p}
	c.now = finished.Add(3 * time.Second)
}

// syncStored syncs and returns the Ready message written, with the status's event applied to
// the cache as the informer would.
func (c *crashWorld) syncStored(t *testing.T) string {
	t.Helper()
	if _, err := c.sync(); err != nil {
		t.Fatal(err)
	}
	st := c.storedStatus()
	c.caches.isvc.Status = st
	return meta.FindStatusCondition(st.Conditions, crd.ConditionReady).Message
}

// TestLastWordsReadOncePerRestart: the decisive line of each crashed run is read once, on the
// sync that first sees the run, with the bounded options; resyncs read nothing; the status
// and the Warning Event quote it.
func TestLastWordsReadOncePerRestart(t *testing.T) {
	c := newCrashWorld(t)
	c.crash(1, true)
	c.logs.Prev = evidencetest.RunLog(t0, 1, "--foo")
	msg := c.syncStored(t)
	want := "GET /api/v1/namespaces/default/pods/qwen3-abc-1/log container=vllm previous=true tailLines=50 limitBytes=16384 timestamps=true"
	if reads := c.logs.Take(); len(reads) != 1 || reads[0] != want {
		t.Fatalf("first sync's reads:\n%s\nwant one:\n%s", strings.Join(reads, "\n"), want)
	}
	if !strings.Contains(msg, "CrashLoopBackOff; last terminated: exit code 2 (Error), 1 restarts; log: vllm serve: error: unrecognized arguments: --foo") {
		t.Fatalf("message %q", msg)
	}
	if ev := c.drainEvents(); len(ev) != 1 || !strings.Contains(ev[0], "Warning CrashLoopBackOff") || !strings.Contains(ev[0], "log: vllm serve: error: unrecognized arguments: --foo") {
		t.Fatalf("events %q", ev)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.sync(); err != nil {
			t.Fatal(err)
		}
		if reads, calls := c.logs.Take(), c.calls(); len(reads) != 0 || calls != "" {
			t.Fatalf("resync %d: reads %q, calls %q: a resync reads and writes nothing", i, reads, calls)
		}
	}
	// The next crash is a new run: read once, quoted, no new Warning (the reason is the same).
	c.crash(2, true)
	c.logs.Prev = evidencetest.RunLog(t0, 2, "--bar")
	if msg := c.syncStored(t); !strings.Contains(msg, "2 restarts; log: vllm serve: error: unrecognized arguments: --bar") {
		t.Fatalf("second run's message %q", msg)
	}
	if reads := c.logs.Take(); len(reads) != 1 {
		t.Fatalf("second run's reads: %q", reads)
	}
	if ev := c.drainEvents(); len(ev) != 0 {
		t.Fatalf("events %q", ev)
	}
	if c.counts.reads[evidence.ReadOK] != 2 || len(c.counts.reads) != 1 {
		t.Fatalf("reads counted %v", c.counts.reads)
	}
}

// TestLastWordsJustExited: a run that just exited is the container's current one; when the
// kubelet restarted it before the read, the current log is the next run's (its lines stamped
// later), and the previous run is read instead.
func TestLastWordsJustExited(t *testing.T) {
	c := newCrashWorld(t)
	c.crash(1, false)
	c.logs.Current = evidencetest.RunLog(t0, 1, "--foo")
	if msg := c.syncStored(t); !strings.Contains(msg, "exited; last terminated: exit code 2 (Error), 1 restarts; log: vllm serve: error: unrecognized arguments: --foo") {
		t.Fatalf("message %q", msg)
	}
	if reads := c.logs.Take(); len(reads) != 1 || !strings.Contains(reads[0], "previous= ") {
		t.Fatalf("reads %q", reads)
	}

	c.crash(2, false)
	c.logs.Current = evidencetest.Stamp(c.now.Add(time.Second), "(APIServer pid=1) INFO 01-01 00:01:59 [api_server.py:1842] vLLM API server version 0.11.0")
	c.logs.Prev = evidencetest.RunLog(t0, 2, "--bar")
	if msg := c.syncStored(t); !strings.Contains(msg, "log: vllm serve: error: unrecognized arguments: --bar") || strings.Contains(msg, "version 0.11.0") {
		t.Fatalf("message %q", msg)
	}
	if reads := c.logs.Take(); len(reads) != 2 || !strings.Contains(reads[0], "previous= ") || !strings.Contains(reads[1], "previous=true") {
		t.Fatalf("reads %q", reads)
	}
}

// TestLastWordsForbidden: where RBAC denies pods/log, the status keeps today's message, and
// the denial is remembered for the run: one read per restart, none per resync.
func TestLastWordsForbidden(t *testing.T) {
	c := newCrashWorld(t)
	c.logs.Code = http.StatusForbidden
	c.crash(1, true)
	msg := c.syncStored(t)
	today := "Pod qwen3-abc-1 container vllm: CrashLoopBackOff; last terminated: exit code 2 (Error), 1 restarts; Deployment qwen3: 0/1 replicas ready"
	if msg != today {
		t.Fatalf("message %q, want today's %q", msg, today)
	}
	if ev := c.drainEvents(); len(ev) != 1 || !strings.Contains(ev[0], "Warning CrashLoopBackOff") {
		t.Fatalf("events %q", ev)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.sync(); err != nil {
			t.Fatal(err)
		}
	}
	if reads := c.logs.Take(); len(reads) != 1 {
		t.Fatalf("reads over a denied run and 3 resyncs: %d, want 1:\n%s", len(reads), strings.Join(reads, "\n"))
	}
	c.crash(2, true)
	c.syncStored(t)
	if reads := c.logs.Take(); len(reads) != 1 {
		t.Fatalf("the next restart's reads: %q", reads)
	}
	if c.counts.reads[evidence.ReadForbidden] != 2 || c.counts.reads[evidence.ReadOK] != 0 {
		t.Fatalf("reads counted %v", c.counts.reads)
	}
	// Healthy again: nothing is remembered (evidence's TestLastWordsForbidden looks inside),
	// so the same run crashing into view again is read again.
	c.caches.pods = nil
	if _, err := c.sync(); err != nil {
		t.Fatal(err)
	}
	c.crash(2, true)
	c.syncStored(t)
	if reads := c.logs.Take(); len(reads) != 1 {
		t.Fatalf("a run read before the model was healthy, read again: %q", reads)
	}
}
