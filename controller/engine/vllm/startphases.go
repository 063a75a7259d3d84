// Where a slow start's minutes go, read from vLLM's own start log (issue 36): the phases of
// the last start in a pod's log and their durations, and the slowest of them.
//
// The lines, as vLLM v0.11 prints them (file and format string; read at vllm-project/vllm
// f708bd49, 2025-09-26, the main commit v0.11.0 branched from: v0.11.0's own logs place the
// gpu_model_runner.py lines two lines further down, same words):
//
//	api_server.py:1818        "vLLM API server version %s"                           a run begins
//	gpu_model_runner.py:2600  "Starting to load model %s..."                         process start ends
//	weight_utils.py:392       "Using model weights format %s"                        download begins
//	weight_utils.py:413       "Time spent downloading weights for %s: %.6f seconds"  only when > 0.5 s
//	(tqdm, no stamp)          "Loading safetensors checkpoint shards: ..."           load begins
//	default_loader.py:267     "Loading weights took %.2f seconds"
//	gpu_model_runner.py:2651  "Model loading took %.4f GiB and %.6f seconds"         download + load + the rest
//	backends.py:218           "Compiling a graph for dynamic shape takes %.2f s"     (part of the next)
//	monitor.py:34             "torch.compile takes %.2f s in total"                  not with enforce_eager
//	gpu_worker.py:298         "Available KV cache memory: %.2f GiB"
//	kv_cache_utils.py:1087    "GPU KV cache size: %s tokens"
//	gpu_model_runner.py:3448  "Graph capturing finished in %.0f secs, took %.2f GiB" not with enforce_eager
//	core.py:210               "init engine (profile, create kv cache, warmup model) took %.2f seconds"
//	launcher.py:34, :42       "Available routes are:", "Route: %s, Methods: %s"
//	uvicorn lifespan/on.py    "Application startup complete."                        serving
//
// vLLM's logger formats "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s" with
// the date "%m-%d %H:%M:%S" (vllm/logger.py), and every process prefixes its stdout and stderr
// with "\x1b[1;36m(NAME pid=PID)\x1b[0;0m " (vllm/utils _add_prefix: APIServer, EngineCore_DP0,
// Worker_TP0, ...), colour codes and all. Uvicorn's own lines are "INFO:     message", with no
// time at all. A stamp thus has no year, no zone (the container's local time: UTC in the vLLM
// image, which sets no TZ) and a resolution of one second; durations read between stamps are
// good to a second or two, those vLLM prints itself are exact. A log read with timestamps (the
// kubelet's RFC 3339 stamp before each line, as the operator reads logs) gives every line,
// uvicorn's included, a full, exact time, which is used instead.

package vllm

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// A stamped line of vLLM's logger, after its process prefix: level, "MM-DD hh:mm:ss",
// [file:line], message. Anything may come before the level (VLLM_LOGGING_PREFIX).
var vllmLine = regexp.MustCompile(`(?:^|\s)(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d) \[[^\]]+:\d+\] (.*)$`)

// ansiEscape is a terminal colour code (vLLM colours its process prefixes).
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*m")

// The messages that mark the phases; numbers as vLLM prints them. Later vLLM words
// ("Model loading took %.4f GiB memory and", "torch.compile took") are read too.
var (
	msgRunBegins   = regexp.MustCompile(`^vLLM API server version `)
	msgPlatform    = regexp.MustCompile(`^Automatically detected platform `)
	msgLoadStarts  = regexp.MustCompile(`^Starting to load model `)
	msgEngineConf  = regexp.MustCompile(`^Initializing a V1 LLM engine .*\benforce_eager=(True|False)\b`)
	msgDownloadBeg = regexp.MustCompile(`^Using model weights format `)
	msgDownloaded  = regexp.MustCompile(`^Time spent downloading weights for .*: ([0-9.]+) seconds$`)
	msgShards      = regexp.MustCompile(`^Loading (?:safetensors|pt|np_cache) checkpoint shards:`)
	msgWeightsLoad = regexp.MustCompile(`^Loading weights took ([0-9.]+) seconds`)
	msgModelLoad   = regexp.MustCompile(`^Model loading took [0-9.]+ GiB(?: memory)? and ([0-9.]+) seconds`)
	msgCompiled    = regexp.MustCompile(`^torch\.compile (?:takes|took) ([0-9.]+) s in total`)
	msgKVSize      = regexp.MustCompile(`^GPU KV cache size: `)
	msgGraphs      = regexp.MustCompile(`^Graph capturing finished in ([0-9.]+) secs`)
	msgEngineInit  = regexp.MustCompile(`^init engine \(profile, create kv cache, warmup model\) took ([0-9.]+) seconds`)
	msgServing     = regexp.MustCompile(`^INFO:\s+Application startup complete\.`)
)

