package soak

// The leader's resources sampled through the run, and the report at the end.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/example/inferenceservice-operator/test/operator"
)

// sample is one reading of the leader's process.
type sample struct {
	at         time.Duration
	replica    string
	rss        int64
	goroutines float64
}

// sampler collects samples of the leader.
type sampler struct {
	mu      sync.Mutex
	samples []sample
}

// run samples every period until ctx ends.
func (sm *sampler) run(ctx context.Context, s *soakRun, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			sm.take(s)
		}
	}
}

// take reads the current leader's RSS and goroutines (skipped while there is no leader).
func (sm *sampler) take(s *soakRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lead, _, err := leader(ctx, s.replicas)
	if err != nil {
		return
	}
	p := lead.process()
	rss, err := p.RSSBytes()
	if err != nil {
		return
	}
	fams, err := p.Scrape()
	if err != nil {
		return
	}
	smp := sample{at: time.Since(s.began), replica: fmt.Sprintf("%s pid %d", lead.name, p.Pid()), rss: rss,
		goroutines: operator.SumCounter(fams, "go_goroutines", nil)}
	if err := s.warns.collect(ctx, s.namespaces()); err != nil {
		s.journal.logf("the Warning Events not read: %v", err)
	}
	s.journal.logf("sample: leader %s RSS %.1f MiB, %.0f goroutines", smp.replica, float64(rss)/(1<<20), smp.goroutines)
	sm.mu.Lock()
	sm.samples = append(sm.samples, smp)
	sm.mu.Unlock()
}

// series are the samples' times (seconds into the run), RSS (MiB) and goroutines, in order.
func (sm *sampler) series() (at, rss, goroutines []float64) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	for _, x := range sm.samples {
		at = append(at, x.at.Seconds())
		rss = append(rss, float64(x.rss)/(1<<20))
		goroutines = append(goroutines, x.goroutines)
	}
	return at, rss, goroutines
}

// report is the run's figures: faults by kind with the worst time to converge after each,
// the writes at rest, and the leader's samples.
func (s *soakRun) report(faults []fault, count map[string]int, worst, worstEnd map[string]time.Duration, rest restFigures, sm *sampler, load *loadFigures, windows []faultWindow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: seed %d, %d models (+ the storm's and the probe's), %g minutes of chaos, %s in all\n",
		s.cfg.seed, s.cfg.models, s.cfg.minutes, time.Since(s.began).Round(time.Second))
	fmt.Fprintf(&b, "replay: %s\n", s.cfg.replay())
	fmt.Fprintf(&b, "faults run (%d); worst time to converge, from the first check (the workload held, a probe edited) and from the fault's end (a user action in flight finishing first):\n", len(faults))
	kinds := make([]string, 0, len(count))
	for k := range count {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %-18s x%-3d %6.1fs  %6.1fs\n", k, count[k], worst[k].Seconds(), worstEnd[k].Seconds())
	}
	fmt.Fprintf(&b, "replica exits nobody asked for: %d\n", s.unplanned())
	fmt.Fprintf(&b, "writes at rest: %d in %s (proxies, without the Lease's), settled %.1fs after convergence; the leader's own count with its Lease renewals: %d\n",
		rest.writes, rest.window, rest.settled.Seconds(), rest.operatorWrites)
	b.WriteString(rest.what)
	if rest.trail != "" {
		b.WriteString("writes at rest to one object more than once, in order:\n" + rest.trail)
	}
	fmt.Fprintf(&b, "load on %s: %d requests (%d failed), the HPA moved it to %d replicas at most\n", s.busy.key(), load.sent, load.failed, load.peak)
	if lost := lostByFault(load.failures, windows); lost != "" {
		b.WriteString("failed requests by the fault striking or converging then (its start to the check after it), and how:\n" + lost)
	}
	ws := s.warns.all()
	fmt.Fprintf(&b, "Warning Events (%d objects, by reason and raises): %s\n", len(ws), byReason(ws))
	sm.mu.Lock()
	defer sm.mu.Unlock()
	fmt.Fprintf(&b, "leader samples (%d):\n", len(sm.samples))
	for _, x := range sm.samples {
		fmt.Fprintf(&b, "  %7.1fs %-12s RSS %6.1f MiB  goroutines %4.0f\n", x.at.Seconds(), x.replica, float64(x.rss)/(1<<20), x.goroutines)
	}
	return b.String()
}
