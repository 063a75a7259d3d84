// Creates in flight: the children this operator asked the API server to create that its caches
// have not shown yet (the ReplicaSet controller's expectations, counted per InferenceService).

package controller

import (
	"time"

	"github.com/example/inferenceservice-operator/queue"
)

// expectTTL bounds the wait for a create's informer event (a watch that lost it, an object
// deleted at once): the sync then decides from the caches as they are.
const expectTTL = 30 * time.Second

// expected counts, per isvc, the creates sent whose objects its caches have not added yet. A
// sync in between (the isvc's own status write wakes it first) would find the child missing,
// create it again and be refused (AlreadyExists), and decide a status from a world without it.
// A view of the controller's memory.
type expected memory

type expectation struct {
	creates int
	since   time.Time // when the oldest create still unseen was sent
}

// create is called before a child's create is sent.
func (e *expected) create(k queue.Key, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := (*memory)(e).entry(k)
	if r.expect == nil {
		r.expect = &expectation{since: now}
	}
	r.expect.creates++
}

// observed is called when the caches add a child of k, and when a create fails (no object
// will be added).
func (e *expected) observed(k queue.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := (*memory)(e).lookup(k); r != nil && r.expect != nil {
		if r.expect.creates--; r.expect.creates <= 0 {
			r.expect = nil
			(*memory)(e).tidy(k)
		}
	}
}

// unmet reports whether k has creates the caches have not shown, and how long to wait for
// them at most; past expectTTL it gives up on them.
func (e *expected) unmet(k queue.Key, now time.Time) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := (*memory)(e).lookup(k)
	if r == nil || r.expect == nil {
		return 0, false
	}
	if left := expectTTL - now.Sub(r.expect.since); left > 0 {
		return left, true
	}
	r.expect = nil
	(*memory)(e).tidy(k)
	return 0, false
}
