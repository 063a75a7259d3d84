package soak

// Every Warning Event of the run is owed to a fault or a user action: the soak records when
// each fault and each action ran (and on what), collects the Warning Events of its namespaces
// as it goes (a namespace the workload deletes takes its Events with it), and at the end names
// every Warning nothing explains.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// warningGrace is how long after a fault or an action its consequences may still raise a
// Warning: a new pod's probes and its first metrics, the HPA's next sync, a controller's retry.
const warningGrace = 60 * time.Second

// faultWarnings are the Warning reasons a fault may raise on any object ("*": any reason). A
// fault not listed raises none: the operator's own faults (a leader killed or paused, watches
// cut or expired, etcd compacted) must not show on any model, and the storm's conflicts are
// explained on the storm's model alone (a span on it).
var faultWarnings = map[string][]string{
	"creation":       {"*"},                                                                          // every model starting at once
	faultAPIRestart:  {"*"},                                                                          // every controller and the kubelet lose the API server
	faultAdapterKill: {"FailedGetPodsMetric", "FailedComputeMetricsReplicas", "AutoscalingInactive"}, // the HPAs lose their metric
	// The node controller marks the node's pods; the replacements' probes fail while they start;
	// a model whose pods were all there has no ready pod, so its HPA has no metric meanwhile.
	faultNodeLost: {"NodeNotReady", "Unhealthy", "FailedGetPodsMetric", "FailedComputeMetricsReplicas", "AutoscalingInactive"},
	// The sick node's servers crash and back off; the operator names the GPU fault; their HPAs
	// lose the metric of a dead server.
	faultGPU: {"BackOff", "Unhealthy", "GPUError", "CrashLoopBackOff", "FailedGetPodsMetric", "FailedComputeMetricsReplicas", "AutoscalingInactive"},
	// A model registered (created, or its spec changed) or deleted meanwhile says its route failed.
	faultGatewayDown: {"GatewayUnavailable"},
}

// span is a stretch of time something ran: a fault (key "": any object may feel it), an action
// on one model (key ns/name) or on a namespace (key ns/*).
type span struct {
	from, to time.Time
	key      string
	what     string
}

// activity records the spans of a run, and when the world converged.
type activity struct {
	mu      sync.Mutex
	spans   []span
	settled []time.Time // each convergence's end, in order
}

// settle records that every invariant held at t: what ran before had its effects by then.
func (a *activity) settle(t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settled = append(a.settled, t)
}

// convergences returns a copy of the convergence times.
func (a *activity) convergences() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.settled...)
}

// begin records that what starts now on key; the func it returns ends the span.
func (a *activity) begin(key, what string) func() {
	if a == nil {
		return func() {}
	}
	a.mu.Lock()
	i := len(a.spans)
	a.spans = append(a.spans, span{from: time.Now(), to: time.Now().Add(24 * time.Hour), key: key, what: what})
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		a.spans[i].to = time.Now()
		a.mu.Unlock()
	}
}

// all returns a copy of the spans recorded.
func (a *activity) all() []span {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]span(nil), a.spans...)
}

// warning is one Warning Event seen, with the times it was first and last raised.
type warning struct {
	ns, kind, name, reason, note, reporter string
	first, last                            time.Time
	count                                  int32
}

func (w warning) String() string {
	return fmt.Sprintf("%s %s %s/%s x%d %s..%s (%s): %s", w.reason, w.kind, w.ns, w.name, w.count,
		w.first.Format("15:04:05"), w.last.Format("15:04:05"), w.reporter, w.note)
}

// warnings keeps the Warning Events seen so far, by UID.
type warnings struct {
	mu   sync.Mutex
	seen map[types.UID]warning
}

// collect lists the Warning Events of the soak's namespaces and keeps them.
func (ws *warnings) collect(ctx context.Context, namespaces []string) error {
	in := map[string]bool{}
	for _, ns := range namespaces {
		in[ns] = true
	}
	l, err := env.Kube.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		return err
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.seen == nil {
		ws.seen = map[types.UID]warning{}
	}
	for i := range l.Items {
		e := &l.Items[i]
		if !in[e.Namespace] {
			continue
		}
		ws.seen[e.UID] = warningOf(e)
	}
	return nil
}

