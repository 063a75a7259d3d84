// Package activator holds requests for models scaled to zero until a pod serves them (issue 35):
// beside the pipeline, in the request path while a model has no ready endpoint. The Holder keeps a
// bounded FIFO per model and asks for a scale-up once per cold start; the Handler maps a request
// to its model, holds it, and proxies it to the endpoint it is given. Nothing here talks to the
// API server: a wake callback and SetEndpoints are the seams the Kubernetes side will fill.
package activator

import (
	"context"
	"sync"
	"time"
)

// Key names a model: the namespace and name of its InferenceService.
type Key struct {
	Namespace, Name string
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Defaults.
const (
	// DefaultMaxHeld bounds the requests held per model: a burst beyond it is told to retry
	// rather than pinning goroutines and client connections on a model that is not up yet.
	DefaultMaxHeld = 100
	// DefaultMaxWait bounds one request's hold: a vLLM cold start (pod scheduled, image and
	// weights read, CUDA graphs captured) is often one to two minutes on a warm node.
	DefaultMaxWait = 3 * time.Minute
	// DefaultRetryAfter is the Retry-After told to refused clients.
	DefaultRetryAfter = 10 * time.Second
	// DefaultMaxHeldTotal and DefaultMaxHeldPerNamespace bound the requests held across models,
	// so keys of a stranger's own models cannot pile up past the memory limit (budget.go has
	// the arithmetic) nor take every slot from the other namespaces.
	DefaultMaxHeldTotal        = 1000
	DefaultMaxHeldPerNamespace = 250
)

// Options configure a Holder; zero fields take the defaults.
type Options struct {
	// MaxHeld bounds the requests held at once per model.
	MaxHeld int
	// MaxHeldTotal bounds the requests held at once in all; MaxHeldPerNamespace per namespace.
	MaxHeldTotal, MaxHeldPerNamespace int
	// MaxWait bounds how long one request is held; the gateway's request timeout must exceed it.
	MaxWait time.Duration
	// RetryAfter is carried by every Refused.
	RetryAfter time.Duration
	// Wake asks for a model's scale-up. It runs on the first held request's goroutine, once per
	// cold start, so it must only hand the key on (enqueue it), never wait for the pods.
	Wake func(Key)
	// Metrics, if set, receives the held gauge, refusals and wakes.
	Metrics *Metrics
}

// Holder holds requests per model until the model has a ready endpoint. Safe for concurrent use.
type Holder struct {
	opts Options

	mu     sync.Mutex
	models map[Key]*model
	// held counts the requests held in all, heldNS per namespace (entries only while non-zero).
	held   int
	heldNS map[string]int
}

// model is what the Holder knows of one model; an entry lives while it has endpoints, held
// requests or requests in flight, so a model that is gone and idle costs nothing.
type model struct {
	endpoints []string
	// next is the round-robin cursor over endpoints.
	next int
	// held is the FIFO of waiting requests; non-empty only while endpoints is empty.
	held []*waiter
	// inflight counts requests given an endpoint and not yet released.
	inflight int
	// waking is set once Wake was called for this cold start; cleared when endpoints arrive
	// (the model back at zero later is a new cold start) or when every held request left
	// without them, so a lost wake is asked for again.
	waking bool
}

// waiter is one held request; ready receives its endpoint (buffered: SetEndpoints never blocks).
type waiter struct {
	ready chan string
}

// NewHolder returns a Holder with opts' zero fields defaulted.
func NewHolder(opts Options) *Holder {
	defaultIfUnset(&opts.MaxHeld, DefaultMaxHeld)
	defaultIfUnset(&opts.MaxWait, DefaultMaxWait)
	defaultIfUnset(&opts.RetryAfter, DefaultRetryAfter)
	defaultIfUnset(&opts.MaxHeldTotal, DefaultMaxHeldTotal)
	defaultIfUnset(&opts.MaxHeldPerNamespace, DefaultMaxHeldPerNamespace)
	return &Holder{opts: opts, models: map[Key]*model{}, heldNS: map[string]int{}}
}

// RetryAfter is the wait told to refused clients.
func (h *Holder) RetryAfter() time.Duration { return h.opts.RetryAfter }

// lease is a request's claim on an endpoint; cold says it was held (the model had none).
type lease struct {
	endpoint string
	cold     bool
	release  func()
}

// Hold returns an endpoint of key's model, waiting while it has none. It returns a *Refused when
// the model already holds MaxHeld requests (at once) or none came within MaxWait, and ctx's error
// when ctx ends first. On success the caller must call release once its request is done.
func (h *Holder) Hold(ctx context.Context, key Key) (release func(), endpoint string, err error) {
	l, err := h.hold(ctx, key)
	if err != nil {
		return nil, "", err
	}
	return l.release, l.endpoint, nil
}

func (h *Holder) hold(ctx context.Context, key Key) (lease, error) {
	// The deadline is taken at arrival, so a slow Wake does not lengthen the hold.
	timer := time.NewTimer(h.opts.MaxWait)
	defer timer.Stop()

	h.mu.Lock()
	m := h.model(key)
	if len(m.endpoints) > 0 {
		ep := m.pick()
		h.mu.Unlock()
		return lease{endpoint: ep, release: h.releaser(key)}, nil
	}
	if r := h.full(key, m); r != nil {
		h.forgetIfIdle(key, m)
		h.mu.Unlock()
		h.opts.Metrics.refused(r.Reason)
		return lease{}, r
	}
	w := &waiter{ready: make(chan string, 1)}
	m.held = append(m.held, w)
	h.count(key, 1)
	h.opts.Metrics.setHeld(key, len(m.held))
	wake := !m.waking
	m.waking = true
	h.mu.Unlock()

	if wake {
		h.opts.Metrics.woke()
		if h.opts.Wake != nil {
			h.opts.Wake(key)
		}
	}

	select {
	case ep := <-w.ready:
		return lease{endpoint: ep, cold: true, release: h.releaser(key)}, nil
	case <-timer.C:
		if ep, ok := h.leave(key, w); ok {
			// Released as the wait ran out: the endpoint is there, so serve rather than refuse.
			return lease{endpoint: ep, cold: true, release: h.releaser(key)}, nil
		}
		h.opts.Metrics.refused(ReasonWaitTimeout)
		return lease{}, &Refused{Key: key, Reason: ReasonWaitTimeout, RetryAfter: h.opts.RetryAfter, MaxWait: h.opts.MaxWait}
	case <-ctx.Done():
		if _, ok := h.leave(key, w); ok {
			// Released as the client went: give the in-flight count back.
			h.releaser(key)()
		}
		return lease{}, ctx.Err()
	}
}

// leave takes w out of key's queue; if SetEndpoints released it first, it returns its endpoint.
func (h *Holder) leave(key Key, w *waiter) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.models[key]
	if m != nil {
		for i, x := range m.held {
			if x == w {
				m.held = append(m.held[:i], m.held[i+1:]...)
				h.count(key, -1)
				h.opts.Metrics.setHeld(key, len(m.held))
				if len(m.held) == 0 && len(m.endpoints) == 0 {
					m.waking = false
				}
				h.forgetIfIdle(key, m)
				return "", false
			}
		}
	}
	// Not queued any more, so SetEndpoints sent the endpoint (it removes and sends under mu).
	return <-w.ready, true
}

