// The benchmark's arithmetic, apart from the cluster: quantiles, what the activator adds over
// the direct path, a stream's token times, whether a stream was buffered, memory per held
// request, and the table.

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// quantile is the q-quantile (0..1) of ds by the nearest rank; 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Latency is one path's p50 and p99 and what the activator adds to them, in milliseconds.
type Latency struct {
	DirectP50Ms    float64 `json:"direct_p50_ms"`
	DirectP99Ms    float64 `json:"direct_p99_ms"`
	ActivatorP50Ms float64 `json:"activator_p50_ms"`
	ActivatorP99Ms float64 `json:"activator_p99_ms"`
	// AddedP50Ms and AddedP99Ms are the activator's quantile less the direct one.
	AddedP50Ms float64 `json:"added_p50_ms"`
	AddedP99Ms float64 `json:"added_p99_ms"`
	// PairedP50Ms is the median of each pair's difference (the two sent back to back): the
	// model server's own jitter, which both paths share, mostly cancels in it.
	PairedP50Ms float64 `json:"paired_p50_ms"`
	Pairs       int     `json:"pairs"`
}

// compare summarizes pairs of (direct, activator) durations of the same request.
func compare(direct, act []time.Duration) Latency {
	n := min(len(direct), len(act))
	diffs := make([]time.Duration, n)
	for i := range n {
		diffs[i] = act[i] - direct[i]
	}
	l := Latency{
		DirectP50Ms: ms(quantile(direct, 0.5)), DirectP99Ms: ms(quantile(direct, 0.99)),
		ActivatorP50Ms: ms(quantile(act, 0.5)), ActivatorP99Ms: ms(quantile(act, 0.99)),
		PairedP50Ms: ms(quantile(diffs, 0.5)), Pairs: n,
	}
	l.AddedP50Ms, l.AddedP99Ms = l.ActivatorP50Ms-l.DirectP50Ms, l.ActivatorP99Ms-l.DirectP99Ms
	return l
}

// streamTimes is one streamed completion as its client saw it, each time from the request's
// start: the response headers, each token's event, the end of the body.
type streamTimes struct {
	headers  time.Duration
	tokens   []time.Duration
	lastByte time.Duration
}

// firstToken is the first token's arrival; 0 when none came.
func (s streamTimes) firstToken() time.Duration {
	if len(s.tokens) == 0 {
		return 0
	}
	return s.tokens[0]
}

// readStream reads an OpenAI server-sent-event body to its end, timing (with now, from start)
// each "data:" event that carries a choice (a token) as its line arrives. The [DONE] event
// and a usage-only event are not tokens.
func readStream(body io.Reader, start time.Time, now func() time.Time) (streamTimes, error) {
	var s streamTimes
	r := bufio.NewReader(body)
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 && bytes.HasPrefix(line, []byte("data: ")) {
			payload := bytes.TrimSpace(line[len("data: "):])
			if !bytes.Equal(payload, []byte("[DONE]")) && !bytes.Contains(payload, []byte(`"choices":[]`)) {
				s.tokens = append(s.tokens, now().Sub(start))
			}
		}
		switch {
		case err == io.EOF:
			s.lastByte = now().Sub(start)
			return s, nil
		case err == bufio.ErrBufferFull:
			// A line longer than the buffer: its start was seen; read on to its end.
		case err != nil:
			return s, err
		}
	}
}

// Stream compares streamed completions through the activator and directly: time to the
// headers, to the first token and to the last byte (p50 and p99), the gap between tokens, and
// whether the activator buffered.
type Stream struct {
	Tokens           int     `json:"tokens"`
	Pairs            int     `json:"pairs"`
	TokenGapDirectMs float64 `json:"token_gap_direct_p50_ms"`
	TokenGapActivMs  float64 `json:"token_gap_activator_p50_ms"`
	Headers          Latency `json:"headers"`
	FirstToken       Latency `json:"first_token"`
	LastByte         Latency `json:"last_byte"`
	Buffered         bool    `json:"buffered"`
	BufferedWhy      string  `json:"buffered_why"`
	FirstTokenShare  float64 `json:"activator_first_token_share_of_stream"`
}

