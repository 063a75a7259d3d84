package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}} {
		if got := quantile(ds, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of none is not 0")
	}
	if ds[0] != 5 {
		t.Error("quantile sorted its argument")
	}
}

func TestCompare(t *testing.T) {
	ms := time.Millisecond
	// The model's jitter (the direct times) is shared by each pair; the activator adds 300 µs.
	direct := []time.Duration{20 * ms, 30 * ms, 22 * ms, 25 * ms}
	var act []time.Duration
	for _, d := range direct {
		act = append(act, d+300*time.Microsecond)
	}
	l := compare(direct, act)
	if l.Pairs != 4 || l.PairedP50Ms != 0.3 || l.DirectP50Ms != 22 || l.ActivatorP50Ms != 22.3 || l.DirectP99Ms != 30 {
		t.Errorf("compare = %+v", l)
	}
	if d := l.AddedP50Ms - 0.3; d > 1e-9 || d < -1e-9 {
		t.Errorf("added p50 %v, want 0.3", l.AddedP50Ms)
	}
}

// clockReader hands out a script of reads, moving a fake clock by each one's delay before it.
type clockReader struct {
	now   time.Time
	steps []step
}

type step struct {
	after time.Duration
	data  string
}

func (c *clockReader) Read(b []byte) (int, error) {
	if len(c.steps) == 0 {
		return 0, io.EOF
	}
	s := &c.steps[0]
	if s.after > 0 {
		c.now, s.after = c.now.Add(s.after), 0
	}
	n := copy(b, s.data)
	if s.data = s.data[n:]; s.data == "" {
		c.steps = c.steps[1:]
	}
	return n, nil
}

func TestReadStreamTimesEachToken(t *testing.T) {
	start := time.Unix(1000, 0)
	ms := time.Millisecond
	r := &clockReader{now: start, steps: []step{
		{22 * ms, `data: {"choices":[{"text":" The"}]}` + "\n\n"},
		// A token split across reads counts when its line ends.
		{20 * ms, `data: {"choices":[{"te`},
		{1 * ms, `xt":" quick"}]}` + "\n\n"},
		{20 * ms, `data: {"choices":[{"text":" brown","finish_reason":"length"}]}` + "\n\n"},
		// Usage and [DONE] are not tokens.
		{1 * ms, `data: {"choices":[],"usage":{"completion_tokens":3}}` + "\n\n" + "data: [DONE]\n\n"},
	}}
	s, err := readStream(r, start, func() time.Time { return r.now })
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{22 * ms, 43 * ms, 63 * ms}
	if len(s.tokens) != len(want) {
		t.Fatalf("tokens at %v, want %v", s.tokens, want)
	}
	for i := range want {
		if s.tokens[i] != want[i] {
			t.Errorf("token %d at %v, want %v", i, s.tokens[i], want[i])
		}
	}
	if s.lastByte != 64*ms || s.firstToken() != 22*ms {
		t.Errorf("last byte %v, first token %v", s.lastByte, s.firstToken())
	}
}

// stream is a stream of n tokens gap apart, the first at first, and headers at once.
func stream(first, gap time.Duration, n int) streamTimes {
	s := streamTimes{headers: time.Millisecond}
	for i := range n {
		s.tokens = append(s.tokens, first+time.Duration(i)*gap)
	}
	s.lastByte = s.tokens[n-1] + time.Millisecond
	return s
}

