package recorder

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)

func occurrence(name, reason string, at time.Time) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", name, at.UnixNano()), Namespace: "team-a"},
		EventTime:  metav1.MicroTime{Time: at}, Type: corev1.EventTypeWarning, Reason: reason, Action: "Reconcile",
		Regarding: corev1.ObjectReference{Kind: "InferenceService", Namespace: "team-a", Name: name, ResourceVersion: "7"},
	}
}

// describe is a write as the API server would see it: the call, the Event's name, its count.
func describe(ws []write) []string {
	var out []string
	for _, w := range ws {
		switch {
		case w.event.Series == nil:
			out = append(out, "create "+w.event.Name)
		case w.patchOnly:
			out = append(out, fmt.Sprintf("final %s %d", w.event.Name, w.event.Series.Count))
		default:
			out = append(out, fmt.Sprintf("series %s %d", w.event.Name, w.event.Series.Count))
		}
	}
	return out
}

func TestSeriesOccurrences(t *testing.T) {
	first := occurrence("llama", "Failed", t0).Name
	s := newSeries(8, 6*time.Minute, 30*time.Minute)
	steps := []struct {
		at     time.Duration
		reason string
		want   []string
		arm    bool
	}{
		{0, "Failed", []string{"create " + first}, false},
		{time.Minute, "Failed", []string{"series " + first + " 2"}, false}, // the second: a series at once
		{2 * time.Minute, "Failed", nil, true},                             // later ones counted, a timer for the final count
		{3 * time.Minute, "Failed", nil, false},                            // the timer is armed already
		{3 * time.Minute, "Scaled", []string{"create " + occurrence("llama", "Scaled", t0.Add(3*time.Minute)).Name}, false},
		{34 * time.Minute, "Failed", []string{"final " + first + " 4", "create " + occurrence("llama", "Failed", t0.Add(34*time.Minute)).Name}, false}, // quiet 31 minutes: over, a new Event
	}
	for i, st := range steps {
		ws, arm := s.observe(occurrence("llama", st.reason, t0.Add(st.at)), t0.Add(st.at))
		if got := describe(ws); fmt.Sprint(got) != fmt.Sprint(st.want) || (arm != nil) != st.arm {
			t.Fatalf("step %d at %v: writes %q, timer %v; want %q, timer %v", i, st.at, got, arm != nil, st.want, st.arm)
		}
	}
}

func TestSeriesRefreshAndExpire(t *testing.T) {
	s := newSeries(8, 6*time.Minute, 30*time.Minute)
	first := occurrence("llama", "Failed", t0)
	s.observe(first, t0)
	s.observe(occurrence("llama", "Failed", t0), t0.Add(time.Minute))
	var timer *entry
	// Every 5 minutes for 40: never quiet for the finish period, so the count is written on the
	// first occurrence 30 minutes after the last write.
	var writes []string
	for at := 6 * time.Minute; at <= 40*time.Minute; at += 5 * time.Minute {
		ws, arm := s.observe(occurrence("llama", "Failed", t0.Add(at)), t0.Add(at))
		writes = append(writes, describe(ws)...)
		if arm != nil {
			timer = arm
		}
	}
	if want := []string{"series " + first.Name + " 8"}; fmt.Sprint(writes) != fmt.Sprint(want) {
		t.Fatalf("writes %q over 40 minutes, want %q (the count at 31 minutes)", writes, want)
	}
	if timer == nil {
		t.Fatal("no timer armed for the final count")
	}
	// The last occurrence was at 36 minutes: at 40 the timer waits 2 more; at 42 the final count.
	if ws, again := s.expire(timer, t0.Add(40*time.Minute)); len(ws) != 0 || again != 2*time.Minute {
		t.Fatalf("expire at 40m: %q, again %v; want nothing, again 2m", describe(ws), again)
	}
	ws, again := s.expire(timer, t0.Add(42*time.Minute))
	if want := []string{"final " + first.Name + " 9"}; fmt.Sprint(describe(ws)) != fmt.Sprint(want) || again != 0 {
		t.Fatalf("expire at 42m: %q, again %v; want %q", describe(ws), again, want)
	}
	// Written: a later eviction or timer writes nothing more.
	if ws, _ := s.expire(timer, t0.Add(50*time.Minute)); len(ws) != 0 {
		t.Fatalf("expire again: %q, want nothing", describe(ws))
	}
}

// The LRU bounds the memory: the least recently seen series is forgotten, its count written first.
func TestSeriesEvictionWritesTheFinalCount(t *testing.T) {
	s := newSeries(2, 6*time.Minute, 30*time.Minute)
	a := occurrence("a", "Failed", t0)
	s.observe(a, t0)
	s.observe(occurrence("a", "Failed", t0), t0.Add(time.Second))
	s.observe(occurrence("a", "Failed", t0), t0.Add(2*time.Second)) // count 3, 2 written
	s.observe(occurrence("b", "Failed", t0), t0.Add(3*time.Second))
	c := occurrence("c", "Failed", t0.Add(4*time.Second))
	ws, _ := s.observe(c, t0.Add(4*time.Second)) // pushes a out
	if want := []string{"final " + a.Name + " 3", "create " + c.Name}; fmt.Sprint(describe(ws)) != fmt.Sprint(want) {
		t.Fatalf("writes %q, want %q", describe(ws), want)
	}
	if n := s.lru.Len(); n != 2 {
		t.Fatalf("%d series remembered, want the bound, 2", n)
	}
}
