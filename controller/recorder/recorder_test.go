package recorder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
)

var pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "llama-0", Namespace: "team-a", UID: "u1", ResourceVersion: "7"}}

type harness struct {
	cs      *fake.Clientset
	clock   *clocktesting.FakeClock
	rec     *Recorder
	mu      sync.Mutex
	dropped map[string]int
}

func newHarness(t *testing.T, o Options) *harness {
	h := &harness{cs: fake.NewClientset(), clock: clocktesting.NewFakeClock(t0), dropped: map[string]int{}}
	o.Scheme, o.Controller, o.Clock = scheme.Scheme, "inferenceservice-operator", h.clock
	o.Dropped = func(r string) { h.mu.Lock(); h.dropped[r]++; h.mu.Unlock() }
	h.rec = New(&events.EventSinkImpl{Interface: h.cs.EventsV1()}, o)
	return h
}

func (h *harness) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.rec.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// eventually polls the fake API server's Events of team-a until check passes, for up to 10 s.
func (h *harness) eventually(t *testing.T, what string, check func([]eventsv1.Event) bool) []eventsv1.Event {
	t.Helper()
	return h.eventuallyIn(t, "team-a", what, check)
}

// eventuallyIn is eventually for namespace ns.
func (h *harness) eventuallyIn(t *testing.T, ns, what string, check func([]eventsv1.Event) bool) []eventsv1.Event {
	t.Helper()
	var items []eventsv1.Event
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		l, err := h.cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if items = l.Items; check(items) {
			return items
		}
	}
	t.Fatalf("%s: Events %s", what, summary(items))
	return nil
}

func summary(items []eventsv1.Event) string {
	var out []string
	for _, e := range items {
		c := int32(1)
		if e.Series != nil {
			c = e.Series.Count
		}
		out = append(out, fmt.Sprintf("%s %s x%d", e.Name, e.Reason, c))
	}
	return fmt.Sprint(out)
}

func count(want int32) func([]eventsv1.Event) bool {
	return func(items []eventsv1.Event) bool {
		return len(items) == 1 && items[0].Series != nil && items[0].Series.Count == want
	}
}

func TestRecorderWritesASeriesOnTheFirstEvent(t *testing.T) {
	h := newHarness(t, Options{})
	h.run(t)
	h.rec.Eventf(pod, nil, corev1.EventTypeWarning, "Failed", "Create", "create failed: %s", "quota")
	first := h.eventually(t, "the first occurrence", func(items []eventsv1.Event) bool { return len(items) == 1 })[0]
	if first.Note != "create failed: quota" || first.Regarding.Name != "llama-0" || first.ReportingController != "inferenceservice-operator" || first.Series != nil {
		t.Fatalf("first Event %+v", first)
	}
	h.clock.Step(time.Minute)
	h.rec.Eventf(pod, nil, corev1.EventTypeWarning, "Failed", "Create", "create failed: %s", "quota")
	got := h.eventually(t, "the second occurrence as a series of the first", count(2))[0]
	if got.Name != first.Name || !got.EventTime.Equal(&first.EventTime) {
		t.Fatalf("series on %s at %v, want on the first, %s at %v", got.Name, got.EventTime, first.Name, first.EventTime)
	}
	// Three more are counted in memory; the count goes once the series has been quiet 6 minutes.
	for range 3 {
		h.clock.Step(time.Minute)
		h.rec.Eventf(pod, nil, corev1.EventTypeWarning, "Failed", "Create", "create failed: %s", "quota")
	}
	h.clock.Step(6 * time.Minute) // the timer, armed at the third, finds the last 6 minutes old
	h.clock.Step(3 * time.Minute)
	h.eventually(t, "the final count", count(5))
	var writes []string
	for _, a := range h.cs.Actions() {
		if a.GetVerb() != "list" {
			writes = append(writes, a.GetVerb())
		}
	}
	if fmt.Sprint(writes) != "[create patch patch]" {
		t.Fatalf("writes %v for 5 occurrences, want [create patch patch] (the Event, its series, the final count)", writes)
	}
}

