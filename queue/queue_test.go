package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type recorder struct {
	mu      sync.Mutex
	results []Result
}

func (r *recorder) ObserveReconcile(res string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, Result(res))
}

func (r *recorder) snapshot() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Result(nil), r.results...)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling interval, not a wait for state
	}
}

func TestOutcomes(t *testing.T) {
	cfg := Config{Name: "test", BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, QPS: 1000, Burst: 1000}
	type step struct {
		out Outcome
		err error
	}
	cases := []struct {
		name      string
		steps     []step // returned on successive calls, then Done
		wantCalls int
		want      []Result
	}{
		{"success", nil, 1, []Result{ResultSuccess}},
		{"error backs off then succeeds", []step{{err: errors.New("boom")}, {err: errors.New("boom")}}, 3, []Result{ResultError, ResultError, ResultSuccess}},
		{"requeue after a delay is a success", []step{{out: After(2 * time.Millisecond)}}, 2, []Result{ResultRequeueAfter, ResultSuccess}},
		{"requeue with backoff is a success", []step{{out: Backoff()}}, 2, []Result{ResultRequeue, ResultSuccess}},
		{"an error wins over a requeue", []step{{out: After(time.Hour), err: errors.New("boom")}}, 2, []Result{ResultError, ResultSuccess}},
		{"permanent is not retried", []step{{err: Permanent(errors.New("bad spec"))}}, 1, []Result{ResultPermanent}},
		{"panic is an error", []step{{err: errPanic}}, 2, []Result{ResultError, ResultSuccess}},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			q := New(cfg, rec)
			var mu sync.Mutex
			calls := 0
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				q.Run(ctx, 2, func(_ context.Context, k Key) (Outcome, error) {
					mu.Lock()
					defer mu.Unlock()
					calls++
					if calls <= len(c.steps) {
						s := c.steps[calls-1]
						if s.err == errPanic {
							panic("handler bug")
						}
						return s.out, s.err
					}
					return Done(), nil
				})
				close(done)
			}()
			q.Add(Key{"ns", "a"})
			eventually(t, "all outcomes", func() bool { return len(rec.snapshot()) >= len(c.want) })
			cancel()
			<-done
			if got := rec.snapshot(); len(got) != len(c.want) || calls != c.wantCalls {
				t.Fatalf("calls %d results %v, want %d %v", calls, got, c.wantCalls, c.want)
			} else {
				for i := range got {
					if got[i] != c.want[i] {
						t.Fatalf("results %v, want %v", got, c.want)
					}
				}
			}
			if last := c.want[len(c.want)-1]; (last == ResultSuccess || last == ResultPermanent) && q.q.NumRequeues(Key{"ns", "a"}) != 0 {
				t.Fatalf("%s must forget the key and not requeue it", last)
			}
		})
	}
}

var errPanic = errors.New("panic sentinel")

func TestDuplicatesCollapse(t *testing.T) {
	q := New(DefaultConfig("dup"), nil)
	for i := 0; i < 100; i++ {
		q.Add(Key{"ns", "a"})
	}
	q.Add(Key{"ns", "b"})
	if q.Len() != 2 {
		t.Fatalf("want 2 queued keys, got %d", q.Len())
	}
	q.ShutDown()
}

func TestBackoffGrowsAndCaps(t *testing.T) {
	cfg := Config{Name: "b", BaseDelay: 10 * time.Millisecond, MaxDelay: 80 * time.Millisecond, QPS: 1e6, Burst: 1e6}
	var got []time.Duration
	k := Key{"ns", "x"}
	limiter := limiterOf(cfg)
	for i := 0; i < 6; i++ {
		got = append(got, limiter.When(k))
	}
	want := []time.Duration{10, 20, 40, 80, 80, 80}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	limiter.Forget(k)
	if d := limiter.When(k); d != 10*time.Millisecond {
		t.Fatalf("after Forget the delay restarts at base, got %v", d)
	}
}
