// The ramp's arithmetic, apart from the cluster: the load's schedule, the sliding p95 of time
// to first token against the objective, GPU-minutes from the replica samples, the table and
// the plot.

package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Schedule is the bounded ramp: Base requests a second for Step, doubled each Step for Up
// steps, then halved each Step back to Base.
type Schedule struct {
	Base float64
	Up   int
	Step time.Duration
}

// levels are the request rates of the steps in order: Base x 1, 2, 4 ... 2^(Up-1), then
// 2^(Up-2) ... 1.
func (s Schedule) levels() []float64 {
	var out []float64
	for i := range s.Up {
		out = append(out, s.Base*math.Pow(2, float64(i)))
	}
	for i := s.Up - 2; i >= 0; i-- {
		out = append(out, s.Base*math.Pow(2, float64(i)))
	}
	return out
}

// Duration is the whole ramp.
func (s Schedule) Duration() time.Duration { return time.Duration(len(s.levels())) * s.Step }

// Rate is the request rate at t into the ramp; 0 past its end.
func (s Schedule) Rate(t time.Duration) float64 {
	l := s.levels()
	if t < 0 || s.Step <= 0 {
		return 0
	}
	i := int(t / s.Step)
	if i >= len(l) {
		return 0
	}
	return l[i]
}

// Request is one request of the load: when it was sent (from the ramp's start), its time to
// first token, and whether it failed (refused, an error, or never sent: the client's bound).
type Request struct {
	At     time.Duration
	TTFT   time.Duration
	Failed bool
	Why    string // a failure's kind
}

// Sample is one reading of a model's pods: those holding GPUs (scheduled, not ended) and the
// ready ones.
type Sample struct {
	At        time.Duration `json:"at_ns"`
	Scheduled int           `json:"scheduled"`
	Ready     int           `json:"ready"`
}

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

// failedTTFT stands for a failed request's time to first token: it counts as over any objective.
const failedTTFT = time.Duration(math.MaxInt64)

// OverObjective is the time, in whole seconds of the run, at which the p95 time to first token
// of the requests sent in the window before it was above the objective (failed requests count
// as infinitely late); seconds whose window holds no request do not count.
func OverObjective(reqs []Request, end, window, objective time.Duration) time.Duration {
	sorted := slices.Clone(reqs)
	slices.SortFunc(sorted, func(a, b Request) int { return int(a.At - b.At) })
	var over time.Duration
	lo, hi := 0, 0
	for t := time.Second; t <= end; t += time.Second {
		for hi < len(sorted) && sorted[hi].At < t {
			hi++
		}
		for lo < hi && sorted[lo].At < t-window {
			lo++
		}
		if hi == lo {
			continue
		}
		ds := make([]time.Duration, 0, hi-lo)
		for _, r := range sorted[lo:hi] {
			if r.Failed {
				ds = append(ds, failedTTFT)
			} else {
				ds = append(ds, r.TTFT)
			}
		}
		if quantile(ds, 0.95) > objective {
			over += time.Second
		}
	}
	return over
}

// GPUMinutes integrates the pods holding GPUs over the samples (each reading holds until the
// next, the last until end), gpus a pod.
func GPUMinutes(samples []Sample, end time.Duration, gpus int) float64 {
	var podSeconds float64
	for i, s := range samples {
		next := end
		if i+1 < len(samples) {
			next = samples[i+1].At
		}
		if next > s.At {
			podSeconds += float64(s.Scheduled) * (next - s.At).Seconds()
		}
	}
	return podSeconds * float64(gpus) / 60
}

// SignalResult is one signal's row.
type SignalResult struct {
	Signal string `json:"signal"`
	// Target is the HPA's target as the model's spec states it.
	Target      string  `json:"target"`
	Sent        int     `json:"sent"`
	Failed      int     `json:"failed"`
	OverSeconds float64 `json:"over_objective_s"`
	GPUMinutes  float64 `json:"gpu_minutes"`
	MaxReplicas int     `json:"max_replicas"`
	P50TTFTMs   float64 `json:"p50_ttft_ms"`
	P95TTFTMs   float64 `json:"p95_ttft_ms"`
	// Failures counts the failed requests by kind and the second of the run each was sent.
	Failures map[string][]int `json:"failures,omitempty"`
	Samples  []Sample         `json:"samples"`
}