// warningOf reads an Event's times whichever API wrote it (events.k8s.io or core/v1's fields).
func warningOf(e *eventsv1.Event) warning {
	first := e.EventTime.Time
	if first.IsZero() {
		first = e.DeprecatedFirstTimestamp.Time
	}
	last := first
	count := int32(1)
	if e.Series != nil {
		last, count = e.Series.LastObservedTime.Time, e.Series.Count
	} else if !e.DeprecatedLastTimestamp.IsZero() {
		last, count = e.DeprecatedLastTimestamp.Time, max(1, e.DeprecatedCount)
	}
	reporter := e.ReportingController
	if reporter == "" {
		reporter = e.DeprecatedSource.Component
	}
	return warning{ns: e.Regarding.Namespace, kind: e.Regarding.Kind, name: e.Regarding.Name, reason: e.Reason,
		note: e.Note, reporter: reporter, first: first, last: last, count: count}
}

// unexplained returns the Warnings no span explains: one explains a Warning when it concerns
// the Warning's object (its model, or the namespace) or is a fault, and it ran from before the
// Warning's first raise until within warningGrace of it (and, for a repeated Warning, its last).
// A span's effects last until the world converged after it (settled): at a thousand models a
// namespace remade or the control plane restarted takes minutes to settle, and what it raises
// meanwhile is its doing.
func unexplained(ws []warning, spans []span, settled []time.Time) []warning {
	ends := make([]time.Time, len(spans))
	for i, s := range spans {
		ends[i] = s.to
		if j := sort.Search(len(settled), func(j int) bool { return !settled[j].Before(s.to) }); j < len(settled) {
			ends[i] = settled[j]
		}
	}
	var out []warning
	for _, w := range ws {
		explained := func(at time.Time) bool {
			for i, s := range spans {
				if concerns(s, w) && !at.Before(s.from.Add(-2*time.Second)) && !at.After(ends[i].Add(warningGrace)) {
					return true
				}
			}
			return false
		}
		if !explained(w.first) || !explained(w.last) {
			out = append(out, w)
		}
	}
	return out
}

// concerns says whether span s may have caused w: a fault, the reasons faultWarnings gives
// it; an action on a model, any on the model and its children (named after it: a new pod's
// probes, its HPA before its first metrics); on a namespace, any in it.
func concerns(s span, w warning) bool {
	if s.key == "" {
		for _, r := range faultWarnings[s.what] {
			if r == "*" || r == w.reason {
				return true
			}
		}
		return false
	}
	ns, name, _ := strings.Cut(s.key, "/")
	if ns != w.ns {
		return false
	}
	return name == "*" || w.name == name || strings.HasPrefix(w.name, name+"-")
}

// all returns the Warnings seen, oldest first.
func (ws *warnings) all() []warning {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]warning, 0, len(ws.seen))
	for _, w := range ws.seen {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].first.Before(out[j].first) })
	return out
}

// byReason counts Warnings (their raises) by reason, for the report.
func byReason(ws []warning) string {
	n := map[string]int32{}
	for _, w := range ws {
		n[w.reason] += w.count
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// growth says whether a series grows over the run: the Theil-Sen slope (the median of the
// slopes between every two samples, so a spike after a restart does not count) of the samples
// after the first third (the warm-up: informers filling, the first convergence), times the time
// they span, above fraction of their median plus slack. Nil with fewer than six samples.
func growth(name string, at, xs []float64, fraction, slack float64) error {
	if len(xs) < 6 || len(at) != len(xs) {
		return nil
	}
	at, xs = at[len(at)/3:], xs[len(xs)/3:]
	var slopes []float64
	for i := range xs {
		for j := i + 1; j < len(xs); j++ {
			if dt := at[j] - at[i]; dt > 0 {
				slopes = append(slopes, (xs[j]-xs[i])/dt)
			}
		}
	}
	if len(slopes) == 0 {
		return nil
	}
	level := median(xs)
	grew := median(slopes) * (at[len(at)-1] - at[0])
	if bound := level*fraction + slack; grew > bound {
		return fmt.Errorf("%s grows by %.1f over %.0fs after the warm-up (median %.1f; bound %.1f)", name, grew, at[len(at)-1]-at[0], level, bound)
	}
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