// compareStreams summarizes pairs of streams of the same request.
func compareStreams(direct, act []streamTimes) Stream {
	pick := func(ss []streamTimes, f func(streamTimes) time.Duration) []time.Duration {
		out := make([]time.Duration, len(ss))
		for i, s := range ss {
			out[i] = f(s)
		}
		return out
	}
	gaps := func(ss []streamTimes) []time.Duration {
		var out []time.Duration
		for _, s := range ss {
			for i := 1; i < len(s.tokens); i++ {
				out = append(out, s.tokens[i]-s.tokens[i-1])
			}
		}
		return out
	}
	st := Stream{
		Pairs:      min(len(direct), len(act)),
		Headers:    compare(pick(direct, func(s streamTimes) time.Duration { return s.headers }), pick(act, func(s streamTimes) time.Duration { return s.headers })),
		FirstToken: compare(pick(direct, streamTimes.firstToken), pick(act, streamTimes.firstToken)),
		LastByte:   compare(pick(direct, func(s streamTimes) time.Duration { return s.lastByte }), pick(act, func(s streamTimes) time.Duration { return s.lastByte })),
	}
	if len(direct) > 0 {
		st.Tokens = len(direct[0].tokens)
	}
	gd, ga := quantile(gaps(direct), 0.5), quantile(gaps(act), 0.5)
	st.TokenGapDirectMs, st.TokenGapActivMs = ms(gd), ms(ga)
	if st.LastByte.ActivatorP50Ms > 0 {
		st.FirstTokenShare = st.FirstToken.ActivatorP50Ms / st.LastByte.ActivatorP50Ms
	}
	st.Buffered, st.BufferedWhy = buffered(st, gd)
	return st
}

// buffered says whether the activator held tokens back: a proxy that buffers delivers the first
// token with the last (its first-token delay grows by the stream's length) or delivers tokens in
// bursts (the gap between them shrinks toward zero while the direct path keeps the model's pace).
// Half a token's time is the tolerance either way: the model's pace is the unit a client sees.
func buffered(st Stream, directGap time.Duration) (bool, string) {
	if st.Pairs == 0 || st.Tokens < 2 || directGap <= 0 {
		return false, "not measured"
	}
	tol := ms(directGap) / 2
	if st.FirstToken.PairedP50Ms > tol {
		return true, fmt.Sprintf("first token %.1f ms later through the activator (paired p50), over half a token's %.1f ms", st.FirstToken.PairedP50Ms, ms(directGap))
	}
	if st.TokenGapActivMs < ms(directGap)-tol {
		return true, fmt.Sprintf("tokens %.1f ms apart through the activator, %.1f ms directly: delivered in bursts", st.TokenGapActivMs, ms(directGap))
	}
	return false, fmt.Sprintf("first token +%.2f ms (paired p50), tokens %.1f ms apart as directly (%.1f ms): each token passed on as it came",
		st.FirstToken.PairedP50Ms, st.TokenGapActivMs, ms(directGap))
}

// Held is the activator's memory with a number of requests held against models at zero.
type Held struct {
	Requests   int     `json:"requests"`
	RSSMiB     float64 `json:"rss_mib"`
	HeapMiB    float64 `json:"heap_inuse_mib"`
	StackMiB   float64 `json:"stack_inuse_mib"`
	Goroutines float64 `json:"goroutines"`
	// PerRequestKiB is the resident memory above the first row's, per request held; the
	// heap's and the stacks' likewise.
	PerRequestKiB      float64 `json:"rss_per_request_kib,omitempty"`
	HeapPerRequestKiB  float64 `json:"heap_per_request_kib,omitempty"`
	StackPerRequestKiB float64 `json:"stack_per_request_kib,omitempty"`
}

// perRequest fills each row's cost per request held above rows[0] (the activator holding none).
func perRequest(rows []Held) {
	if len(rows) == 0 {
		return
	}
	base := rows[0]
	for i := range rows {
		if n := float64(rows[i].Requests - base.Requests); n > 0 {
			rows[i].PerRequestKiB = (rows[i].RSSMiB - base.RSSMiB) * 1024 / n
			rows[i].HeapPerRequestKiB = (rows[i].HeapMiB - base.HeapMiB) * 1024 / n
			rows[i].StackPerRequestKiB = (rows[i].StackMiB - base.StackMiB) * 1024 / n
		}
	}
}

// ColdStart is a model at zero woken by Requests sent at once: the first and the last of them
// to get their first byte, from the moment they were sent.
type ColdStart struct {
	Requests   int     `json:"requests"`
	Answered   int     `json:"answered"`
	FirstByteS float64 `json:"first_byte_first_s"`
	LastByteS  float64 `json:"first_byte_last_s"`
	// PodReadyS is when a watch here saw the woken pod ready; ReadyToFirstByteMs what
	// followed until the first byte: the activator's own share of the cold start.
	PodReadyS          float64 `json:"pod_ready_s"`
	ReadyToFirstByteMs float64 `json:"ready_to_first_byte_ms"`
	FirstFailed        string  `json:"first_failed,omitempty"`
}

// Throughput is requests per second at a fixed concurrency for a fixed time, one path.
type Throughput struct {
	Path        string  `json:"path"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	OK          int     `json:"ok"`
	Failed      int     `json:"failed"`
	PerSecond   float64 `json:"per_second"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	// ActivatorCPUSeconds is the activator process's CPU time over the run; CPUPerRequestUs
	// the same per request answered.
	ActivatorCPUSeconds float64 `json:"activator_cpu_seconds"`
	CPUPerRequestUs     float64 `json:"activator_cpu_per_request_us,omitempty"`
}

