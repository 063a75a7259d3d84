package podmetrics

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// limits are the reads that may be in flight at once. Pods that answered their last attempt
// share one pool (reading and parsing cost the adapter CPU); pods that have not (new, or
// failed) share another, larger one, since a read that hangs costs a connection and a
// goroutine, nothing more. Within each pool a namespace has its own bound, so one tenant's
// pods cannot hold every slot.
type limits struct {
	total, namespace, suspect, namespaceSuspect int
}

// suspectFactor sizes the pool for pods yet to answer against --scrape-concurrency.
const suspectFactor = 4

// limitsOf derives the bounds: a namespace holds at most half of a pool unless told.
func limitsOf(concurrency, namespace int) limits {
	if namespace <= 0 {
		namespace = max(1, concurrency/2)
	}
	namespace = min(namespace, concurrency)
	return limits{total: concurrency, namespace: namespace, suspect: suspectFactor * concurrency, namespaceSuspect: namespace}
}

// class orders pods for reading: within the pool for pods yet to answer, a new pod goes
// before one that failed, so a crowd of silent pods never delays a new model pod's first read.
type class int

const (
	answered class = iota
	fresh          // never attempted
	failed         // its last attempt failed
)

// candidate is one pod as pick sees it.
type candidate struct {
	uid       types.UID
	namespace string
	due       time.Time
	class     class
	running   bool
}

// pick chooses the reads to start now: due pods, new before failed, longest due first, as
// far as the bounds allow; and returns when the next pod not yet due comes due (zero: none).
func pick(cands []candidate, now time.Time, l limits) ([]types.UID, time.Time) {
	type pool struct {
		total int
		ns    map[string]int
	}
	pools := [2]pool{{ns: map[string]int{}}, {ns: map[string]int{}}} // answered; yet to answer
	bounds := [2][2]int{{l.total, l.namespace}, {l.suspect, l.namespaceSuspect}}
	poolOf := func(c candidate) int { return min(int(c.class), 1) }
	var due []candidate
	var wakeAt time.Time
	for _, c := range cands {
		switch {
		case c.running:
			p := &pools[poolOf(c)]
			p.total++
			p.ns[c.namespace]++
		case !c.due.After(now):
			due = append(due, c)
		case wakeAt.IsZero() || c.due.Before(wakeAt):
			wakeAt = c.due
		}
	}
	slices.SortFunc(due, func(a, b candidate) int {
		if a.class != b.class {
			return int(a.class) - int(b.class)
		}
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return strings.Compare(string(a.uid), string(b.uid))
	})
	var start []types.UID
	for _, c := range due {
		i := poolOf(c)
		p := &pools[i]
		if p.total >= bounds[i][0] || p.ns[c.namespace] >= bounds[i][1] {
			continue
		}
		start = append(start, c.uid)
		p.total++
		p.ns[c.namespace]++
	}
	return start, wakeAt
}