// milestones of a run, in order.
const (
	mLoadStarts = iota
	mDownloadBegins
	mShards
	mDownloaded
	mWeightsLoaded
	mModelLoaded
	mCompiled
	mKVSized
	mGraphs
	mEngineInit
	mServing
	nMilestones
)

// mark is a milestone reached: the latest stamp it was reached at (with tensor or pipeline
// parallelism every worker prints the model's lines: the engine waits for the slowest), the
// largest number printed with it, and its line.
type mark struct {
	at      time.Time
	seconds float64
	line    string
	seen    bool
}

// run is one start of vLLM within a log.
type run struct {
	start time.Time
	m     [nMilestones]mark
	// loaders are the processes that said "Starting to load model": one saying it again has
	// started anew.
	loaders map[string]bool
	eager   bool
	last    time.Time // the last stamp of the run
}

// StartPhasesOf are the phases of the last vLLM start in log (a container's log, with or
// without the kubelet's timestamps), the container having started at started: each phase
// reached, in order, the one it was in last marked Going when it had not served yet. A log
// holding several starts (a restart) gives the last one's, timed from its own first line
// rather than from started. Nil when the log holds no stamped vLLM line.
func StartPhasesOf(log string, started time.Time) []engine.Phase {
	started = started.UTC()
	r := &run{start: started, loaders: map[string]bool{}}
	var platformAt time.Time // the latest "Automatically detected platform" since the run's last milestone
	runs := 0
	stamped := false
	for _, raw := range strings.Split(log, "\n") {
		line := strings.TrimRight(ansiEscape.ReplaceAllString(raw, ""), " \t\r")
		var at time.Time
		if stamp, rest, ok := strings.Cut(line, " "); ok {
			if ts, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
				if !started.IsZero() && ts.Before(started) {
					continue // the container's previous run
				}
				at, line = ts.UTC(), rest
			}
		}
		proc, line := cutProcess(line)
		msg := line
		if m := vllmLine.FindStringSubmatch(line); m != nil {
			if at.IsZero() {
				at = stampTime(m[1], started)
			}
			msg = m[2]
		}
		msg = strings.TrimSpace(msg)
		if !at.IsZero() {
			stamped = true
			if at.After(r.last) {
				r.last = at
			}
		}
		switch {
		case msgPlatform.MatchString(msg):
			if platformAt.IsZero() {
				platformAt = at
			}
			continue
		case msgRunBegins.MatchString(msg):
			runs++
			if runs > 1 || started.IsZero() {
				begin := at
				if !platformAt.IsZero() {
					begin = platformAt
				}
				r = &run{start: begin, loaders: map[string]bool{}, last: at}
			}
			platformAt = time.Time{}
			continue
		case msgEngineConf.MatchString(msg):
			r.eager = msgEngineConf.FindStringSubmatch(msg)[1] == "True"
			continue
		}
		k, secs := milestoneOf(msg)
		if k < 0 {
			continue
		}
		if k == mLoadStarts && (r.loaders[proc] || r.m[mServing].seen) {
			// started anew without a version line of its own: time it from here
			r = &run{start: at, loaders: map[string]bool{}, last: at}
		}
		if k == mLoadStarts {
			r.loaders[proc] = true
		}
		platformAt = time.Time{}
		if at.IsZero() {
			// uvicorn's lines and tqdm's bars have no time: the last stamp before them
			at = r.last
		}
		mk := &r.m[k]
		mk.at = maxTime(mk.at, at)
		if !mk.seen || secs > mk.seconds {
			mk.seconds, mk.line = secs, strings.TrimSpace(line)
		}
		mk.seen = true
	}
	if !stamped {
		return nil
	}
	if r.start.IsZero() {
		r.start = r.firstStamp()
	}
	return r.phases()
}

// milestoneOf is the milestone msg marks and the seconds it prints, or -1.
func milestoneOf(msg string) (int, float64) {
	for _, c := range []struct {
		k  int
		re *regexp.Regexp
	}{
		{mLoadStarts, msgLoadStarts}, {mDownloadBegins, msgDownloadBeg}, {mShards, msgShards},
		{mDownloaded, msgDownloaded}, {mWeightsLoaded, msgWeightsLoad}, {mModelLoaded, msgModelLoad},
		{mCompiled, msgCompiled}, {mKVSized, msgKVSize}, {mGraphs, msgGraphs},
		{mEngineInit, msgEngineInit}, {mServing, msgServing},
	} {
		if m := c.re.FindStringSubmatch(msg); m != nil {
			secs := 0.0
			if len(m) > 1 {
				secs, _ = strconv.ParseFloat(m[1], 64)
			}
			return c.k, secs
		}
	}
	return -1, 0
}