// Result is one run's figures.
type Result struct {
	Machine    string       `json:"machine"`
	Request    Latency      `json:"request"`
	Stream     Stream       `json:"stream"`
	Throughput []Throughput `json:"throughput"`
	Held       []Held       `json:"held"`
	// HeldCapAnswer is what the request past --max-held-total was answered.
	HeldCapAnswer string      `json:"held_cap_answer"`
	ColdStarts    []ColdStart `json:"cold_starts"`
	Goals         []Goal      `json:"goals"`
}

// Goal is one of issue 55's goals for the activator and whether this run met it.
type Goal struct {
	Goal string `json:"goal"`
	Met  bool   `json:"met"`
	Why  string `json:"why"`
}

// goals checks r against issue 55: under 1 ms p50 added to a request, no buffering of streams,
// memory bounded by the caps (the request past the total held is refused, and the activator at
// its total stays inside the memory the Deployment's limit and budget.go allow the held).
func goals(r Result, limitMiB, heldBudgetMiB float64) []Goal {
	var gs []Goal
	gs = append(gs, Goal{Goal: "under 1 ms p50 added to a request", Met: r.Request.PairedP50Ms < 1 && r.Request.AddedP50Ms < 1,
		Why: fmt.Sprintf("p50 %+.2f ms (quantiles), %+.2f ms (paired)", r.Request.AddedP50Ms, r.Request.PairedP50Ms)})
	gs = append(gs, Goal{Goal: "no buffering of streams", Met: r.Stream.Pairs > 0 && !r.Stream.Buffered, Why: r.Stream.BufferedWhy})
	if len(r.Held) > 0 {
		top := r.Held[len(r.Held)-1]
		used := top.RSSMiB - r.Held[0].RSSMiB
		met := top.RSSMiB < limitMiB && used <= heldBudgetMiB && strings.Contains(r.HeldCapAnswer, "503")
		gs = append(gs, Goal{Goal: "memory bounded by its caps", Met: met,
			Why: fmt.Sprintf("%d held: RSS %.1f MiB (limit %.0f), %.1f MiB above none held (budget.go allows %.0f); one more: %s",
				top.Requests, top.RSSMiB, limitMiB, used, heldBudgetMiB, r.HeldCapAnswer)})
	}
	return gs
}

// PrintTable writes r as the tables docs/benchmarks.md shows.
func PrintTable(w io.Writer, r Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "machine: %s\n\n", r.Machine)
	fmt.Fprintln(tw, "latency (ms)\tdirect p50\tdirect p99\tactivator p50\tactivator p99\tadded p50\tadded p99\tpaired p50\tpairs")
	row := func(name string, l Latency) {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%+.2f\t%+.2f\t%+.2f\t%d\n", name, l.DirectP50Ms, l.DirectP99Ms,
			l.ActivatorP50Ms, l.ActivatorP99Ms, l.AddedP50Ms, l.AddedP99Ms, l.PairedP50Ms, l.Pairs)
	}
	row("completion", r.Request)
	row(fmt.Sprintf("stream (%d tokens): headers", r.Stream.Tokens), r.Stream.Headers)
	row("stream: first token", r.Stream.FirstToken)
	row("stream: last byte", r.Stream.LastByte)
	fmt.Fprintf(tw, "\nstream buffered: %v (%s)\n\n", r.Stream.Buffered, r.Stream.BufferedWhy)
	fmt.Fprintln(tw, "throughput\tconcurrency\tseconds\tok\tfailed\treq/s\tp50 ms\tp99 ms\tactivator CPU s\tCPU µs/req")
	for _, t := range r.Throughput {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.2f\t%.0f\n", t.Path, t.Concurrency, t.Seconds, t.OK, t.Failed,
			t.PerSecond, t.P50Ms, t.P99Ms, t.ActivatorCPUSeconds, t.CPUPerRequestUs)
	}
	fmt.Fprintln(tw, "\nheld\tRSS MiB\theap inuse MiB\tstacks MiB\tgoroutines\tRSS KiB/req\theap KiB/req\tstack KiB/req")
	for _, h := range r.Held {
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.0f\t%.1f\t%.1f\t%.1f\n", h.Requests, h.RSSMiB, h.HeapMiB, h.StackMiB, h.Goroutines,
			h.PerRequestKiB, h.HeapPerRequestKiB, h.StackPerRequestKiB)
	}
	fmt.Fprintf(tw, "one more past the total: %s\n", r.HeldCapAnswer)
	fmt.Fprintln(tw, "\ncold start: held at once\tanswered\tpod ready seen (s)\tfirst byte, first (s)\tfirst byte, last (s)\tready to first byte (ms)")
	for _, c := range r.ColdStarts {
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.2f\t%.2f\t%.0f\n", c.Requests, c.Answered, c.PodReadyS, c.FirstByteS, c.LastByteS, c.ReadyToFirstByteMs)
	}
	fmt.Fprintln(tw, "\ngoal\tmet\twhy")
	for _, g := range r.Goals {
		fmt.Fprintf(tw, "%s\t%v\t%s\n", g.Goal, g.Met, g.Why)
	}
	_ = tw.Flush()
}
