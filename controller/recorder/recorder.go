// Package recorder writes the operator's Events (events.k8s.io/v1) as client-go's tools/events
// recorder does (an Event an occurrence; a second occurrence of the same object, reason and action
// within six minutes turns the first into a series, its count written at once, then every 30
// minutes and when the series ends) with memory bounded by settings: a series entry per recent
// Event in an LRU of fixed size and a queue of fixed length. client-go v0.37.2's broadcaster
// keeps a deep copy of every Event it sent for 6 to 12 minutes and a goroutine per Event
// waiting on the client: 16 MB at 10,000 models created (docs/benchmarks.md).
package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options are a Recorder's settings; zero values take the defaults beside them.
type Options struct {
	Scheme     *runtime.Scheme
	Controller string // reportingController; reportingInstance is it, a dash and the host name
	// Series is how many recent Events are remembered for their series (4096, the size of
	// client-go's core/v1 correlator caches); the least recently seen is forgotten first.
	Series int
	// Queue is how many writes may wait (1000, client-go's); beyond it an Event is dropped.
	Queue int
	// NamespaceShare is how many of those one namespace's Events may take (a quarter of Queue):
	// a tenant whose models fail in a burst cannot crowd out every other namespace's Events.
	NamespaceShare int
	// Workers write side by side (4): the client's rate limiter, not they, sets the pace.
	Workers int
	// Finish, Refresh, Retry and Tries are client-go's: a series ends after 6 minutes without
	// an occurrence, its count is written at least every 30 minutes, and a write that failed on
	// the way is tried again after 10 s (jittered), 12 tries in all.
	Finish, Refresh, Retry time.Duration
	Tries                  int
	Clock                  clock.WithDelayedExecution
	// Dropped counts an Event not written, by why: queue-full, namespace-share (its namespace
	// had its share waiting), rejected (the API server refused it), retries (every try failed).
	Dropped func(reason string)
}

// Recorder is an events.EventRecorder. Eventf never blocks; Run writes.
type Recorder struct {
	o        Options
	sink     events.EventSink
	instance string
	queue    chan write
	mu       sync.Mutex
	series   *series
	waiting  map[string]int // queued writes by namespace, under mu
}

var _ events.EventRecorder = (*Recorder)(nil)

// New returns a Recorder writing to sink; nothing is written before Run.
func New(sink events.EventSink, o Options) *Recorder {
	orDefault(&o.Series, 4096)
	orDefault(&o.Queue, 1000)
	orDefault(&o.NamespaceShare, max(o.Queue/4, 1))
	orDefault(&o.Workers, 4)
	orDefault(&o.Tries, 12)
	orDefault(&o.Finish, 6*time.Minute)
	orDefault(&o.Refresh, 30*time.Minute)
	orDefault(&o.Retry, 10*time.Second)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Dropped == nil {
		o.Dropped = func(string) {}
	}
	host, _ := os.Hostname()
	return &Recorder{o: o, sink: sink, instance: o.Controller + "-" + host, queue: make(chan write, o.Queue),
		series: newSeries(o.Series, o.Finish, o.Refresh), waiting: map[string]int{}}
}

// orDefault sets an unset (zero or negative) setting to its default.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Eventf records an Event regarding an object, as client-go's recorder makes it.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	now := r.o.Clock.Now()
	ref, err := reference.GetReference(r.o.Scheme, regarding)
	if err != nil {
		klog.ErrorS(err, "Event not recorded: no reference to its object", "reason", reason)
		return
	}
	var rel *corev1.ObjectReference
	if related != nil {
		if rel, err = reference.GetReference(r.o.Scheme, related); err != nil {
			klog.V(4).InfoS("Event recorded without its related object: no reference to it", "reason", reason, "err", err)
		}
	}
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		klog.ErrorS(nil, "Event not recorded: unsupported type", "type", eventtype, "reason", reason)
		return
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:  metav1.MicroTime{Time: now}, ReportingController: r.o.Controller, ReportingInstance: r.instance,
		Action: action, Reason: reason, Regarding: *ref, Related: rel, Note: fmt.Sprintf(note, args...), Type: eventtype,
	}
	r.mu.Lock()
	writes, arm := r.series.observe(ev, now)
	r.mu.Unlock()
	if arm != nil {
		r.after(r.o.Finish, arm)
	}
	for _, w := range writes {
		r.enqueue(w)
	}
}

