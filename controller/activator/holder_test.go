package activator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var qwen = Key{Namespace: "team-a", Name: "qwen3"}

// eventually polls cond until it holds or 30 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second) // a bound for a loaded machine, not a figure
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// wakes counts Wake calls per key.
type wakes struct {
	mu sync.Mutex
	n  map[Key]int
}

func (w *wakes) wake(k Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[Key]int{}
	}
	w.n[k]++
}

func (w *wakes) of(k Key) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[k]
}

type held struct {
	i        int
	endpoint string
	release  func()
	err      error
}

// arrive starts n holds of key one after another: each is queued before the next starts, so
// arrival order is known.
func arrive(t *testing.T, h *Holder, ctx context.Context, key Key, n int) <-chan held {
	t.Helper()
	out := make(chan held, n)
	base := h.Held(key)
	for i := range n {
		go func() {
			release, ep, err := h.Hold(ctx, key)
			out <- held{i: i, endpoint: ep, release: release, err: err}
		}()
		eventually(t, fmt.Sprintf("request %d held", i), func() bool { return h.Held(key) == base+i+1 })
	}
	return out
}

func TestHoldWakesOnceAndReleasesInArrivalOrder(t *testing.T) {
	var w wakes
	h := NewHolder(Options{MaxHeld: 100, MaxWait: time.Minute, Wake: w.wake})
	start := time.Now()
	out := arrive(t, h, t.Context(), qwen, 100)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("100 arrivals took %s, want them within a second", d)
	}
	// The wake comes before any endpoint: it is what brings them.
	eventually(t, "the wake", func() bool { return w.of(qwen) > 0 })
	// One endpoint per request: each request's endpoint is its arrival index, so any other
	// release order shows.
	eps := make([]string, 100)
	for i := range eps {
		eps[i] = fmt.Sprintf("10.0.0.%d:8000", i)
	}
	h.SetEndpoints(qwen, eps)
	for range 100 {
		r := <-out
		if r.err != nil {
			t.Fatalf("request %d: %v", r.i, r.err)
		}
		if r.endpoint != eps[r.i] {
			t.Errorf("request %d got %s, want %s (released out of arrival order)", r.i, r.endpoint, eps[r.i])
		}
		r.release()
	}
	if n := h.Held(qwen); n != 0 {
		t.Fatalf("%d still held", n)
	}
	if n := w.of(qwen); n != 1 {
		t.Fatalf("%d wakes, want 1", n)
	}
}

func TestHoldRoundRobin(t *testing.T) {
	h := NewHolder(Options{MaxWait: time.Minute})
	out := arrive(t, h, t.Context(), qwen, 7)
	eps := []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"}
	h.SetEndpoints(qwen, eps)
	for range 7 {
		r := <-out
		if r.err != nil || r.endpoint != eps[r.i%3] {
			t.Errorf("request %d: %q %v, want %s", r.i, r.endpoint, r.err, eps[r.i%3])
		}
	}
	// Warm: no hold, no wait, the round-robin goes on.
	for i := 7; i < 10; i++ {
		release, ep, err := h.Hold(t.Context(), qwen)
		if err != nil || ep != eps[i%3] {
			t.Errorf("warm request %d: %q %v, want %s", i, ep, err, eps[i%3])
		}
		release()
	}
}

func TestHoldBounds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    Options
		before  int // requests already held
		reason  Reason
		atLeast time.Duration
		atMost  time.Duration
	}{
		{name: "count: the 101st is refused at once", opts: Options{MaxHeld: 100, MaxWait: time.Hour, RetryAfter: 7 * time.Second},
			before: 100, reason: ReasonQueueFull, atMost: time.Second},
		{name: "wait: refused after the wait, no hang", opts: Options{MaxHeld: 100, MaxWait: 200 * time.Millisecond, RetryAfter: 7 * time.Second},
			reason: ReasonWaitTimeout, atLeast: 200 * time.Millisecond, atMost: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHolder(tc.opts)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.before > 0 {
				arrive(t, h, ctx, qwen, tc.before)
			}
			start := time.Now()
			done := make(chan error, 1)
			go func() { _, _, err := h.Hold(t.Context(), qwen); done <- err }()
			var err error
			select {
			case err = <-done:
			case <-time.After(tc.atMost):
				t.Fatalf("Hold still waiting after %s", tc.atMost)
			}
			if d := time.Since(start); d < tc.atLeast {
				t.Errorf("refused after %s, want at least %s", d, tc.atLeast)
			}
			var r *Refused
			if !errors.As(err, &r) || r.Reason != tc.reason || r.RetryAfter != 7*time.Second {
				t.Fatalf("err %v, want Refused %s with RetryAfter 7s", err, tc.reason)
			}
			if n := h.Held(qwen); n != tc.before {
				t.Errorf("%d held after the refusal, want %d", n, tc.before)
			}
		})
	}
}

