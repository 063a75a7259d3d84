package podmetrics

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// limits are the slots reads may hold at once: in all, in one namespace, and of those, for
// pods that did not answer their last attempt (or have not answered yet).
type limits struct {
	total, namespace, suspect, namespaceSuspect int
}

// limitsOf derives the bounds: a namespace holds at most half the slots unless told, and pods
// that may not answer at most half of those, so the pods that answer always have slots left.
func limitsOf(concurrency, namespace int) limits {
	if namespace <= 0 {
		namespace = max(1, concurrency/2)
	}
	namespace = min(namespace, concurrency)
	return limits{total: concurrency, namespace: namespace, suspect: max(1, concurrency/2), namespaceSuspect: max(1, namespace/2)}
}

// candidate is one pod as pick sees it.
type candidate struct {
	uid       types.UID
	namespace string
	due       time.Time
	suspect   bool // its last attempt failed, or it has had none
	running   bool
}

// pick chooses the reads to start now: due pods, longest due first, as far as the bounds
// allow; and returns when the next pod not yet due comes due (zero: none).
func pick(cands []candidate, now time.Time, l limits) ([]types.UID, time.Time) {
	var total, suspect int
	ns := map[string]int{}
	nsSuspect := map[string]int{}
	var due []candidate
	var wakeAt time.Time
	for _, c := range cands {
		switch {
		case c.running:
			total++
			ns[c.namespace]++
			if c.suspect {
				suspect++
				nsSuspect[c.namespace]++
			}
		case !c.due.After(now):
			due = append(due, c)
		case wakeAt.IsZero() || c.due.Before(wakeAt):
			wakeAt = c.due
		}
	}
	slices.SortFunc(due, func(a, b candidate) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return strings.Compare(string(a.uid), string(b.uid))
	})
	var start []types.UID
	for _, c := range due {
		if total >= l.total {
			break
		}
		if ns[c.namespace] >= l.namespace || c.suspect && (suspect >= l.suspect || nsSuspect[c.namespace] >= l.namespaceSuspect) {
			continue
		}
		start = append(start, c.uid)
		total++
		ns[c.namespace]++
		if c.suspect {
			suspect++
			nsSuspect[c.namespace]++
		}
	}
	return start, wakeAt
}
