package evidence

import (
	"sync"
	"time"
)

// memo remembers one read per key and when it was taken: what every kind of evidence keeps
// between syncs. Each kind decides what is still fresh (a period, a run, a pod's own read).
type memo[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]stamped[V]
}

// stamped is a read and when it was taken.
type stamped[V any] struct {
	at time.Time
	v  V
}

func (m *memo[K, V]) get(k K) (stamped[V], bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[k]
	return s, ok
}

// fresh is k's read when it was taken less than period before now.
func (m *memo[K, V]) fresh(k K, now time.Time, period time.Duration) (V, bool) {
	s, ok := m.get(k)
	if !ok || now.Sub(s.at) >= period {
		var none V
		return none, false
	}
	return s.v, true
}

// put replaces what is remembered for k.
func (m *memo[K, V]) put(k K, at time.Time, v V) {
	m.update(k, func(stamped[V], bool) stamped[V] { return stamped[V]{at: at, v: v} })
}

// update replaces k's entry with what f makes of it (ok: there was one), under the lock, for
// state that is read and written at once; it returns the new entry.
func (m *memo[K, V]) update(k K, f func(s stamped[V], ok bool) stamped[V]) stamped[V] {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[k]
	s = f(s, ok)
	if m.m == nil {
		m.m = map[K]stamped[V]{}
	}
	m.m[k] = s
	return s
}

// expire drops the entries stale reports.
func (m *memo[K, V]) expire(stale func(stamped[V]) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.m {
		if stale(s) {
			delete(m.m, k)
		}
	}
}

func (m *memo[K, V]) forget(k K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
}

func (m *memo[K, V]) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
