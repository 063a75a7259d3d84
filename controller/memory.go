// What the controller remembers of each InferenceService between its syncs, beyond what the
// caches hold: in one map under one lock, so a deleted key is forgotten once and whole, and a
// new kind of memory is a field of remembered, forgotten with the rest.

package controller

import (
	"sync"

	"github.com/example/inferenceservice-operator/queue"
)

// memory is every key's remembered, read and written through views named for what each part
// remembers (holds, echoes, expected, attempts, namesakes, servedSets: the same struct, other methods).
type memory struct {
	mu   sync.Mutex
	keys map[queue.Key]*remembered
	// attemptsHeld counts the adapter attempts of every key, bounded by maxAttempts.
	attemptsHeld int
}

// remembered is one key's memory; a nil field or an empty map is nothing remembered.
type remembered struct {
	hold      *holdEntry             // status.go: since when this generation's status is held
	echo      *echo                  // status.go: the last status write the cache has not shown
	expect    *expectation           // expected.go: the creates the caches have not shown
	attempts  map[attemptKey]attempt // adapters.go: the adapter calls made and their back-off
	namesakes map[namesake]struct{}  // namesakes.go: children whose create found another's object
	served    map[string]podServed   // adapters.go: per pod, what its server's adapter answers listed
	canary    *canaryWindow          // canary.go: the running canary step's start and snapshots
}

// empty reports that r remembers nothing, so its key can go.
func (r *remembered) empty() bool {
	return r.hold == nil && r.echo == nil && r.expect == nil && len(r.attempts) == 0 && len(r.namesakes) == 0 && len(r.served) == 0 && r.canary == nil
}

// lookup is k's memory, nil when there is none. The caller holds mu.
func (m *memory) lookup(k queue.Key) *remembered { return m.keys[k] }

// entry is k's memory, made when there is none. The caller holds mu.
func (m *memory) entry(k queue.Key) *remembered {
	r, ok := m.keys[k]
	if !ok {
		if m.keys == nil {
			m.keys = map[queue.Key]*remembered{}
		}
		r = &remembered{}
		m.keys[k] = r
	}
	return r
}

// tidy drops k's memory once it remembers nothing. The caller holds mu.
func (m *memory) tidy(k queue.Key) {
	if r, ok := m.keys[k]; ok && r.empty() {
		delete(m.keys, k)
	}
}

// forget drops all that is remembered of k: the isvc is gone.
func (m *memory) forget(k queue.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.keys[k]; ok {
		m.attemptsHeld -= len(r.attempts)
		delete(m.keys, k)
	}
}

// The views.
func (m *memory) holds() *holds           { return (*holds)(m) }
func (m *memory) echoes() *echoes         { return (*echoes)(m) }
func (m *memory) expected() *expected     { return (*expected)(m) }
func (m *memory) attempts() *attempts     { return (*attempts)(m) }
func (m *memory) namesakes() *namesakes   { return (*namesakes)(m) }
func (m *memory) servedSets() *servedSets { return (*servedSets)(m) }