func TestCancelFreesSlot(t *testing.T) {
	var w wakes
	h := NewHolder(Options{MaxHeld: 1, MaxWait: time.Hour, Wake: w.wake})
	ctx, cancel := context.WithCancel(t.Context())
	out := arrive(t, h, ctx, qwen, 1)
	cancel()
	if r := <-out; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled hold returned %v", r.err)
	}
	if n := h.Held(qwen); n != 0 {
		t.Fatalf("%d held after the only client left", n)
	}
	// The slot is free: the next request is held, not refused as queue_full, and served.
	out = arrive(t, h, t.Context(), qwen, 1)
	h.SetEndpoints(qwen, []string{"10.0.0.1:8000"})
	if r := <-out; r.err != nil || r.endpoint != "10.0.0.1:8000" {
		t.Fatalf("next request: %q %v", r.endpoint, r.err)
	}
	// Everyone who waited for the first wake left, so the second cold start asked again.
	if n := w.of(qwen); n != 2 {
		t.Errorf("%d wakes, want 2 (a wake nobody waits for any more is asked again)", n)
	}
}

func TestWakeRearmedAtZero(t *testing.T) {
	var w wakes
	h := NewHolder(Options{MaxWait: time.Minute, Wake: w.wake})
	eps := []string{"10.0.0.1:8000"}

	out := arrive(t, h, t.Context(), qwen, 3)
	h.SetEndpoints(qwen, eps)
	for range 3 {
		(<-out).release()
	}
	// Counted once every Hold returned, so every Wake call is done.
	if n := w.of(qwen); n != 1 {
		t.Fatalf("%d wakes for 3 requests held at once, want 1", n)
	}
	release, _, err := h.Hold(t.Context(), qwen)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if n := w.of(qwen); n != 1 {
		t.Fatalf("%d wakes with the model up, want 1", n)
	}

	// Back at zero: the next held request wakes it again, once.
	h.SetEndpoints(qwen, nil)
	out = arrive(t, h, t.Context(), qwen, 3)
	h.SetEndpoints(qwen, eps)
	for range 3 {
		if r := <-out; r.err != nil {
			t.Fatal(r.err)
		}
	}
	if n := w.of(qwen); n != 2 {
		t.Fatalf("%d wakes after the model went back to zero, want 2", n)
	}
}

// Updates that are still empty during a cold start (pods created, not ready) do not wake again.
func TestWakeNotRepeatedWhileStarting(t *testing.T) {
	var w wakes
	h := NewHolder(Options{MaxWait: time.Minute, Wake: w.wake})
	out := arrive(t, h, t.Context(), qwen, 2)
	h.SetEndpoints(qwen, nil)
	h.SetEndpoints(qwen, []string{})
	out2 := arrive(t, h, t.Context(), qwen, 2)
	h.SetEndpoints(qwen, []string{"10.0.0.1:8000"})
	for range 2 {
		<-out
		<-out2
	}
	if n := w.of(qwen); n != 1 {
		t.Fatalf("%d wakes in one cold start, want 1", n)
	}
}

// With a request still in flight the model's entry stays, so the wake is re-armed by state, not
// by forgetting: after the pods vanish (a crash), and after a wake that brought nothing.
func TestWakeRearmedWithRequestInFlight(t *testing.T) {
	var w wakes
	h := NewHolder(Options{MaxWait: 200 * time.Millisecond, Wake: w.wake})
	out := arrive(t, h, t.Context(), qwen, 1)
	h.SetEndpoints(qwen, []string{"10.0.0.1:8000"})
	r := <-out
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.release() // in flight throughout

	h.SetEndpoints(qwen, nil)
	if _, _, err := h.Hold(t.Context(), qwen); err == nil {
		t.Fatal("held past the wait")
	}
	if n := w.of(qwen); n != 2 {
		t.Fatalf("%d wakes after the pods vanished, want 2", n)
	}
	if _, _, err := h.Hold(t.Context(), qwen); err == nil {
		t.Fatal("held past the wait")
	}
	if n := w.of(qwen); n != 3 {
		t.Fatalf("%d wakes after a wake that brought nothing, want 3", n)
	}
}

