package activator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

var t0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

type activityWorld struct {
	client   *fake.Clientset
	clock    *testingclock.FakeClock
	activity *Activity
	metrics  *Metrics
}

// newActivityWorld runs an Activity against a fake clientset holding qwen3's Service (when
// withService) and a fake clock at t0.
func newActivityWorld(t *testing.T, withService bool) *activityWorld {
	t.Helper()
	var objs []runtime.Object
	if withService {
		objs = append(objs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: qwen.Namespace, Name: qwen.Name}})
	}
	w := &activityWorld{client: fake.NewClientset(objs...), clock: testingclock.NewFakeClock(t0), metrics: NewMetrics(prometheus.NewRegistry())}
	w.activity = NewActivity(w.client.CoreV1(), ActivityOptions{RefreshPeriod: 30 * time.Second, Clock: w.clock, Metrics: w.metrics})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.activity.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// patches counts the Service patches sent.
func (w *activityWorld) patches() int {
	n := 0
	for _, a := range w.client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "services" {
			n++
		}
	}
	return n
}

func (w *activityWorld) annotation(t *testing.T, key string) string {
	t.Helper()
	svc, err := w.client.CoreV1().Services(qwen.Namespace).Get(context.Background(), qwen.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Annotations[key]
}

// waitPatches waits for n patches, then checks no more come within a moment of real time.
func (w *activityWorld) waitPatches(t *testing.T, n int) {
	t.Helper()
	eventually(t, "patches", func() bool { return w.patches() >= n })
	if got := w.patches(); got != n {
		t.Fatalf("%d patches, want %d", got, n)
	}
}

func TestWakeWritesAtOnce(t *testing.T) {
	w := newActivityWorld(t, true)
	w.clock.Step(1500 * time.Millisecond)
	w.activity.Wake(qwen)
	w.waitPatches(t, 1)
	eventually(t, "the annotation", func() bool { return w.annotation(t, kinds.LastRequestAnnotation) == "2026-12-05T10:00:01Z" })
	// The patch lands before its result is counted: wait for the count.
	eventually(t, "one ok write counted", func() bool { return testutil.ToFloat64(w.metrics.writes.WithLabelValues(WriteOK)) == 1 })
}

func TestBusyModelWrittenOncePerPeriod(t *testing.T) {
	w := newActivityWorld(t, true)
	w.activity.Arrived(qwen)()
	w.waitPatches(t, 1)
	// A stream of requests inside the period: no write until the period ends.
	for range 10 {
		w.clock.Step(2 * time.Second)
		w.activity.Arrived(qwen)()
	}
	if n := w.patches(); n != 1 {
		t.Fatalf("%d patches inside one period, want 1", n)
	}
	// The period's end writes the last arrival, once.
	w.clock.Step(10 * time.Second)
	w.waitPatches(t, 2)
	eventually(t, "the last arrival", func() bool { return w.annotation(t, kinds.LastRequestAnnotation) == "2026-12-05T10:00:20Z" })
	// Quiet: the period's tick writes nothing new.
	w.clock.Step(30 * time.Second)
	w.clock.Step(30 * time.Second)
	w.waitPatches(t, 2)
}

func TestInflightKeepsModelBusy(t *testing.T) {
	w := newActivityWorld(t, true)
	done := w.activity.Arrived(qwen)
	w.waitPatches(t, 1)
	// A long stream: each period's tick writes it again.
	w.clock.Step(30 * time.Second)
	w.waitPatches(t, 2)
	eventually(t, "the tick's time", func() bool { return w.annotation(t, kinds.LastRequestAnnotation) == "2026-12-05T10:00:30Z" })
	w.clock.Step(5 * time.Second)
	done()
	w.clock.Step(25 * time.Second)
	w.waitPatches(t, 3)
	eventually(t, "its end", func() bool { return w.annotation(t, kinds.LastRequestAnnotation) == "2026-12-05T10:00:35Z" })
}

func TestNeverWritesOlder(t *testing.T) {
	w := newActivityWorld(t, true)
	w.clock.Step(time.Minute)
	w.activity.Wake(qwen)
	w.waitPatches(t, 1)
	// The clock steps back (a VM resumed, a corrected clock): the write stays.
	w.clock.SetTime(t0)
	w.activity.Wake(qwen)
	w.activity.Arrived(qwen)()
	w.clock.Step(31 * time.Second)
	w.waitPatches(t, 1)
	if got := w.annotation(t, kinds.LastRequestAnnotation); got != "2026-12-05T10:01:00Z" {
		t.Fatalf("last-request %s, want the later 10:01:00", got)
	}
}

func TestNoServiceDropped(t *testing.T) {
	w := newActivityWorld(t, false)
	w.activity.Wake(qwen)
	w.waitPatches(t, 1)
	eventually(t, "not_found counted", func() bool { return testutil.ToFloat64(w.metrics.writes.WithLabelValues(WriteNotFound)) == 1 })
	// Not retried, however long.
	for range 5 {
		w.clock.Step(time.Minute)
	}
	w.waitPatches(t, 1)
}

func TestErrorRetriedThenWritten(t *testing.T) {
	w := newActivityWorld(t, true)
	var failures atomic.Int32
	w.client.PrependReactor("patch", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures.Add(1) <= 2 {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	w.activity.Wake(qwen)
	// The backoff waits on the fake clock: step it until the third try lands.
	eventually(t, "the write after two failures", func() bool {
		w.clock.Step(time.Second)
		return w.annotation(t, kinds.LastRequestAnnotation) != ""
	})
	// The patch lands before its result is counted: wait for the count.
	eventually(t, "the write counted", func() bool { return testutil.ToFloat64(w.metrics.writes.WithLabelValues(WriteOK)) == 1 })
	if n := testutil.ToFloat64(w.metrics.writes.WithLabelValues(WriteError)); n != 2 {
		t.Errorf("%v errors counted, want 2", n)
	}
}

func TestErrorRetriesBounded(t *testing.T) {
	w := newActivityWorld(t, true)
	w.client.PrependReactor("patch", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcdserver: request timed out")
	})
	w.activity.Wake(qwen)
	eventually(t, "the retries given up", func() bool {
		w.clock.Step(10 * time.Second)
		return testutil.ToFloat64(w.metrics.writes.WithLabelValues(WriteError)) == DefaultMaxRetries+1
	})
	for range 5 {
		w.clock.Step(time.Minute)
	}
	w.waitPatches(t, DefaultMaxRetries+1)
}

func TestColdStartWrittenOncePerColdStart(t *testing.T) {
	w := newActivityWorld(t, true)
	arrived := t0.Add(2 * time.Second)
	w.activity.Wake(qwen)
	w.clock.Step(time.Minute)
	// Three held requests of one cold start answer out of order: the earliest arrival is kept.
	w.activity.ColdStarted(qwen, arrived.Add(time.Second), 57*time.Second)
	w.activity.ColdStarted(qwen, arrived, 58123456*time.Microsecond)
	eventually(t, "the cold start", func() bool { return w.annotation(t, kinds.ColdStartAnnotation) != "" })
	var got kinds.ColdStart
	if err := json.Unmarshal([]byte(w.annotation(t, kinds.ColdStartAnnotation)), &got); err != nil {
		t.Fatal(err)
	}
	if want := (kinds.ColdStart{Arrived: "2026-12-05T10:00:02Z", FirstByteSeconds: 58.123}); got != want && got.Arrived != "2026-12-05T10:00:03Z" {
		t.Fatalf("cold start %+v, want %+v", got, want)
	}
	n := w.patches()
	// A late first byte of the same cold start writes nothing.
	w.activity.ColdStarted(qwen, arrived.Add(2*time.Second), 59*time.Second)
	w.waitPatches(t, n)
}

// TestWakeNotStarvedByRefreshes: with every refresh worker stuck on a write (junk keys'
// patches that hang), a wake is still written, on the wake queue's own workers.
func TestWakeNotStarvedByRefreshes(t *testing.T) {
	client := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: qwen.Namespace, Name: qwen.Name}})
	services := &hangingServices{ServicesGetter: client.CoreV1(), ns: "junk", stuck: make(chan struct{})}
	activity := NewActivity(services, ActivityOptions{RefreshPeriod: 30 * time.Second, Clock: testingclock.NewFakeClock(t0)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { activity.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(func() { close(services.stuck) }) // first: Run waits for its stuck workers

	for i := range 50 {
		activity.Arrived(Key{Namespace: "junk", Name: fmt.Sprintf("m%d", i)})()
	}
	eventually(t, "every refresh worker stuck", func() bool { return services.hung.Load() == DefaultWriteWorkers })
	activity.Wake(qwen)
	eventually(t, "the wake written", func() bool {
		svc, err := client.CoreV1().Services(qwen.Namespace).Get(context.Background(), qwen.Name, metav1.GetOptions{})
		return err == nil && svc.Annotations[kinds.LastRequestAnnotation] != ""
	})
}

// hangingServices hangs every patch in namespace ns until stuck is closed.
type hangingServices struct {
	corev1client.ServicesGetter
	ns    string
	stuck chan struct{}
	hung  atomic.Int32
}

func (h *hangingServices) Services(ns string) corev1client.ServiceInterface {
	s := h.ServicesGetter.Services(ns)
	if ns != h.ns {
		return s
	}
	return hangingService{ServiceInterface: s, h: h}
}

type hangingService struct {
	corev1client.ServiceInterface
	h *hangingServices
}

func (s hangingService) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Service, error) {
	s.h.hung.Add(1)
	<-s.h.stuck
	return nil, errors.New("gave up")
}

// TestWritesOnlyOwnedServices: a model whose Service is not (yet) the operator's gets no patch.
func TestWritesOnlyOwnedServices(t *testing.T) {
	client := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: qwen.Namespace, Name: qwen.Name}})
	var owned atomic.Bool
	metrics := NewMetrics(prometheus.NewRegistry())
	activity := NewActivity(client.CoreV1(), ActivityOptions{Clock: testingclock.NewFakeClock(t0), Metrics: metrics, Owned: func(Key) bool { return owned.Load() }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { activity.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	activity.Wake(qwen)
	eventually(t, "not_found counted", func() bool { return testutil.ToFloat64(metrics.writes.WithLabelValues(WriteNotFound)) == 1 })
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			t.Fatalf("patched a Service the operator does not own: %v", a)
		}
	}
	owned.Store(true)
	activity.Wake(qwen)
	eventually(t, "written once owned", func() bool { return testutil.ToFloat64(metrics.writes.WithLabelValues(WriteOK)) == 1 })
}