// stampTime is vLLM's "MM-DD hh:mm:ss" in the year of started (UTC), or the next year when
// that puts it over a day before started (a start across New Year's Eve); a leap year
// without started, which serves durations between lines.
func stampTime(stamp string, started time.Time) time.Time {
	year := 2000
	if !started.IsZero() {
		year = started.Year()
	}
	t, err := time.Parse("2006-01-02 15:04:05", fmt.Sprintf("%04d-%s", year, stamp))
	if err != nil {
		return time.Time{}
	}
	if !started.IsZero() && t.Before(started.Add(-24*time.Hour)) {
		t = t.AddDate(1, 0, 0)
	}
	return t
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (r *run) firstStamp() time.Time {
	first := r.last
	for _, mk := range r.m {
		if !mk.at.IsZero() && mk.at.Before(first) {
			first = mk.at
		}
	}
	return first
}

// between is the seconds from a to b, or 0 when either is unknown or b is before a.
func between(a, b time.Time) float64 {
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return 0
	}
	return b.Sub(a).Seconds()
}

// phases are the run's phases: those it finished, then the one it was in.
func (r *run) phases() []engine.Phase {
	m := &r.m
	var out []engine.Phase
	add := func(name string, secs float64, src string) {
		out = append(out, engine.Phase{Name: name, Seconds: math.Max(0, secs), Source: src})
	}
	// going is the phase the run was in since the milestone at since: its time so far.
	going := func(name string, since mark) []engine.Phase {
		at := since.at
		if at.IsZero() {
			at = r.start
		}
		return append(out, engine.Phase{Name: name, Seconds: between(at, r.last), Source: since.line, Going: true, Since: at})
	}

	if !m[mLoadStarts].seen {
		return going(engine.PhaseProcessStart, mark{at: r.start})
	}
	add(engine.PhaseProcessStart, between(r.start, m[mLoadStarts].at), m[mLoadStarts].line)

	// the weights: download (when vLLM printed it), load, the rest of the model's loading
	if m[mDownloaded].seen {
		add(engine.PhaseWeightsDownload, m[mDownloaded].seconds, m[mDownloaded].line)
	}
	if !m[mWeightsLoaded].seen {
		switch {
		case m[mModelLoaded].seen: // a loader that does not say (not vLLM's default)
		case m[mDownloaded].seen:
			return going(engine.PhaseWeightsLoad, m[mDownloaded])
		case m[mShards].seen:
			return going(engine.PhaseWeightsLoad, firstOf(m[mShards], m[mDownloadBegins], m[mLoadStarts]))
		default:
			return going(engine.PhaseWeightsDownload, firstOf(m[mDownloadBegins], m[mLoadStarts]))
		}
	} else {
		add(engine.PhaseWeightsLoad, m[mWeightsLoaded].seconds, m[mWeightsLoaded].line)
	}
	if !m[mModelLoaded].seen {
		return going(engine.PhaseModelLoad, lastOf(m[mWeightsLoaded], m[mDownloaded], m[mLoadStarts]))
	}
	add(engine.PhaseModelLoad, m[mModelLoaded].seconds-m[mDownloaded].seconds-m[mWeightsLoaded].seconds, m[mModelLoaded].line)

	// the engine: torch.compile and the graphs inside its init
	if m[mCompiled].seen {
		add(engine.PhaseCompile, m[mCompiled].seconds, m[mCompiled].line)
	}
	if m[mGraphs].seen {
		add(engine.PhaseCUDAGraphs, m[mGraphs].seconds, m[mGraphs].line)
	}
	if !m[mEngineInit].seen {
		switch {
		case !m[mCompiled].seen && !m[mKVSized].seen && !r.eager:
			return going(engine.PhaseCompile, m[mModelLoaded])
		case m[mKVSized].seen && !m[mGraphs].seen && !r.eager:
			return going(engine.PhaseCUDAGraphs, m[mKVSized])
		default:
			return going(engine.PhaseEngineInit, lastOf(m[mGraphs], m[mCompiled], m[mModelLoaded]))
		}
	}
	add(engine.PhaseEngineInit, m[mEngineInit].seconds-m[mCompiled].seconds-m[mGraphs].seconds, m[mEngineInit].line)

	// the API server, and the whole
	if !m[mServing].seen {
		return going(engine.PhaseAPIServer, m[mEngineInit])
	}
	// uvicorn prints no time: unless the kubelet stamped it, the moment is the API server's
	// last stamped line before it ("Route: ..."), to a second
	served := m[mServing].at
	add(engine.PhaseAPIServer, between(m[mEngineInit].at, served), m[mServing].line)
	add(engine.PhaseServing, between(r.start, served), m[mServing].line)
	return out
}

// firstOf is the first of marks seen.
func firstOf(marks ...mark) mark {
	for _, mk := range marks {
		if mk.seen {
			return mk
		}
	}
	return mark{}
}

// lastOf is the first of marks seen, marks being listed latest first.
func lastOf(marks ...mark) mark { return firstOf(marks...) }