func TestRecorderRecreatesASeriesWhoseEventIsGone(t *testing.T) {
	h := newHarness(t, Options{})
	h.run(t)
	h.rec.Eventf(pod, nil, corev1.EventTypeWarning, "Failed", "Create", "n")
	first := h.eventually(t, "the first", func(items []eventsv1.Event) bool { return len(items) == 1 })[0]
	if err := h.cs.EventsV1().Events("team-a").Delete(context.Background(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.rec.Eventf(pod, nil, corev1.EventTypeWarning, "Failed", "Create", "n")
	if got := h.eventually(t, "the series created whole", count(2))[0]; got.Name != first.Name || got.Note != "n" {
		t.Fatalf("recreated %s (%q), want %s", got.Name, got.Note, first.Name)
	}
}

func TestRecorderRetriesWhatFailedOnTheWay(t *testing.T) {
	h := newHarness(t, Options{})
	fails := 2
	h.cs.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails > 0 {
			fails--
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	h.run(t)
	h.rec.Eventf(pod, nil, corev1.EventTypeNormal, "Created", "Create", "n")
	for i := 0; ; i++ {
		l, _ := h.cs.EventsV1().Events("team-a").List(context.Background(), metav1.ListOptions{})
		if len(l.Items) == 1 {
			break
		}
		if i > 2000 {
			t.Fatalf("no Event after retries (%d failures left)", fails)
		}
		h.clock.Step(time.Second) // the retry timer, 7.5-12.5 s
		time.Sleep(time.Millisecond)
	}
	if len(h.dropped) != 0 {
		t.Fatalf("dropped %v, want none", h.dropped)
	}
}

func TestRecorderQueueIsBounded(t *testing.T) {
	h := newHarness(t, Options{Queue: 2, NamespaceShare: 3})
	for i := range 3 {
		h.clock.Step(time.Millisecond) // the Event's name is the object's and the time's
		h.rec.Eventf(pod, nil, corev1.EventTypeNormal, fmt.Sprint("Reason", i), "Create", "n")
	}
	if h.dropped["queue-full"] != 1 {
		t.Fatalf("dropped %v with a queue of 2 and 3 Events, want queue-full 1", h.dropped)
	}
	h.run(t)
	h.eventually(t, "the two queued", func(items []eventsv1.Event) bool { return len(items) == 2 })
}

// One namespace's burst takes its share of the queue and no more: another namespace's Events
// still find room, and a namespace whose writes went out has its share back.
func TestRecorderNamespaceShare(t *testing.T) {
	h := newHarness(t, Options{Queue: 4, NamespaceShare: 2})
	other := pod.DeepCopy()
	other.Namespace = "team-b"
	for i := range 3 {
		h.clock.Step(time.Millisecond)
		h.rec.Eventf(pod, nil, corev1.EventTypeWarning, fmt.Sprint("Burst", i), "Start", "n")
	}
	for i := range 2 {
		h.clock.Step(time.Millisecond)
		h.rec.Eventf(other, nil, corev1.EventTypeNormal, fmt.Sprint("Quiet", i), "Create", "n")
	}
	if h.dropped["namespace-share"] != 1 || h.dropped["queue-full"] != 0 {
		t.Fatalf("dropped %v, want the burst's third as namespace-share and nothing else", h.dropped)
	}
	h.run(t)
	h.eventuallyIn(t, "team-b", "the other namespace's two", func(items []eventsv1.Event) bool { return len(items) == 2 })
	h.eventually(t, "the burst's share", func(items []eventsv1.Event) bool { return len(items) == 2 })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		h.rec.mu.Lock()
		n := len(h.rec.waiting)
		h.rec.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespaces still counted waiting after their writes: %d", n)
		}
	}
	h.clock.Step(time.Millisecond)
	h.rec.Eventf(pod, nil, corev1.EventTypeWarning, "Again", "Start", "n")
	h.eventually(t, "the share back", func(items []eventsv1.Event) bool { return len(items) == 3 })
}

func TestRecorderRefusesWhatItCannotName(t *testing.T) {
	h := newHarness(t, Options{})
	h.rec.Eventf(pod, nil, "Info", "Created", "Create", "n")                                     // not Normal or Warning
	h.rec.Eventf(&struct{ corev1.Pod }{}, nil, corev1.EventTypeNormal, "Created", "Create", "n") // not in the scheme
	if n := len(h.rec.queue); n != 0 {
		t.Fatalf("%d writes queued, want none", n)
	}
}

func TestOutcome(t *testing.T) {
	gr := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	for name, tc := range map[string]struct {
		err    error
		series bool
		want   result
	}{
		"written":                        {nil, false, done},
		"exists":                         {apierrors.NewAlreadyExists(gr, "e"), false, rejected},
		"a series' create raced its own": {apierrors.NewAlreadyExists(gr, "e"), true, retry},
		"invalid":                        {apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "e", nil), false, rejected},
		"forbidden":                      {apierrors.NewForbidden(gr, "e", errors.New("no")), false, rejected},
		"too many requests":              {apierrors.NewTooManyRequests("busy", 1), false, retry},
		"unavailable":                    {apierrors.NewServiceUnavailable("down"), false, retry},
		"on the way":                     {errors.New("connection refused"), false, retry},
		"cannot be built":                {&restclient.RequestConstructionError{Err: errors.New("bad")}, false, rejected},
	} {
		if got := outcome(tc.err, tc.series); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
