// Where a slow SGLang start's minutes go: the phases of the last start in a pod's log and their
// durations, read from the lines SGLang v0.5 prints as it starts (python/sglang/srt/...):
//
//	entrypoints/engine.py _launch_subprocesses  "server_args=ServerArgs(...)"               a run begins
//	model_executor/model_runner.py load_model   "Load weight begin. avail mem=%.2f GB"     process start ends
//	model_executor/model_runner.py load_model   "Load weight end. type=%s, dtype=%s, ..."  download + load
//	model_executor/model_runner.py              "KV Cache is allocated. #tokens: %d, ..."  (engine init)
//	model_executor/cuda_graph_runner.py capture "Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB"
//	model_executor/cuda_graph_runner.py capture "Capture cuda graph end. Time elapsed: %.2f s. ..."   not with --disable-cuda-graph
//	managers/scheduler.py                       "max_total_num_tokens=%d, chunked_prefill_size=..."  (engine init ends)
//	uvicorn                                     "INFO:     Uvicorn running on http://..."   (no stamp)
//	entrypoints/http_server.py _wait_and_warmup "The server is fired up and ready to roll!" serving
//
// SGLang's configure_logger (python/sglang/srt/utils) formats "[%(asctime)s%(prefix)s]
// %(message)s" with the date "%Y-%m-%d %H:%M:%S" and a prefix naming the rank (" TP0",
// " DP0 TP0", " PP0 TP1"), none for the launcher and the HTTP server. A stamp has a year but
// no zone (the container's local time, UTC in the lmsysorg/sglang images) and a resolution of
// one second. A log read with the kubelet's RFC 3339 stamps gives every line, uvicorn's and
// tqdm's included, an exact time, which is used instead. The weights' download is not told
// apart from their load: SGLang logs no line between them (both lie inside "Load weight").

package sglang

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// sglangLine is a stamped line of SGLang's logger: "[2025-10-06 14:00:20 TP0] message".
var sglangLine = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: [A-Z]+\d+)*\] (.*)$`)

// ansiEscape is a terminal colour code.
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*m")

// The messages that mark the phases.
var (
	msgRunBegins   = regexp.MustCompile(`^server_args=ServerArgs\(`)
	msgLoadBegins  = regexp.MustCompile(`^Load weight begin\.`)
	msgLoadEnds    = regexp.MustCompile(`^Load weight end\.`)
	msgGraphsBegin = regexp.MustCompile(`^Capture cuda graph begin\.`)
	msgGraphsEnd   = regexp.MustCompile(`^Capture cuda graph end\. Time elapsed: ([0-9.]+) s`)
	msgSchedReady  = regexp.MustCompile(`^max_total_num_tokens=\d+`)
	msgServing     = regexp.MustCompile(`^The server is fired up and ready to roll!`)
)

// mark is a milestone's time and line.
type mark struct {
	at   time.Time
	line string
	set  bool
}

// run is one start's milestones.
type run struct {
	first, last                                              mark
	loadBegins, loadEnds, graphsBegin, graphsEnd, schedReady mark
	serving                                                  mark
	graphSeconds                                             float64
}

// cutStamp is a line's kubelet stamp, if any, and the rest.
func cutStamp(line string) (time.Time, string) {
	first, rest, ok := strings.Cut(line, " ")
	if ok && len(first) >= len("2006-01-02T15:04:05Z") && first[4] == '-' && first[10] == 'T' {
		if t, err := time.Parse(time.RFC3339Nano, first); err == nil {
			return t, rest
		}
	}
	return time.Time{}, line
}

// StartPhasesOf reads the phases of the last start in an SGLang container's log, the container
// having started at started (zero: the first stamp); nil when the log holds no stamped line of
// SGLang's.
func StartPhasesOf(log string, started time.Time) []engine.Phase {
	var r run
	seen := false
	for _, raw := range strings.FieldsFunc(log, func(c rune) bool { return c == '\n' || c == '\r' }) {
		kubelet, l := cutStamp(ansiEscape.ReplaceAllString(raw, ""))
		l = strings.TrimSpace(l)
		at, msg := kubelet, l
		if m := sglangLine.FindStringSubmatch(l); m != nil {
			msg = m[2]
			if at.IsZero() {
				t, err := time.Parse(time.DateTime, m[1])
				if err != nil {
					continue
				}
				at = t
			}
			if msgRunBegins.MatchString(msg) && seen && r.loadBegins.set {
				r = run{} // a later start in the same log: the last one counts
			}
			seen = true
		}
		if at.IsZero() {
			continue
		}
		mk := mark{at: at, line: msg, set: true}
		if !r.first.set {
			r.first = mk
		}
		r.last = mk
		switch {
		case msgLoadBegins.MatchString(msg) && !r.loadBegins.set:
			r.loadBegins = mk
		case msgLoadEnds.MatchString(msg):
			r.loadEnds = mk
		case msgGraphsBegin.MatchString(msg) && !r.graphsBegin.set:
			r.graphsBegin = mk
		case msgGraphsEnd.MatchString(msg):
			r.graphsEnd = mk
			r.graphSeconds, _ = strconv.ParseFloat(msgGraphsEnd.FindStringSubmatch(msg)[1], 64)
		case msgSchedReady.MatchString(msg):
			r.schedReady = mk
		case msgServing.MatchString(msg):
			r.serving = mk
		}
	}
	if !seen {
		return nil
	}
	if started.IsZero() || started.After(r.first.at) {
		started = r.first.at
	}
	return r.phases(started)
}

// between is b - a in seconds, never negative, to the millisecond.
func between(a, b time.Time) float64 {
	return math.Max(0, math.Round(b.Sub(a).Seconds()*1000)/1000)
}

// phases are the run's phases in order: each from the end of the one before to its own end
// mark; the first without an end is Going, to the last stamp, and ends the list.
func (r *run) phases(started time.Time) []engine.Phase {
	// Engine init is the KV cache's allocation and the scheduler's start: to the graphs'
	// capture, or without graphs (--disable-cuda-graph) to the scheduler's line.
	initEnd := r.graphsBegin
	if !initEnd.set {
		initEnd = r.schedReady
	}
	steps := []struct {
		name       string
		begin, end mark
	}{
		{engine.PhaseProcessStart, mark{at: started, set: true}, r.loadBegins},
		{engine.PhaseWeightsLoad, r.loadBegins, r.loadEnds},
		{engine.PhaseEngineInit, r.loadEnds, initEnd},
	}
	if r.graphsBegin.set {
		steps = append(steps, struct {
			name       string
			begin, end mark
		}{engine.PhaseCUDAGraphs, r.graphsBegin, r.graphsEnd})
	}
	apiBegin := r.graphsEnd
	if !r.graphsBegin.set {
		apiBegin = initEnd
	}
	steps = append(steps, struct {
		name       string
		begin, end mark
	}{engine.PhaseAPIServer, apiBegin, r.serving})

	var out []engine.Phase
	for _, s := range steps {
		if !s.end.set {
			if s.begin.set {
				out = append(out, engine.Phase{Name: s.name, Seconds: between(s.begin.at, r.last.at),
					Source: s.begin.line, Going: true, Since: s.begin.at})
			}
			return out
		}
		secs := between(s.begin.at, s.end.at)
		if s.name == engine.PhaseCUDAGraphs && r.graphSeconds > 0 {
			secs = r.graphSeconds // SGLang's own, exact
		}
		out = append(out, engine.Phase{Name: s.name, Seconds: secs, Source: s.end.line})
	}
	return append(out, engine.Phase{Name: engine.PhaseServing, Seconds: between(started, r.serving.at), Source: r.serving.line})
}
