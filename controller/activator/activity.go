package activator

// The activity writer: the requests the Handler sees become annotations on the model's Service
// (kinds.LastRequestAnnotation, kinds.ColdStartAnnotation), which the operator reads to keep a
// model up, to wake it from zero, and to report its cold start. Writes are coalesced per model
// (one queued at a time), spaced by a refresh period, retried with backoff and bounded.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

// Activity defaults.
const (
	// DefaultRefreshPeriod spaces a busy model's last-request writes: one patch per model per
	// period, a third of the shortest idle window (crd.MinIdleSeconds), so a model in use is
	// never idle a whole window between two writes.
	DefaultRefreshPeriod = 20 * time.Second
	// DefaultWriteWorkers bounds the refresh patches in flight at once.
	DefaultWriteWorkers = 4
	// DefaultWakeWorkers bounds the wake patches in flight at once, beside the refreshes.
	DefaultWakeWorkers = 2
	// DefaultMaxRetries bounds one write's retries; the next request schedules a new one.
	DefaultMaxRetries = 5
	// FieldManager names the activator's writes in the Services' managedFields.
	FieldManager = "inferenceservice-activator"
)

// Write results, the values of activator_annotation_writes_total's result label.
const (
	WriteOK       = "ok"
	WriteNotFound = "not_found"
	WriteError    = "error"
)

// ActivityOptions configure an Activity; zero fields take the defaults.
type ActivityOptions struct {
	RefreshPeriod time.Duration
	Workers       int
	WakeWorkers   int
	MaxRetries    int
	// WakeServices, if set, patches the wakes: a client of its own, so its rate limit is the
	// wakes' alone and a busy refresh queue cannot spend it.
	WakeServices corev1client.ServicesGetter
	// Owned, if set, says whether a model's Service is the one the operator made for it; a
	// model's activity is written only then (Models.Owned), never on another Service.
	Owned func(Key) bool
	// Clock is the real clock when nil; tests step a fake one.
	Clock   clock.WithTicker
	Metrics *Metrics
}

// Activity records each model's requests and writes them on its Service. Safe for concurrent use.
type Activity struct {
	services corev1client.ServicesGetter
	opts     ActivityOptions
	clock    clock.WithTicker
	// queue holds each model with a write due at most once: its dedup is the coalescing.
	queue workqueue.TypedRateLimitingInterface[Key]
	// wakes holds the models asked to wake, on workers of their own: a wake is what scales a
	// model up, so no number of refreshes queued ahead of it may delay it.
	wakes        workqueue.TypedRateLimitingInterface[Key]
	wakeServices corev1client.ServicesGetter

	mu     sync.Mutex
	models map[Key]*activity
}

// activity is what is known of one model's requests and what of it was written.
type activity struct {
	// seen is the last request's arrival or end, or a tick while one was in flight.
	seen time.Time
	// written is the last-request this process wrote, at second precision, and writtenAt when:
	// the refresh period runs from it.
	written, writtenAt time.Time
	// scheduled says the model is in the queue or waiting in it for its period.
	scheduled bool
	inflight  int
	// cold is a cold start measured and not yet written; coldDone is the first byte of the
	// last one written, before which every later measure belongs to that same cold start.
	cold          *kinds.ColdStart
	coldArrived   time.Time
	coldFirstByte time.Time
	coldDone      time.Time
}

// NewActivity returns an Activity patching Services through services; Run starts its writes.
func NewActivity(services corev1client.ServicesGetter, opts ActivityOptions) *Activity {
	defaultIfUnset(&opts.RefreshPeriod, DefaultRefreshPeriod)
	defaultIfUnset(&opts.Workers, DefaultWriteWorkers)
	defaultIfUnset(&opts.MaxRetries, DefaultMaxRetries)
	defaultIfUnset(&opts.WakeWorkers, DefaultWakeWorkers)
	wakeServices := opts.WakeServices
	if wakeServices == nil {
		wakeServices = services
	}
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	return &Activity{
		services: services,
		opts:     opts,
		clock:    c,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[Key](200*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[Key]{Name: "activator_annotations", Clock: c}),
		wakes: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[Key](200*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[Key]{Name: "activator_wakes", Clock: c}),
		wakeServices: wakeServices,
		models:       map[Key]*activity{},
	}
}

// Arrived records a request for key and returns its done, which records its end: a request in
// flight keeps its model busy (Run's tick) however long it streams.
func (a *Activity) Arrived(key Key) (done func()) {
	a.mu.Lock()
	m := a.model(key)
	m.inflight++
	a.see(key, m)
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			m := a.model(key)
			m.inflight--
			a.see(key, m)
		})
	}
}

// Wake records a request for key's model at zero: written at once, on the wake queue, since it
// is what scales the model up. It is the Holder's Options.Wake.
func (a *Activity) Wake(key Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mark(a.model(key))
	a.wakes.Add(key)
}