// expire is a series' timer: its final count once it ended, or the timer again.
func (r *Recorder) expire(e *entry) {
	r.mu.Lock()
	writes, again := r.series.expire(e, r.o.Clock.Now())
	r.mu.Unlock()
	if again > 0 {
		r.after(again, e)
	}
	for _, w := range writes {
		r.enqueue(w)
	}
}

// after calls expire(e) after d, in a goroutine of its own: a fake clock runs its functions
// while holding the lock that expire's Now would take.
func (r *Recorder) after(d time.Duration, e *entry) {
	r.o.Clock.AfterFunc(d, func() { go r.expire(e) })
}

func (r *Recorder) enqueue(w write) {
	ns := w.event.Namespace
	r.mu.Lock()
	full := r.waiting[ns] >= r.o.NamespaceShare
	if !full {
		r.waiting[ns]++
	}
	r.mu.Unlock()
	why := "namespace-share"
	if !full {
		select {
		case r.queue <- w:
			return
		default:
			r.dequeued(ns)
			why = "queue-full"
		}
	}
	// A series' count carries only its Event's name: the Event, not its object, is named.
	klog.V(2).InfoS("Event dropped: too many waiting to be written", "why", why, "event", klog.KObj(w.event), "reason", w.event.Reason,
		"object", klog.KRef(w.event.Regarding.Namespace, w.event.Regarding.Name), "countOnly", w.patchOnly)
	r.o.Dropped(why)
}

// dequeued counts a write of namespace ns out of the queue.
func (r *Recorder) dequeued(ns string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting[ns]--; r.waiting[ns] <= 0 {
		delete(r.waiting, ns)
	}
}

// Run writes the queue's Events with Options.Workers until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range r.o.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case w := <-r.queue:
					r.dequeued(w.event.Namespace)
					r.send(ctx, w)
				}
			}
		})
	}
	wg.Wait()
}

// send makes w's call; one that failed on the way is queued again after Options.Retry.
func (r *Recorder) send(ctx context.Context, w write) {
	err := r.call(ctx, w)
	switch outcome(err, w.event.Series != nil) {
	case done:
		return
	case rejected:
		if apierrors.IsAlreadyExists(err) {
			klog.V(5).InfoS("Event already written", "event", klog.KRef(w.event.Namespace, w.event.Name))
		} else {
			klog.ErrorS(err, "Event rejected by the API server, not retried", "event", klog.KRef(w.event.Namespace, w.event.Name), "reason", w.event.Reason)
		}
		r.o.Dropped("rejected")
		return
	}
	if w.tries++; w.tries >= r.o.Tries {
		klog.ErrorS(err, "Event not written: every try failed", "event", klog.KRef(w.event.Namespace, w.event.Name), "tries", w.tries)
		r.o.Dropped("retries")
		return
	}
	klog.V(2).InfoS("Event write failed, will retry", "event", klog.KRef(w.event.Namespace, w.event.Name), "err", err)
	r.o.Clock.AfterFunc(wait.Jitter(r.o.Retry, 0.25), func() { r.enqueue(w) })
}

// call patches a series' count (creating the Event whole if it is gone, unless only the count
// is known) or creates the Event.
func (r *Recorder) call(ctx context.Context, w write) error {
	if s := w.event.Series; s != nil {
		patch, err := json.Marshal(map[string]any{"series": s})
		if err != nil {
			return err
		}
		_, err = r.sink.Patch(ctx, w.event, patch)
		switch {
		case !apierrors.IsNotFound(err):
			return err
		case w.patchOnly:
			klog.V(4).InfoS("Series ended on an Event no longer there", "event", klog.KRef(w.event.Namespace, w.event.Name))
			return nil
		}
	}
	ev := *w.event
	ev.ResourceVersion = ""
	_, err := r.sink.Create(ctx, &ev)
	return err
}

type result int

const (
	done     result = iota
	rejected        // the API server refused it: trying again would be refused again
	retry           // failed on the way
)

// outcome is client-go's, but for an API server that was busy or timed out: a refusal is
// final, except AlreadyExists for a series' Event (its create raced the first occurrence's: the
// patch, tried again, finds it).
func outcome(err error, series bool) result {
	var construct *restclient.RequestConstructionError
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return done
	case errors.As(err, &construct):
		return rejected
	case apierrors.IsAlreadyExists(err) && series:
		return retry
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err):
		return retry
	case errors.As(err, &status):
		return rejected
	}
	return retry
}
