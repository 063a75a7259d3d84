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

package reconcile

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The phases of a vLLM start, in the order v0.11 goes through them. Each but PhaseServing is
// a part of the start: its own time, not counting the parts inside it, so the parts add up to
// about the whole.
const (
	// PhaseProcessStart is the container's start to the engine's "Starting to load model":
	// Python's imports, the model's config and tokenizer, the engine process, NCCL. From stamps.
	PhaseProcessStart = "process start"
	// PhaseWeightsDownload is the weights' download from the Hub (vLLM prints it when it took
	// over half a second: absent when the weights were cached or local).
	PhaseWeightsDownload = "weights download"
	// PhaseWeightsLoad is reading the weights onto the GPUs.
	PhaseWeightsLoad = "weights load"
	// PhaseModelLoad is the rest of vLLM's model loading: building the model, post-processing
	// its weights ("Model loading took" less the download and the load).
	PhaseModelLoad = "model load"
	// PhaseCompile is torch.compile (Dynamo and Inductor, or loading the compiled graphs).
	PhaseCompile = "torch.compile"
	// PhaseCUDAGraphs is capturing the CUDA graphs.
	PhaseCUDAGraphs = "CUDA graph capture"
	// PhaseEngineInit is the rest of the engine's init: profiling memory, allocating the KV
	// cache, warming up ("init engine ... took" less torch.compile and the graphs).
	PhaseEngineInit = "engine init"
	// PhaseAPIServer is the engine's init to uvicorn's "Application startup complete.": the
	// API server's own start. From stamps.
	PhaseAPIServer = "API server start"
	// PhaseServing is the whole start: the container's start to "Application startup
	// complete.". Not a part: SlowestPhase measures the others against it.
	PhaseServing = "serving"
)

// Phase is one phase of a start.
type Phase struct {
	Name string
	// Seconds is the phase's own time; for a phase still going, its time so far (to the last
	// stamp in the log).
	Seconds float64
	// Source is the log line the phase's duration was read from (without the kubelet's stamp,
	// process prefix or colour codes); for a phase still going, the line it began at.
	Source string
	// Going is true for the phase a log cut short was in: the start had not finished it.
	// Seconds is then to the log's last stamp, and a phase that prints nothing while it lasts
	// (a download) counts none of its silence: Since is when it began, for a caller who knows
	// the time to measure it to now.
	Going bool
	Since time.Time
}

// A stamped line of vLLM's logger, after its process prefix: level, "MM-DD hh:mm:ss",
// [file:line], message. Anything may come before the level (VLLM_LOGGING_PREFIX).
var vllmLine = regexp.MustCompile(`(?:^|\s)(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d) \[[^\]]+:\d+\] (.*)$`)

// ansiEscape is a terminal colour code (vLLM colours its process prefixes).
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*m")

