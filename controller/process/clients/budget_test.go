package clients

import (
	"context"
	"testing"
	"time"
)

// queued polls until n requests of class p wait; the dispatcher's order is what is tested,
// not its timing.
func queued(t *testing.T, s *Budget, p, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got := len(s.wait[p])
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("class %d: %d waiting, want %d", p, got, n)
		}
		time.Sleep(time.Millisecond) // poll interval
	}
}

func TestHighBeforeLow(t *testing.T) {
	s := NewBudget(20, 1)
	defer s.Stop()
	high, low := s.Class(High), s.Class(Low)
	if !low.TryAccept() {
		t.Fatal("an idle bucket refused its first token")
	}
	order := make(chan string, 3)
	wait := func(name string, c interface{ Wait(context.Context) error }) {
		if err := c.Wait(context.Background()); err != nil {
			t.Error(err)
		}
		order <- name
	}
	go wait("low1", low)
	queued(t, s, Low, 1)
	go wait("low2", low)
	queued(t, s, Low, 2)
	go wait("high", high)
	for _, want := range []string{"high", "low1", "low2"} {
		if got := <-order; got != want {
			t.Fatalf("served %s, want %s", got, want)
		}
	}
}

func TestTryAcceptYieldsToWaiters(t *testing.T) {
	s := NewBudget(20, 1)
	defer s.Stop()
	high, low := s.Class(High), s.Class(Low)
	if !high.TryAccept() {
		t.Fatal("an idle bucket refused its first token")
	}
	done := make(chan struct{})
	go func() { _ = high.Wait(context.Background()); close(done) }()
	queued(t, s, High, 1)
	if low.TryAccept() {
		t.Fatal("Low took a token while High waited")
	}
	<-done
}

func TestWaitCanceled(t *testing.T) {
	s := NewBudget(0.001, 1)
	defer s.Stop()
	low := s.Class(Low)
	low.Accept()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { errc <- low.Wait(ctx) }()
	queued(t, s, Low, 1)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("Wait returned nil after its context ended without a token")
	}
	queued(t, s, Low, 0)
}

func TestContended(t *testing.T) {
	s := NewBudget(0.001, 1)
	defer s.Stop()
	if s.Contended() {
		t.Fatal("an idle bucket is contended")
	}
	s.Class(High).Accept()
	if !s.Contended() {
		t.Fatal("an empty bucket is not contended")
	}
}

func TestContendedByRate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	s := NewBudget(4, 100) // a deep bucket: only the rate can say contended
	defer s.Stop()
	s.now = func() time.Time { return now }
	low := s.Class(Low)
	low.Accept()
	if s.Contended() {
		t.Fatal("one token a second is not half of 4")
	}
	low.Accept()
	if !s.Contended() {
		t.Fatal("two tokens within a second are half of 4")
	}
	now = t0.Add(1500 * time.Millisecond)
	if !s.Contended() {
		t.Fatal("the previous second's rate is forgotten too soon")
	}
	now = t0.Add(2500 * time.Millisecond)
	if s.Contended() {
		t.Fatal("still contended two quiet seconds later")
	}
}
