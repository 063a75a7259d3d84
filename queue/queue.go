// Package queue is step 2 of the pipeline (informers -> queue -> controller sync -> reconcile
// -> controller apply), where events become work: the key type, the rate-limited workqueue with
// per-item exponential backoff and an overall bucket, the worker loop, and the one place
// (handle) that turns a reconcile's Outcome or error into queue behaviour.
package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Key names one InferenceService.
type Key struct {
	Namespace, Name string
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Config sets the retry policy.
type Config struct {
	// Name labels the queue's metrics.
	Name string
	// BaseDelay is the first per-item retry delay; it doubles on each failure.
	BaseDelay time.Duration
	// MaxDelay caps the per-item delay.
	MaxDelay time.Duration
	// QPS and Burst bound retries across all items, so a mass failure cannot hammer the API.
	QPS   float64
	Burst int
	// MetricsProvider receives client-go's workqueue metrics; nil means none.
	MetricsProvider workqueue.MetricsProvider
}

// DefaultConfig is client-go's default controller rate limiter (5 ms doubling per item, 10
// QPS and a burst of 100 overall), with the per-item cap lowered from client-go's 1000 s to 5 m
// so a key that failed many times is retried within minutes of the cause going away.
func DefaultConfig(name string) Config {
	return Config{Name: name, BaseDelay: 5 * time.Millisecond, MaxDelay: 5 * time.Minute, QPS: 10, Burst: 100}
}

// Observer is told each reconcile's outcome; metrics implement it.
type Observer interface {
	ObserveReconcile(result string, d time.Duration)
}

// Result classifies one reconcile's outcome, as controller-runtime's result label does.
type Result string

// Outcomes a reconcile can have.
const (
	ResultSuccess      Result = "success"
	ResultRequeue      Result = "requeue"       // succeeded, rechecked with the key's backoff
	ResultRequeueAfter Result = "requeue_after" // succeeded, rechecked after a chosen delay
	ResultError        Result = "error"
	ResultPermanent    Result = "permanent_error"
)

// Results lists every Result, for metrics that should exist from the start.
var Results = []Result{ResultSuccess, ResultRequeue, ResultRequeueAfter, ResultError, ResultPermanent}

// Outcome is what a reconcile that did not fail asks of the queue. The zero Outcome is done:
// nothing to recheck until an event comes.
type Outcome struct {
	// RequeueAfter rechecks the key after this long: the reconcile acted, or held back a
	// status, and waits for the effect.
	RequeueAfter time.Duration
	// Requeue rechecks the key with its exponential backoff: the reconcile waits on something
	// outside the operator that no event announces (reported in status).
	Requeue bool
}

// Done is the outcome of a converged reconcile.
func Done() Outcome { return Outcome{} }

// After rechecks the key after d.
func After(d time.Duration) Outcome { return Outcome{RequeueAfter: d} }

// Backoff rechecks the key with its exponential backoff.
func Backoff() Outcome { return Outcome{Requeue: true} }

// Queue is a typed rate-limited workqueue of Keys with its worker loop.
type Queue struct {
	q        workqueue.TypedRateLimitingInterface[Key]
	observer Observer
	now      func() time.Time
}

// New builds the queue: the per-item exponential backoff and the overall token bucket are
// combined with max-of, so an item waits for whichever is longer.
func New(cfg Config, observer Observer) *Queue {
	return &Queue{
		q: workqueue.NewTypedRateLimitingQueueWithConfig(limiterOf(cfg), workqueue.TypedRateLimitingQueueConfig[Key]{
			Name: cfg.Name, MetricsProvider: cfg.MetricsProvider,
		}),
		observer: observer,
		now:      time.Now,
	}
}

func limiterOf(cfg Config) workqueue.TypedRateLimiter[Key] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[Key](cfg.BaseDelay, cfg.MaxDelay),
		&workqueue.TypedBucketRateLimiter[Key]{Limiter: rate.NewLimiter(rate.Limit(cfg.QPS), cfg.Burst)},
	)
}

// Add enqueues a key now; duplicates of a queued key collapse into one.
func (q *Queue) Add(k Key) { q.q.Add(k) }

// Len is the number of keys waiting.
func (q *Queue) Len() int { return q.q.Len() }

// ShutDown stops handing out keys; workers finish the key they hold (Run waits for them).
func (q *Queue) ShutDown() { q.q.ShutDown() }

// Handler reconciles one key: an Outcome when it did not fail, else an error (a
// PermanentError stops retrying).
type Handler func(ctx context.Context, k Key) (Outcome, error)

// Run starts workers and blocks until ctx is done and in-flight reconciles have finished.
func (q *Queue) Run(ctx context.Context, workers int, h Handler) {
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q.processNext(ctx, h) {
			}
		}()
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

func (q *Queue) processNext(ctx context.Context, h Handler) bool {
	k, shutdown := q.q.Get()
	if shutdown {
		return false
	}
	defer q.q.Done(k)
	start := q.now()
	// In-flight work gets its own context so a SIGTERM lets it finish rather than fail midway.
	out, err := func() (out Outcome, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return h(context.WithoutCancel(ctx), k)
	}()
	result := q.handle(k, out, err)
	if q.observer != nil {
		q.observer.ObserveReconcile(string(result), q.now().Sub(start))
	}
	return true
}

// handle is the one place a reconcile's outcome is turned into queue behaviour.
func (q *Queue) handle(k Key, out Outcome, err error) Result {
	var perm *PermanentError
	switch {
	case errors.As(err, &perm):
		q.q.Forget(k)
		klog.InfoS("Reconcile failed permanently; waiting for a change", "key", k, "err", err)
		return ResultPermanent
	case err != nil:
		q.q.AddRateLimited(k)
		runtime.HandleErrorWithContext(context.Background(), err, "Reconcile failed; retrying with backoff", "key", k, "retries", q.q.NumRequeues(k))
		return ResultError
	case out.RequeueAfter > 0:
		q.q.Forget(k) // it succeeded: a later failure backs off from the start
		q.q.AddAfter(k, out.RequeueAfter)
		return ResultRequeueAfter
	case out.Requeue:
		q.q.AddRateLimited(k)
		return ResultRequeue
	default:
		q.q.Forget(k)
		return ResultSuccess
	}
}

// PermanentError means retrying cannot help until the object changes; the caller has already
// reported it in status and an Event.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as not retryable.
func Permanent(err error) error { return &PermanentError{Err: err} }