// procPrefix is a process's prefix, "(EngineCore_DP0 pid=243) ", once uncoloured.
var procPrefix = regexp.MustCompile(`^\(([A-Za-z0-9_]+ pid=\d+)\) ?`)

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
func StartPhasesOf(log string, started time.Time) []Phase {
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
		proc := ""
		if m := procPrefix.FindStringSubmatch(line); m != nil {
			proc, line = m[1], line[len(m[0]):]
		}
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
func (r *run) phases() []Phase {
	m := &r.m
	var out []Phase
	add := func(name string, secs float64, src string) {
		out = append(out, Phase{Name: name, Seconds: math.Max(0, secs), Source: src})
	}
	// going is the phase the run was in since the milestone at since: its time so far.
	going := func(name string, since mark) []Phase {
		at := since.at
		if at.IsZero() {
			at = r.start
		}
		return append(out, Phase{Name: name, Seconds: between(at, r.last), Source: since.line, Going: true, Since: at})
	}

	if !m[mLoadStarts].seen {
		return going(PhaseProcessStart, mark{at: r.start})
	}
	add(PhaseProcessStart, between(r.start, m[mLoadStarts].at), m[mLoadStarts].line)

	// the weights: download (when vLLM printed it), load, the rest of the model's loading
	if m[mDownloaded].seen {
		add(PhaseWeightsDownload, m[mDownloaded].seconds, m[mDownloaded].line)
	}
	if !m[mWeightsLoaded].seen {
		switch {
		case m[mModelLoaded].seen: // a loader that does not say (not vLLM's default)
		case m[mDownloaded].seen:
			return going(PhaseWeightsLoad, m[mDownloaded])
		case m[mShards].seen:
			return going(PhaseWeightsLoad, firstOf(m[mShards], m[mDownloadBegins], m[mLoadStarts]))
		default:
			return going(PhaseWeightsDownload, firstOf(m[mDownloadBegins], m[mLoadStarts]))
		}
	} else {
		add(PhaseWeightsLoad, m[mWeightsLoaded].seconds, m[mWeightsLoaded].line)
	}
	if !m[mModelLoaded].seen {
		return going(PhaseModelLoad, lastOf(m[mWeightsLoaded], m[mDownloaded], m[mLoadStarts]))
	}
	add(PhaseModelLoad, m[mModelLoaded].seconds-m[mDownloaded].seconds-m[mWeightsLoaded].seconds, m[mModelLoaded].line)

	// the engine: torch.compile and the graphs inside its init
	if m[mCompiled].seen {
		add(PhaseCompile, m[mCompiled].seconds, m[mCompiled].line)
	}
	if m[mGraphs].seen {
		add(PhaseCUDAGraphs, m[mGraphs].seconds, m[mGraphs].line)
	}
	if !m[mEngineInit].seen {
		switch {
		case !m[mCompiled].seen && !m[mKVSized].seen && !r.eager:
			return going(PhaseCompile, m[mModelLoaded])
		case m[mKVSized].seen && !m[mGraphs].seen && !r.eager:
			return going(PhaseCUDAGraphs, m[mKVSized])
		default:
			return going(PhaseEngineInit, lastOf(m[mGraphs], m[mCompiled], m[mModelLoaded]))
		}
	}
	add(PhaseEngineInit, m[mEngineInit].seconds-m[mCompiled].seconds-m[mGraphs].seconds, m[mEngineInit].line)

	// the API server, and the whole
	if !m[mServing].seen {
		return going(PhaseAPIServer, m[mEngineInit])
	}
	// uvicorn prints no time: unless the kubelet stamped it, the moment is the API server's
	// last stamped line before it ("Route: ..."), to a second
	served := m[mServing].at
	add(PhaseAPIServer, between(m[mEngineInit].at, served), m[mServing].line)
	add(PhaseServing, between(r.start, served), m[mServing].line)
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

// SlowestPhase is the longest part of a start (PhaseServing aside) and what to say of it:
// "SlowStart: weights download 14m of 17m", measured against the whole start (PhaseServing),
// or for a start still going against its time so far, "SlowStart: weights download 14m of 17m
// so far". ok is false when there is no part.
func SlowestPhase(phases []Phase) (slowest Phase, message string, ok bool) {
	total, served, sum := 0.0, false, 0.0
	for _, p := range phases {
		if p.Name == PhaseServing {
			total, served = p.Seconds, true
			continue
		}
		sum += p.Seconds
		if !ok || p.Seconds > slowest.Seconds {
			slowest, ok = p, true
		}
	}
	if !ok {
		return Phase{}, "", false
	}
	if !served {
		total = sum
	}
	total = math.Max(total, slowest.Seconds)
	message = fmt.Sprintf("SlowStart: %s %s of %s", slowest.Name, shortDuration(slowest.Seconds), shortDuration(total))
	if !served {
		message += " so far"
	}
	return slowest, message, true
}

// shortDuration is seconds as a person says them: "40s", "14m", "1h05m".
func shortDuration(secs float64) string {
	s := int(math.Round(secs))
	switch {
	case s < 90:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm", int(math.Round(secs/60)))
	default:
		m := int(math.Round(secs / 60))
		return fmt.Sprintf("%dh%02dm", m/60, m%60)
	}
}
