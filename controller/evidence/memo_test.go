package evidence

import (
	"testing"
	"time"
)

// A read is fresh for less than its period; update reads and writes an entry at once; expire
// and forget drop entries.
func TestMemo(t *testing.T) {
	var m memo[string, int]
	if _, ok := m.fresh("a", t0, time.Minute); ok {
		t.Fatal("fresh before any read")
	}
	m.put("a", t0, 1)
	if v, ok := m.fresh("a", t0.Add(59*time.Second), time.Minute); !ok || v != 1 {
		t.Fatalf("within the period: %d %v", v, ok)
	}
	if _, ok := m.fresh("a", t0.Add(time.Minute), time.Minute); ok {
		t.Fatal("fresh at the period's end")
	}
	got := m.update("b", func(s stamped[int], ok bool) stamped[int] {
		if ok {
			t.Fatal("a new key had an entry")
		}
		s.v++
		return s
	})
	if got.v != 1 || !got.at.IsZero() {
		t.Fatalf("updated %+v", got)
	}
	m.expire(func(s stamped[int]) bool { return s.at.IsZero() })
	if _, ok := m.get("b"); ok || m.len() != 1 {
		t.Fatalf("expired: %d left", m.len())
	}
	m.forget("a")
	if m.len() != 0 {
		t.Fatal("forgotten, still remembered")
	}
}
