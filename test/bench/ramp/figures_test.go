package main

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

// TestSchedule: doubled each step for five steps, then halved back to the start: nine steps.
func TestSchedule(t *testing.T) {
	s := Schedule{Base: 2, Up: 5, Step: time.Minute}
	want := []float64{2, 4, 8, 16, 32, 16, 8, 4, 2}
	for i, w := range want {
		if got := s.Rate(time.Duration(i)*time.Minute + 30*time.Second); got != w {
			t.Errorf("step %d: %v req/s, want %v", i, got, w)
		}
	}
	if s.Duration() != 9*time.Minute || s.Rate(9*time.Minute) != 0 {
		t.Errorf("duration %v, rate after it %v; want 9m and 0", s.Duration(), s.Rate(9*time.Minute))
	}
}

// TestOverObjective: a second counts when the p95 of its window's requests is over the
// objective; a failed request counts as over; an empty window does not count.
func TestOverObjective(t *testing.T) {
	var reqs []Request
	// 0-10 s: fast; 10-20 s: slow; 20-30 s: nothing; 30-40 s: fast but 1 in 10 failed
	for i := range 100 {
		at := time.Duration(i) * 100 * time.Millisecond
		reqs = append(reqs, Request{At: at, TTFT: 50 * time.Millisecond})
		reqs = append(reqs, Request{At: 10*time.Second + at, TTFT: time.Second})
		reqs = append(reqs, Request{At: 30*time.Second + at, TTFT: 50 * time.Millisecond, Failed: i%10 == 0})
	}
	// a 5 s window: over from the second whose window holds more than 5% slow ones (11 s)
	// until the slow ones have left it (25 s: empty from then, not counted), then over again
	// throughout the failing part
	got := OverObjective(reqs, 40*time.Second, 5*time.Second, 500*time.Millisecond)
	if want := 24 * time.Second; got != want {
		t.Errorf("over the objective %v, want %v", got, want)
	}
}

// TestGPUMinutes: each reading holds until the next.
func TestGPUMinutes(t *testing.T) {
	s := []Sample{{At: 0, Scheduled: 1}, {At: 60 * time.Second, Scheduled: 3}, {At: 90 * time.Second, Scheduled: 2}}
	if got := GPUMinutes(s, 120*time.Second, 2); got != (60+90+60)*2/60.0 {
		t.Errorf("%v GPU-minutes, want 7", got)
	}
}

// TestTableAndPlot: a row per signal; the SVG is well-formed XML with a line per signal and one
// for the load.
func TestTableAndPlot(t *testing.T) {
	s := Schedule{Base: 1, Up: 2, Step: 10 * time.Second}
	r := Result{Schedule: s, Load: loadEach10s(s)}
	for _, name := range []string{"queue", "kvcache"} {
		r.Signals = append(r.Signals, Summarize(name, "t", []Request{{At: time.Second, TTFT: time.Second}},
			[]Sample{{At: 0, Scheduled: 1}, {At: 10 * time.Second, Scheduled: 2}}, s.Duration(), 5*time.Second, 500*time.Millisecond, 1))
	}
	var tb bytes.Buffer
	WriteTable(&tb, r)
	if n := strings.Count(tb.String(), "\n"); n != 4 || !strings.Contains(tb.String(), "| kvcache (t) | 5 s | 0.8 | 2 | 1 (0) | 1000 / 1000 ms |") {
		t.Errorf("table:\n%s", tb.String())
	}
	var svg bytes.Buffer
	WriteSVG(&svg, r)
	d := xml.NewDecoder(&svg)
	lines := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("the SVG: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 3 {
		t.Errorf("%d lines in the plot, want 3", lines)
	}
}
