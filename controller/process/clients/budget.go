package clients

import (
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/flowcontrol"
)

// Budget is the controller's REST clients' request budget (--kube-api-qps, --kube-api-burst):
// one token bucket handed out in priority order: a waiting High request always gets
// the next token before any Low one, and within a class requests are served first come, first
// served.
type Budget struct {
	lim  *rate.Limiter
	qps  float32
	mu   sync.Mutex
	wait [classes][]chan struct{} // FIFO of waiters per class
	wake chan struct{}            // nudges the dispatcher when the first waiter arrives
	stop chan struct{}
	once sync.Once
	// Tokens granted in the current and the previous second, for Contended.
	second         time.Time
	thisSec, lastS int
	now            func() time.Time
}

// NewBudget starts a bucket of qps tokens per second holding at most burst.
func NewBudget(qps float32, burst int) *Budget {
	s := &Budget{lim: rate.NewLimiter(rate.Limit(qps), burst), qps: qps, wake: make(chan struct{}, 1), stop: make(chan struct{}), now: time.Now}
	go s.dispatch()
	return s
}

// Stop ends the dispatcher; waiters still queued then wait for their contexts.
func (s *Budget) Stop() { s.once.Do(func() { close(s.stop) }) }

// Class returns the limiter of one priority class, for a rest.Config's RateLimiter.
func (s *Budget) Class(p int) flowcontrol.RateLimiter { return &class{s: s, p: p} }

// dispatch takes one token per waiter and gives it to the first waiter of the best class.
func (s *Budget) dispatch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-s.stop; cancel() }()
	for {
		if !s.hasWaiters() {
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			}
		}
		if err := s.lim.Wait(ctx); err != nil {
			return
		}
		// A token taken for a waiter whose context ended meanwhile is lost: rare, and harmless.
		s.mu.Lock()
		for p := range s.wait {
			if len(s.wait[p]) > 0 {
				close(s.wait[p][0])
				s.wait[p] = s.wait[p][1:]
				s.count()
				break
			}
		}
		s.mu.Unlock()
	}
}

func (s *Budget) hasWaiters() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.wait {
		if len(s.wait[p]) > 0 {
			return true
		}
	}
	return false
}

// class is one priority's view of the bucket, as client-go wants it.
type class struct {
	s *Budget
	p int
}

// TryAccept takes a token now only if nobody of this or a better class is waiting.
func (c *class) TryAccept() bool {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for p := 0; p <= c.p; p++ {
		if len(c.s.wait[p]) > 0 {
			return false
		}
	}
	if !c.s.lim.Allow() {
		return false
	}
	c.s.count()
	return true
}

// Accept waits for a token.
func (c *class) Accept() { _ = c.Wait(context.Background()) }

// Wait queues for a token until ctx ends; a token ready at once is taken without queueing
// when no one of this or a better class waits, so an idle operator pays nothing.
func (c *class) Wait(ctx context.Context) error {
	if c.TryAccept() {
		return nil
	}
	ch := make(chan struct{})
	c.s.mu.Lock()
	c.s.wait[c.p] = append(c.s.wait[c.p], ch)
	c.s.mu.Unlock()
	select {
	case c.s.wake <- struct{}{}:
	default:
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		c.s.mu.Lock()
		defer c.s.mu.Unlock()
		if i := slices.Index(c.s.wait[c.p], ch); i >= 0 {
			c.s.wait[c.p] = slices.Delete(c.s.wait[c.p], i, i+1)
			return ctx.Err()
		}
		return nil // granted as ctx ended: the token is ours
	}
}

// Stop is a no-op: the bucket is shared; Budget.Stop ends it.
func (c *class) Stop() {}

// QPS is the shared bucket's rate.
func (c *class) QPS() float32 { return c.s.qps }

// count records one granted token; s.mu is held.
func (s *Budget) count() {
	now := s.now()
	switch d := now.Sub(s.second); {
	case d >= 2*time.Second:
		s.second, s.thisSec, s.lastS = now, 0, 0
	case d >= time.Second:
		s.second, s.thisSec, s.lastS = s.second.Add(time.Second), 0, s.thisSec
	}
	s.thisSec++
}

// Contended reports whether requests are queued, half the burst is spent, or over the last
// second or so tokens went at half the rate or more: a mass of writes is under way, and writes
// that only inform can be skipped or deferred rather than delay the ones that act.
func (s *Budget) Contended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.wait {
		if len(s.wait[p]) > 0 {
			return true
		}
	}
	recent := 0
	if d := s.now().Sub(s.second); d < time.Second {
		recent = max(s.thisSec, s.lastS)
	} else if d < 2*time.Second {
		recent = s.thisSec
	}
	return s.lim.Tokens() < max(1, float64(s.lim.Burst())/2) || float64(recent) >= max(1, float64(s.qps)/2)
}
