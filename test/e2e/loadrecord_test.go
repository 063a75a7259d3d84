package e2e

import "sync"

// loadRecord is what a load's workers were answered, kept until the load is ended: the
// workers add to it and leave when stop closes.
type loadRecord[R any] struct {
	mu      sync.Mutex
	results []R
	stop    chan struct{}
	stopped sync.Once
	done    sync.WaitGroup
}

func newLoadRecord[R any]() *loadRecord[R] { return &loadRecord[R]{stop: make(chan struct{})} }

func (l *loadRecord[R]) add(r R) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.results = append(l.results, r)
}

// end stops the workers, waits for them, and returns every result.
func (l *loadRecord[R]) end() []R {
	l.stopped.Do(func() { close(l.stop) })
	l.done.Wait()
	return l.snapshot()
}

// snapshot is the results so far.
func (l *loadRecord[R]) snapshot() []R {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]R(nil), l.results...)
}