// ColdStarted records a held request's cold start: arrived at a model with no endpoint, first
// byte after d. Of one cold start's requests the earliest arrival is kept.
func (a *Activity) ColdStarted(key Key, arrived time.Time, d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.model(key)
	if !arrived.After(m.coldDone) || (m.cold != nil && !arrived.Before(m.coldArrived)) {
		return
	}
	m.cold = &kinds.ColdStart{
		Arrived:          arrived.UTC().Format(time.RFC3339),
		FirstByteSeconds: math.Round(d.Seconds()*1000) / 1000,
	}
	m.coldArrived, m.coldFirstByte = arrived, arrived.Add(d)
	a.queue.Add(key)
	m.scheduled = true
}

// see records activity for key now and schedules its write: at once when the last write is a
// period old, else when the period ends (a wake is written at once besides, Wake). a.mu is held.
func (a *Activity) see(key Key, m *activity) {
	now := a.mark(m)
	switch {
	case m.scheduled:
		return
	default:
		if wait := m.writtenAt.Add(a.opts.RefreshPeriod).Sub(now); wait > 0 {
			a.queue.AddAfter(key, wait)
		} else {
			a.queue.Add(key)
		}
	}
	m.scheduled = true
}

// mark records activity now and returns now. a.mu is held.
func (a *Activity) mark(m *activity) time.Time {
	now := a.clock.Now()
	if now.After(m.seen) {
		m.seen = now
	}
	return now
}

// model returns key's entry, creating it. a.mu is held.
func (a *Activity) model(key Key) *activity {
	m := a.models[key]
	if m == nil {
		m = &activity{}
		a.models[key] = m
	}
	return m
}

// tick keeps models with requests in flight busy, and forgets the ones idle for two periods.
func (a *Activity) tick() {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	for key, m := range a.models {
		switch {
		case m.inflight > 0:
			a.see(key, m)
		case !m.scheduled && m.cold == nil && now.Sub(m.seen) > 2*a.opts.RefreshPeriod:
			delete(a.models, key)
		}
	}
}

// Run writes until ctx ends, with the configured workers, and ticks once a period.
func (a *Activity) Run(ctx context.Context) {
	// The period starts before the first write can: a write seen is a period begun (the
	// tests step a fake clock once they see one).
	t := a.clock.NewTicker(a.opts.RefreshPeriod)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer a.queue.ShutDown()
	defer a.wakes.ShutDown()
	for range a.opts.Workers {
		wg.Go(func() {
			for a.processNext(ctx, a.queue, a.services) {
			}
		})
	}
	for range a.opts.WakeWorkers {
		wg.Go(func() {
			for a.processNext(ctx, a.wakes, a.wakeServices) {
			}
		})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			a.tick()
		}
	}
}

// processNext writes one model of q through services and turns the outcome into q's behaviour.
func (a *Activity) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[Key], services corev1client.ServicesGetter) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := a.write(ctx, key, services)
	switch {
	case err == nil:
		q.Forget(key)
	case apierrors.IsNotFound(err):
		// No Service (yet, or any more): its model's reconcile writes one, and the next request
		// writes again.
		a.opts.Metrics.wrote(WriteNotFound)
		klog.V(2).InfoS("No Service for a model's activity", "model", key.String())
		q.Forget(key)
	case q.NumRequeues(key) < a.opts.MaxRetries:
		a.opts.Metrics.wrote(WriteError)
		if q == a.queue {
			a.mu.Lock()
			a.model(key).scheduled = true
			a.mu.Unlock()
		}
		q.AddRateLimited(key)
	default:
		a.opts.Metrics.wrote(WriteError)
		klog.ErrorS(err, "Giving up writing a model's activity until its next request", "model", key.String())
		q.Forget(key)
	}
	return true
}

// write patches key's Service through services with what is new since its last write; nothing
// new, no call.
func (a *Activity) write(ctx context.Context, key Key, services corev1client.ServicesGetter) error {
	a.mu.Lock()
	m := a.models[key]
	if m == nil {
		a.mu.Unlock()
		return nil
	}
	// From here an arrival schedules a new write: this one may already have read past it.
	m.scheduled = false
	annotations := map[string]string{}
	last := m.seen.UTC().Truncate(time.Second)
	if last.After(m.written) {
		annotations[kinds.LastRequestAnnotation] = last.Format(time.RFC3339)
	}
	cold, coldFirstByte := m.cold, m.coldFirstByte
	if cold != nil {
		b, err := json.Marshal(cold)
		if err != nil {
			a.mu.Unlock()
			return fmt.Errorf("cold start of %s: %w", key, err)
		}
		annotations[kinds.ColdStartAnnotation] = string(b)
	}
	a.mu.Unlock()
	if len(annotations) == 0 {
		return nil
	}
	if a.opts.Owned != nil && !a.opts.Owned(key) {
		// Not the operator's Service (not made yet, or a namesake's): as if there were none.
		return apierrors.NewNotFound(corev1.Resource("services"), key.Name)
	}

	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = services.Services(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("patch Service %s: %w", key, err)
	}
	a.opts.Metrics.wrote(WriteOK)

	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := annotations[kinds.LastRequestAnnotation]; ok && last.After(m.written) {
		m.written, m.writtenAt = last, a.clock.Now()
	}
	if cold != nil {
		if m.cold == cold {
			m.cold = nil
		}
		if coldFirstByte.After(m.coldDone) {
			m.coldDone = coldFirstByte
		}
	}
	return nil
}
