package recorder

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/lru"
)

// key is what makes two Events one series: client-go's eventKey without the reporting
// controller and instance, which are one recorder's constants.
type key struct {
	eventType, action, reason string
	regarding, related        corev1.ObjectReference
}

// entry is what is remembered of an Event sent: enough to name it in a series patch, not the
// Event itself.
type entry struct {
	name, namespace string
	first, last     time.Time // the Event's time; the series' last observation
	written         time.Time // when the count was last written
	count, wrote    int32     // observations; the count the API server has
	timerArmed      bool
	gone            bool // evicted or ended: a timer that fires later does nothing
}

// write is one API call to make: a create (Series nil), or a series' count, the Event created
// whole if it is gone (patchOnly: the final count of an ended series, dropped if it is gone).
type write struct {
	event     *eventsv1.Event
	patchOnly bool
	tries     int
}

// series decides, for each occurrence, what is written; it holds no client. Not safe for
// concurrent use: the Recorder holds its lock around every call.
type series struct {
	finish, refresh time.Duration
	lru             *lru.Cache
	evicted         []write // the final counts of series the LRU pushed out, taken by observe's caller
}

func newSeries(size int, finish, refresh time.Duration) *series {
	s := &series{finish: finish, refresh: refresh}
	s.lru = lru.NewWithEvictionFunc(size, func(_ lru.Key, v interface{}) {
		e := v.(*entry)
		e.gone = true
		if w, ok := e.final(); ok {
			s.evicted = append(s.evicted, w)
		}
	})
	return s
}

// final returns the write of e's count, if the API server has less.
func (e *entry) final() (write, bool) {
	if e.count <= e.wrote {
		return write{}, false
	}
	e.wrote = e.count
	return write{event: &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: e.namespace},
		Series:     &eventsv1.EventSeries{Count: e.count, LastObservedTime: metav1.MicroTime{Time: e.last}},
	}, patchOnly: true}, true
}

// observe records one occurrence of ev at now and returns what to write, and whether the
// entry needs a timer to write its final count once the series ends (the caller arms it and
// calls expire when it fires).
func (s *series) observe(ev *eventsv1.Event, now time.Time) (writes []write, arm *entry) {
	k := keyOf(ev)
	if v, ok := s.lru.Get(k); ok {
		e := v.(*entry)
		if now.Sub(e.last) < s.finish {
			e.count++
			e.last = now
			if e.count == 2 || now.Sub(e.written) >= s.refresh {
				// Named and timed as the first: a patch of its series, or the whole if it is gone.
				ev.Name, ev.Namespace, ev.EventTime = e.name, e.namespace, metav1.MicroTime{Time: e.first}
				ev.Series = &eventsv1.EventSeries{Count: e.count, LastObservedTime: metav1.MicroTime{Time: now}}
				e.wrote, e.written = e.count, now
				return s.take(write{event: ev}), nil
			}
			if !e.timerArmed {
				e.timerArmed = true
				arm = e
			}
			return s.take(), arm
		}
		s.lru.Remove(k) // over: the eviction writes its final count; a new Event follows
	}
	s.lru.Add(k, &entry{name: ev.Name, namespace: ev.Namespace, first: ev.EventTime.Time, last: now, written: now, count: 1, wrote: 1})
	return s.take(write{event: ev}), nil
}

// expire is e's timer firing at now: the series' final count once it has been quiet for the
// finish period, or how long to wait before asking again.
func (s *series) expire(e *entry, now time.Time) (writes []write, again time.Duration) {
	if e.gone {
		return nil, 0
	}
	if left := s.finish - now.Sub(e.last); left > 0 {
		return nil, left
	}
	e.timerArmed = false // still remembered: an occurrence after this starts a new Event
	if w, ok := e.final(); ok {
		writes = append(writes, w)
	}
	return writes, 0
}

// take returns ws after the writes evictions left, clearing those.
func (s *series) take(ws ...write) []write {
	out := append(s.evicted, ws...)
	s.evicted = nil
	return out
}

func keyOf(ev *eventsv1.Event) key {
	k := key{eventType: ev.Type, action: ev.Action, reason: ev.Reason, regarding: ev.Regarding}
	if ev.Related != nil {
		k.related = *ev.Related
	}
	return k
}
