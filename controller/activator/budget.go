package activator

// The memory a stranger can make the activator hold, bounded (issue 49): the bodies read ahead
// of the hold (Budget) and the requests held (Holder's MaxHeldTotal, MaxHeldPerNamespace).
//
// Sized against the Deployment's 256Mi memory limit, with GOMEMLIMIT=192MiB set beside it so
// the collector works harder before the heap nears the limit (without it GOGC=100 lets the
// heap grow to twice what is live):
//
//	~40 MiB  the runtime and the caches (stripped pods, InferenceServices and Services)
//	 48 MiB  bodies read ahead, all namespaces (DefaultMaxBufferedBytes); 16 MiB per namespace
//	~40 MiB  1,000 held requests (DefaultMaxHeldTotal; 250 per namespace) at ~40 KiB each: the
//	         connection's goroutine stack (8-32 KiB), its bufio reader and writer (4 KiB each),
//	         the request, the waiter and its timer
//	-------
//	~128 MiB live at the bounds, under the 192 MiB the collector aims below, 64 MiB short of
//	         the limit for stacks, fragmentation and the requests in flight to warm models.
//
// One namespace can take a quarter of each, so three tenants at their bounds leave a fourth's
// cold start room.

import (
	"sync"
)

// Buffer bounds.
const (
	DefaultMaxBufferedBytes        = 48 << 20
	DefaultMaxBufferedPerNamespace = 16 << 20
)

// Budget counts the bytes of request bodies kept in memory, in all and per namespace. Safe for
// concurrent use; a nil *Budget bounds nothing.
type Budget struct {
	max, perNamespace int64

	mu   sync.Mutex
	used int64
	byNS map[string]int64
}

// NewBudget returns a Budget of max bytes in all and perNamespace bytes per namespace; zero
// takes the defaults.
func NewBudget(max, perNamespace int64) *Budget {
	if max <= 0 {
		max = DefaultMaxBufferedBytes
	}
	if perNamespace <= 0 {
		perNamespace = DefaultMaxBufferedPerNamespace
	}
	return &Budget{max: max, perNamespace: perNamespace, byNS: map[string]int64{}}
}

// take claims n bytes for ns; when that would pass a bound it claims nothing and says which.
func (b *Budget) take(ns string, n int64) (Reason, int64, bool) {
	if b == nil {
		return "", 0, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return ReasonBufferTotal, b.max, false
	}
	if b.byNS[ns]+n > b.perNamespace {
		return ReasonBufferNamespace, b.perNamespace, false
	}
	b.used += n
	b.byNS[ns] += n
	return "", 0, true
}

// give returns n bytes of ns.
func (b *Budget) give(ns string, n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.byNS[ns] -= n; b.byNS[ns] <= 0 {
		delete(b.byNS, ns)
	}
}

// Used is the bytes claimed now, in all and for ns.
func (b *Budget) Used(ns string) (total, namespace int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.byNS[ns]
}