// SetEndpoints sets the ready endpoints (host:port) of key's model, as a watch of its pods sees
// them. When there are any, the held requests are released in arrival order, round-robin over
// endpoints; an empty list puts the model back at zero, so the next held request wakes it again.
func (h *Holder) SetEndpoints(key Key, endpoints []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.model(key)
	if len(m.endpoints) == 0 {
		// A new list after zero starts its round-robin at its first endpoint.
		m.next = 0
	}
	m.endpoints = append([]string(nil), endpoints...)
	if len(m.endpoints) == 0 {
		// waking stays: an update that is still empty (a pod created, not ready) is the wake
		// under way, not a new cold start.
		h.forgetIfIdle(key, m)
		return
	}
	// Up: the next time the list is empty is a new cold start, which wakes again.
	m.waking = false
	for _, w := range m.held {
		w.ready <- m.pick()
	}
	if len(m.held) > 0 {
		h.count(key, -len(m.held))
		m.held = nil
		h.opts.Metrics.setHeld(key, 0)
	}
}

// full returns the refusal of one more request held for key, nil while every bound has room.
// h.mu is held.
func (h *Holder) full(key Key, m *model) *Refused {
	r := &Refused{Key: key, RetryAfter: h.opts.RetryAfter}
	switch {
	case len(m.held) >= h.opts.MaxHeld:
		r.Reason, r.MaxHeld = ReasonQueueFull, h.opts.MaxHeld
	case h.heldNS[key.Namespace] >= h.opts.MaxHeldPerNamespace:
		r.Reason, r.MaxHeld = ReasonHeldNamespace, h.opts.MaxHeldPerNamespace
	case h.held >= h.opts.MaxHeldTotal:
		r.Reason, r.MaxHeld = ReasonHeldTotal, h.opts.MaxHeldTotal
	default:
		return nil
	}
	return r
}

// count adds n to the held counts of key's namespace and of all. h.mu is held.
func (h *Holder) count(key Key, n int) {
	h.held += n
	if h.heldNS[key.Namespace] += n; h.heldNS[key.Namespace] <= 0 {
		delete(h.heldNS, key.Namespace)
	}
}

// HeldTotal is the number of requests held now, of all models.
func (h *Holder) HeldTotal() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// Held is the number of requests key's model holds now.
func (h *Holder) Held(key Key) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.models[key]; m != nil {
		return len(m.held)
	}
	return 0
}

// Inflight is the number of key's requests given an endpoint and not yet released: what an idle
// scale-down must wait for.
func (h *Holder) Inflight(key Key) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.models[key]; m != nil {
		return m.inflight
	}
	return 0
}

// model returns key's entry, creating it. h.mu is held.
func (h *Holder) model(key Key) *model {
	m := h.models[key]
	if m == nil {
		m = &model{}
		h.models[key] = m
	}
	return m
}

// pick returns the next endpoint round-robin and counts the request in flight. h.mu is held.
func (m *model) pick() string {
	ep := m.endpoints[m.next%len(m.endpoints)]
	m.next = (m.next + 1) % len(m.endpoints)
	m.inflight++
	return ep
}

// releaser returns the once-only release of one in-flight request of key.
func (h *Holder) releaser(key Key) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if m := h.models[key]; m != nil {
				m.inflight--
				h.forgetIfIdle(key, m)
			}
		})
	}
}

// forgetIfIdle drops key's entry when nothing refers to it. h.mu is held.
func (h *Holder) forgetIfIdle(key Key, m *model) {
	if len(m.endpoints) == 0 && len(m.held) == 0 && m.inflight == 0 {
		delete(h.models, key)
		h.opts.Metrics.forget(key)
	}
}

// defaultIfUnset sets an option left zero (or negative) to its default.
func defaultIfUnset[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