func TestCompareStreamsSaysWhetherBuffered(t *testing.T) {
	ms := time.Millisecond
	direct := []streamTimes{stream(22*ms, 20*ms, 8), stream(23*ms, 20*ms, 8)}
	for _, tc := range []struct {
		name     string
		act      []streamTimes
		buffered bool
		why      string
	}{
		{"passed on as they come", []streamTimes{stream(22*ms+400*time.Microsecond, 20*ms, 8), stream(23*ms+300*time.Microsecond, 20*ms, 8)}, false, "each token passed on"},
		// A proxy that holds the body until it ends: every token arrives with the last.
		{"held to the end", []streamTimes{stream(163*ms, 0, 8), stream(164*ms, 0, 8)}, true, "later through the activator"},
		// A proxy that flushes every few tokens: the first comes late by a few tokens' time.
		{"flushed in bursts", []streamTimes{stream(62*ms, 0, 8), stream(63*ms, 0, 8)}, true, "later through the activator"},
		// Tokens bunched though the first is on time.
		{"bunched after the first", []streamTimes{stream(22*ms, 2*ms, 8), stream(23*ms, 2*ms, 8)}, true, "in bursts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := compareStreams(direct, tc.act)
			if st.Buffered != tc.buffered || !strings.Contains(st.BufferedWhy, tc.why) {
				t.Errorf("buffered %v (%s), want %v (%q)", st.Buffered, st.BufferedWhy, tc.buffered, tc.why)
			}
			if st.Tokens != 8 || st.Pairs != 2 || st.TokenGapDirectMs != 20 {
				t.Errorf("summary %+v", st)
			}
		})
	}
	if st := compareStreams(nil, nil); st.Buffered || st.BufferedWhy != "not measured" {
		t.Errorf("no streams: %+v", st)
	}
}

func TestPerRequest(t *testing.T) {
	rows := []Held{{Requests: 0, RSSMiB: 30, HeapMiB: 10, StackMiB: 1}, {Requests: 100, RSSMiB: 32, HeapMiB: 11, StackMiB: 1.5}, {Requests: 1000, RSSMiB: 50, HeapMiB: 20, StackMiB: 6}}
	perRequest(rows)
	if rows[0].PerRequestKiB != 0 || rows[1].PerRequestKiB != 20.48 || rows[2].PerRequestKiB != 20.48 || rows[2].HeapPerRequestKiB != 10.24 || rows[2].StackPerRequestKiB != 5.12 {
		t.Errorf("per request: %+v", rows)
	}
}

func TestGoals(t *testing.T) {
	ok := Result{
		Request: Latency{AddedP50Ms: 0.4, PairedP50Ms: 0.3},
		Stream:  Stream{Pairs: 10, BufferedWhy: "passed on"},
		Held:    []Held{{Requests: 0, RSSMiB: 30}, {Requests: 1000, RSSMiB: 60}},
		// The activator's words for the total's refusal.
		HeldCapAnswer: "503 Service Unavailable, Retry-After 10: {...}",
	}
	for _, g := range goals(ok, 256, 40) {
		if !g.Met {
			t.Errorf("%s not met: %s", g.Goal, g.Why)
		}
	}
	bad := ok
	bad.Request.PairedP50Ms = 1.2
	bad.Stream.Buffered = true
	bad.Held = []Held{{Requests: 0, RSSMiB: 30}, {Requests: 1000, RSSMiB: 90}}
	for _, g := range goals(bad, 256, 40) {
		if g.Met {
			t.Errorf("%s met: %s", g.Goal, g.Why)
		}
	}
	noCap := ok
	noCap.HeldCapAnswer = "200 OK"
	if g := goals(noCap, 256, 40)[2]; g.Met {
		t.Errorf("a request past the total answered, yet %q met", g.Goal)
	}
}

func TestHoldSlotsSpreadPastEveryBound(t *testing.T) {
	slots := holdSlots(Config{Held: []int{100, 1000}})
	per := map[string]int{}
	total := 0
	for _, s := range slots[:len(slots)-1] {
		if s.n > perHoldModel {
			t.Errorf("%s/%s holds %d, over the model's %d", s.ns, s.name, s.n, perHoldModel)
		}
		per[s.ns] += s.n
		total += s.n
	}
	for ns, n := range per {
		if n > perHoldNS {
			t.Errorf("%s holds %d, over the namespace's %d", ns, n, perHoldNS)
		}
	}
	past := slots[len(slots)-1]
	if total != 1000 || per[past.ns] != 0 || slots[0].n != 100 {
		t.Errorf("total %d, the last slot %+v in a namespace holding %d; first %+v", total, past, per[past.ns], slots[0])
	}
}

func TestCounts(t *testing.T) {
	if got, err := counts("1, 10,100"); err != nil || len(got) != 3 || got[2] != 100 {
		t.Errorf("counts = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "10,1", "a"} {
		if _, err := counts(bad); err == nil {
			t.Errorf("counts(%q) took it", bad)
		}
	}
}