// Summarize makes a signal's row from its requests and samples.
func Summarize(signal, target string, reqs []Request, samples []Sample, end, window, objective time.Duration, gpus int) SignalResult {
	r := SignalResult{Signal: signal, Target: target, Sent: len(reqs), Samples: samples,
		OverSeconds: OverObjective(reqs, end, window, objective).Seconds(), GPUMinutes: GPUMinutes(samples, end, gpus)}
	var ok []time.Duration
	for _, q := range reqs {
		if q.Failed {
			r.Failed++
			if r.Failures == nil {
				r.Failures = map[string][]int{}
			}
			r.Failures[q.Why] = append(r.Failures[q.Why], int(q.At.Seconds()))
		} else {
			ok = append(ok, q.TTFT)
		}
	}
	for _, s := range samples {
		r.MaxReplicas = max(r.MaxReplicas, s.Scheduled)
	}
	r.P50TTFTMs, r.P95TTFTMs = ms(quantile(ok, 0.5)), ms(quantile(ok, 0.95))
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Result is one run.
type Result struct {
	Machine     string         `json:"machine"`
	Concurrent  bool           `json:"signals_concurrent"`
	Schedule    Schedule       `json:"schedule"`
	ObjectiveMs float64        `json:"objective_p95_ttft_ms"`
	WindowS     float64        `json:"window_s"`
	Model       string         `json:"model"`
	Signals     []SignalResult `json:"signals"`
	// Load is the schedule's rate each 10 s, for the plot.
	Load []float64 `json:"load_rps_each_10s"`
}

// WriteTable writes the markdown table.
func WriteTable(w io.Writer, r Result) {
	fmt.Fprintf(w, "| signal (target) | time over the objective | GPU-minutes | max replicas | requests (failed) | TTFT p50 / p95 |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- |\n")
	for _, s := range r.Signals {
		fmt.Fprintf(w, "| %s (%s) | %.0f s | %.1f | %d | %d (%d) | %.0f / %.0f ms |\n", s.Signal, s.Target, s.OverSeconds,
			s.GPUMinutes, s.MaxReplicas, s.Sent, s.Failed, s.P50TTFTMs, s.P95TTFTMs)
	}
}

// plot colours, one a signal in order, then the load's.
var plotColours = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

const loadColour = "#7f7f7f"

// WriteSVG draws each signal's pods holding GPUs over the run and the load's request rate (its
// own scale, on the right).
func WriteSVG(w io.Writer, r Result) {
	const width, height, left, right, top, bottom = 720, 360, 50, 60, 30, 40
	end := r.Schedule.Duration().Seconds()
	maxRep := 1
	for _, s := range r.Signals {
		for _, x := range s.Samples {
			maxRep = max(maxRep, x.Scheduled)
			end = max(end, x.At.Seconds())
		}
	}
	maxRate := 1.0
	for _, l := range r.Load {
		maxRate = max(maxRate, l)
	}
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	x := func(sec float64) float64 { return left + pw*sec/end }
	yRep := func(n float64) float64 { return top + ph*(1-n/float64(maxRep)) }
	yRate := func(v float64) float64 { return top + ph*(1-v/maxRate) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">Pods holding GPUs during the ramp, per autoscaling signal (load in grey, right scale)</text>`+"\n", left)
	// axes and grid
	for n := 0; n <= maxRep; n++ {
		y := yRep(float64(n))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%d</text>`+"\n",
			left, y, width-right, y, left-6, y+4, n)
	}
	for m := 0.0; m*60 <= end; m++ {
		xx := x(m * 60)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n",
			xx, top, xx, height-bottom, xx, height-bottom+14, m)
	}
	for _, v := range []float64{0, maxRate / 2, maxRate} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="%s">%.0f req/s</text>`+"\n", width-right+4, yRate(v)+4, loadColour, v)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">minutes</text>`+"\n", width-right, height-6)
	fmt.Fprintf(&b, `<text x="12" y="%.1f" transform="rotate(-90 12 %.1f)" text-anchor="middle">pods</text>`+"\n", top+ph/2, top+ph/2)
	// the load, a step each 10 s
	var pts []string
	for i, l := range r.Load {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(float64(i*10)), yRate(l), x(math.Min(float64(i*10+10), end)), yRate(l)))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-dasharray="4 3" points="%s"/>`+"\n", loadColour, strings.Join(pts, " "))
	// each signal: a step line of its pods holding GPUs
	for i, s := range r.Signals {
		c := plotColours[i%len(plotColours)]
		// a corner where the count changes; each signal 2 px apart, so equal counts stay visible
		pts = pts[:0]
		off := float64(2 * i)
		for j, p := range s.Samples {
			y := yRep(float64(p.Scheduled)) - off
			if j == 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.At.Seconds()), y))
			} else if p.Scheduled != s.Samples[j-1].Scheduled {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(p.At.Seconds()), yRep(float64(s.Samples[j-1].Scheduled))-off, x(p.At.Seconds()), y))
			}
			if j == len(s.Samples)-1 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(end), y))
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s: %.0f s over the objective, %.1f GPU-min</text>`+"\n", left+i*250, height-6, c, s.Signal, s.OverSeconds, s.GPUMinutes)
	}
	b.WriteString("</svg>\n")
	_, _ = io.WriteString(w, b.String())
}

// loadEach10s is the schedule's rate every 10 s, for the plot.
func loadEach10s(s Schedule) []float64 {
	var out []float64
	for t := time.Duration(0); t < s.Duration(); t += 10 * time.Second {
		out = append(out, s.Rate(t))
	}
	return out
}
