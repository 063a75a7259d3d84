package evidence

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

// pendingSummary is a PendingWorkloadsSummary as Kueue's visibility API returns it.
func pendingSummary(items ...map[string]any) *unstructured.Unstructured {
	list := make([]any, len(items))
	for i, it := range items {
		list[i] = it
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "kind": "PendingWorkloadsSummary",
		"metadata": map[string]any{"name": "q", "namespace": "default"}, "items": list,
	}}
}

func pendingItem(name string, inLQ, inCQ int64) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name, "namespace": "default"},
		"localQueueName": "q", "priority": int64(1000), "positionInLocalQueue": inLQ, "positionInClusterQueue": inCQ}
}

// A waiting model's pending Workloads get their positions from one background read of the
// LocalQueue's pendingworkloads, shared by the models of that queue for a period; an admitted
// Workload gets none, and a failed read leaves them all without one.
func TestQueuePositionsRead(t *testing.T) {
	isvc := newISVC()
	isvc.Spec.QueueName = "q"
	features := reconcile.Features{KueueWorkloads: true, KueueVisibility: true}
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	q := queue.New(queue.DefaultConfig("test"), nil)
	r := New(Config{Dynamic: dyn, Queue: q})
	var reads atomic.Int32
	var fail atomic.Bool
	dyn.PrependReactor("get", "localqueues", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "pendingworkloads" || a.GetNamespace() != "default" || a.(clienttesting.GetAction).GetName() != "q" {
			t.Errorf("unexpected read %s %s/%s", a.GetSubresource(), a.GetNamespace(), a.(clienttesting.GetAction).GetName())
		}
		reads.Add(1)
		if fail.Load() {
			return true, nil, errors.New("the server is currently unable to handle the request")
		}
		return true, pendingSummary(pendingItem("wb", 1, 3), pendingItem("other", 0, 0)), nil
	})
	workloads := func() map[types.UID]kinds.Workload {
		return map[types.UID]kinds.Workload{"a": {Name: "wa", ClusterQueue: "team-a"}, "b": {Name: "wb", Pending: "short"}}
	}
	// observe syncs at now until the read of the period has answered, as the model's rechecks would.
	observe := func(now time.Time, want int32) map[types.UID]kinds.Workload {
		t.Helper()
		eventually(t, 10*time.Second, "the queue's read answered", func() error {
			r.queuePositions(isvc, features, workloads(), now)
			if n := reads.Load(); n != want || queueReading(r, "default", "q") {
				return fmt.Errorf("%d reads, one in flight: %v", n, queueReading(r, "default", "q"))
			}
			return nil
		})
		return r.queuePositions(isvc, features, workloads(), now)
	}
	ws := observe(t0, 1)
	if p := ws["b"].Position; p == nil || *p != (kinds.QueuePosition{InLocalQueue: 1, InClusterQueue: 3}) {
		t.Fatalf("pending Workload's position: %+v", p)
	}
	if ws["a"].Position != nil {
		t.Fatalf("an admitted Workload given a position: %+v", ws["a"].Position)
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("the model waiting in the queue not enqueued by the answer: %d queued", n)
	}
	observe(t0.Add(time.Second), 1) // within the period: no second read
	fail.Store(true)
	ws = observe(t0.Add(queuePositionsPeriod+time.Second), 2)
	if ws["b"].Position != nil {
		t.Fatalf("after a failed read: position %+v", ws["b"].Position)
	}
	// Nothing pending: no read.
	r.queuePositions(isvc, features, map[types.UID]kinds.Workload{"a": {Name: "wa", ClusterQueue: "team-a"}}, t0.Add(time.Hour))
	if reads.Load() != 2 {
		t.Fatalf("read with nothing pending")
	}
}

// queueReading reports whether a read of the queue is in flight.
func queueReading(r *Reader, namespace, name string) bool {
	s, ok := r.queues.get(localQueue{namespace, name})
	return ok && s.v.reading
}

// TestQueuePositionsHungVisibilityAPI: Kueue's visibility server accepts the reads and never
// answers. Eight models, each waiting in its own LocalQueue, are synced one after another on
// one worker: every sync returns while all eight reads are still hanging (none waited for a
// read to end, by its timeout or otherwise), a second round starts no further read, and once
// the server answers again the positions arrive.
func TestQueuePositionsHungVisibilityAPI(t *testing.T) {
	const queues = 8
	release := make(chan struct{})
	var hung atomic.Bool
	hung.Store(true)
	var started, ended atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lq, ok := strings.CutPrefix(r.URL.Path, "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/")
		lq, ok2 := strings.CutSuffix(lq, "/pendingworkloads")
		if !ok || !ok2 {
			http.NotFound(w, r)
			return
		}
		started.Add(1)
		defer ended.Add(1)
		if hung.Load() {
			select {
			case <-r.Context().Done():
				return
			case <-release:
			}
		}
		w.Header().Set("Content-Type", "application/json")
		summary := pendingSummary(pendingItem("w-"+lq, 2, 5))
		b, _ := summary.MarshalJSON()
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close: the hung handlers return

	isvc := newISVC()
	features := reconcile.Features{KueueWorkloads: true, KueueVisibility: true}
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Config{Dynamic: dyn, Queue: queue.New(queue.DefaultConfig("test"), nil)})
	models := make([]*crd.InferenceService, queues)
	for i := range models {
		m := isvc.DeepCopy()
		m.Name, m.Spec.QueueName = fmt.Sprintf("m%d", i), fmt.Sprintf("q%d", i)
		models[i] = m
	}
	workloads := func(m *crd.InferenceService) map[types.UID]kinds.Workload {
		return map[types.UID]kinds.Workload{"p": {Name: "w-" + m.Spec.QueueName, Pending: "quota"}}
	}
	round := func(now time.Time) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, m := range models {
				r.queuePositions(m, features, workloads(m), now)
			}
		}()
		return done
	}
	waitFor := func(what string, done <-chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the syncs did not return within 30s (%d reads started, %d ended)", what, started.Load(), ended.Load())
		}
	}

	waitFor("a round with the visibility API hung", round(t0))
	if n := ended.Load(); n != 0 {
		t.Fatalf("a sync waited for a read to end: %d of %d reads ended before the round returned", n, started.Load())
	}
	eventually(t, 10*time.Second, "a read per queue in flight", func() error {
		if n := started.Load(); n != queues {
			return fmt.Errorf("%d reads started, want %d", n, queues)
		}
		return nil
	})
	waitFor("a second round, the reads still hung", round(t0.Add(time.Second)))
	if n := started.Load(); n != queues {
		t.Fatalf("%d reads started, want %d: one in flight per queue", n, queues)
	}

	// The server answers again: once the hung reads have timed out, the next period's reads
	// bring each model its position.
	hung.Store(false)
	eventually(t, 2*queuePositionsTimeout+10*time.Second, "every model's position", func() error {
		now := t0.Add(time.Minute)
		for _, m := range models {
			ws := r.queuePositions(m, features, workloads(m), now)
			if p := ws["p"].Position; p == nil || *p != (kinds.QueuePosition{InLocalQueue: 2, InClusterQueue: 5}) {
				return fmt.Errorf("%s: position %+v", m.Name, p)
			}
		}
		return nil
	})
}

// eventually polls cond every 20 ms until it returns nil, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}