func TestWaitTimeoutRearmsWake(t *testing.T) {
	var w wakes
	h := NewHolder(Options{MaxWait: 200 * time.Millisecond, Wake: w.wake})
	if _, _, err := h.Hold(t.Context(), qwen); err == nil {
		t.Fatal("held past the wait")
	}
	// The first wake was lost (nothing came): the next request must not wait on it forever.
	if _, _, err := h.Hold(t.Context(), qwen); err == nil {
		t.Fatal("held past the wait")
	}
	if n := w.of(qwen); n != 2 {
		t.Fatalf("%d wakes, want 2", n)
	}
}

// Requests arriving while the endpoints come and go are held or served, never lost.
func TestBurstWhileEndpointsFlap(t *testing.T) {
	var w wakes
	h := NewHolder(Options{MaxHeld: 200, MaxWait: time.Minute, Wake: w.wake})
	eps := []string{"10.0.0.1:8000", "10.0.0.2:8000"}
	h.SetEndpoints(qwen, eps)

	const n = 200
	var served atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			release, ep, err := h.Hold(t.Context(), qwen)
			if err != nil {
				errs <- err
				return
			}
			if ep != eps[0] && ep != eps[1] {
				errs <- fmt.Errorf("endpoint %q", ep)
			}
			served.Add(1)
			release()
		})
	}
	for i := range 50 {
		if i%2 == 0 {
			h.SetEndpoints(qwen, nil)
		} else {
			h.SetEndpoints(qwen, eps)
		}
	}
	// Whatever is still held when the flapping stops is served by the last list.
	h.SetEndpoints(qwen, nil)
	h.SetEndpoints(qwen, eps)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := served.Load(); got != n {
		t.Fatalf("%d of %d served", got, n)
	}
	if n := h.Held(qwen); n != 0 {
		t.Fatalf("%d still held", n)
	}
}

// A burst that comes after the endpoints went away again is held and served by the next ones.
func TestBurstAfterEndpointsDisappear(t *testing.T) {
	var w wakes
	h := NewHolder(Options{MaxWait: time.Minute, Wake: w.wake})
	h.SetEndpoints(qwen, []string{"10.0.0.1:8000"})
	h.SetEndpoints(qwen, nil)
	out := arrive(t, h, t.Context(), qwen, 20)
	h.SetEndpoints(qwen, []string{"10.0.0.2:8000"})
	for range 20 {
		if r := <-out; r.err != nil || r.endpoint != "10.0.0.2:8000" {
			t.Fatalf("request %d: %q %v", r.i, r.endpoint, r.err)
		}
	}
	if n := w.of(qwen); n != 1 {
		t.Fatalf("%d wakes, want 1", n)
	}
}

// A model that is down and idle leaves no entry behind, and a request in flight keeps it.
func TestIdleModelForgotten(t *testing.T) {
	h := NewHolder(Options{})
	h.SetEndpoints(qwen, []string{"10.0.0.1:8000"})
	release, _, err := h.Hold(t.Context(), qwen)
	if err != nil {
		t.Fatal(err)
	}
	h.SetEndpoints(qwen, nil)
	if n := h.Inflight(qwen); n != 1 {
		t.Fatalf("%d in flight, want 1", n)
	}
	release()
	release() // twice is once
	if n := h.Inflight(qwen); n != 0 {
		t.Fatalf("%d in flight after release, want 0", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.models) != 0 {
		t.Fatalf("%d entries left for an idle model at zero", len(h.models))
	}
}

// A client leaving just as its endpoint comes does not leave a request counted in flight.
func TestCancelRacingRelease(t *testing.T) {
	h := NewHolder(Options{MaxWait: time.Minute})
	for i := range 200 {
		ctx, cancel := context.WithCancel(t.Context())
		out := arrive(t, h, ctx, qwen, 1)
		// The endpoint is usually sent before the woken Hold takes the lock to leave the queue.
		cancel()
		h.SetEndpoints(qwen, []string{"10.0.0.1:8000"})
		if r := <-out; r.err == nil {
			r.release()
		}
		h.SetEndpoints(qwen, nil)
		if n := h.Inflight(qwen); n != 0 {
			t.Fatalf("round %d: %d in flight after every request ended", i, n)
		}
	}
}
