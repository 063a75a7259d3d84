package podmetrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// maxBody bounds what one pod's /metrics may cost to read; vLLM's and SGLang's pages are tens
// of KiB.
const maxBody = 4 << 20

// Redirected is why a pod's 3xx gives no reading: the address it names is not read.
const Redirected = "a redirect, not followed (the adapter reads only the pod it addressed)"

// Reading is one pod's queue and KV-cache use as last read.
type Reading struct {
	Waiting float64
	// Metric is the name the queue is served under: its engine's, as the page showed it
	// (ParsePage).
	Metric string
	// KV is the KV cache's use, 0 to 1, served under KVMetric (its engine's name); KVMetric is
	// empty when the page carried no KV gauge.
	KV       float64
	KVMetric string
	At       time.Time
}

// Config bounds the reads: every model pod read once each Period, each read given up after
// Timeout, at most Concurrency at once of pods that answered their last read (limitsOf: pods
// yet to answer have a pool of their own).
type Config struct {
	Period      time.Duration
	Timeout     time.Duration
	Concurrency int
	// NamespaceConcurrency bounds one namespace's reads in flight in each pool (default half
	// of Concurrency), so one tenant's pods cannot hold every slot.
	NamespaceConcurrency int
	// Pods lists the model pods (the informer's cache, never the API server).
	Pods func() ([]*corev1.Pod, error)
	// Owners resolves a pod's owner chain to its InferenceService (ServedBy); pods it does
	// not resolve are never read.
	Owners Owners
	// Clock schedules the reads and stamps them; the real clock when nil.
	Clock clock.WithTicker
	// Client reads the pods; a copy of it is used, which follows no redirect. Nil: one of its own.
	Client *http.Client
}

// Scraper reads each model pod on its own period and keeps its last reading, keyed by the
// pod's UID, until that pod's next attempt ends. A pod that does not answer costs its own
// reads, not anyone else's: reads of pods that have not answered their last attempt have a
// pool of their own, and each namespace its own bound in each pool.
type Scraper struct {
	cfg    Config
	client *http.Client
	clock  clock.WithTicker
	limits limits
	queues []Queue       // every engine's queue family, looked for on each page
	wake   chan struct{} // an attempt ended: slots are free
	ready  atomic.Bool

	mu      sync.Mutex
	pods    map[types.UID]*entry
	round   map[types.UID]string // pods the current round has still to attempt, and their namespace
	roundAt time.Time
	slowNS  map[string]bool // namespaces with a failed attempt this round
	unowned int

	m      collectors
	models map[[2]string]bool // the (namespace, model) queue series set last refresh
}

// entry is one pod's schedule and reading.
type entry struct {
	target   Target
	due      time.Time
	failures int  // attempts failed in a row
	answered bool // its last attempt read a queue
	tried    bool // it has had an attempt
	running  bool
	gone     bool // no longer a target; dropped when its running attempt ends
	reading  Reading
	// ttft is the pod's TTFT histogram's snapshots across reads (ttft.go), kept while its
	// pages carry one.
	ttft ttftHistory
}

// New returns a Scraper whose metrics are registered with reg.
func New(cfg Config, reg prometheus.Registerer) (*Scraper, error) {
	if cfg.Period <= 0 || cfg.Timeout <= 0 || cfg.Concurrency <= 0 || cfg.Pods == nil || cfg.Owners == nil || cfg.NamespaceConcurrency < 0 {
		return nil, fmt.Errorf("podmetrics: period, timeout, concurrency, pods and owners are required")
	}
	var client http.Client
	if cfg.Client != nil {
		client = *cfg.Client
	} else {
		client.Transport = &http.Transport{
			// No connection kept between periods: a kept one costs its two goroutines and
			// buffers, tens of KB a pod (most of the adapter's memory above its base at 1,000
			// pods, docs/benchmarks.md), against one plain-HTTP handshake a pod a period.
			DisableKeepAlives:  true,
			DisableCompression: true,
		}
	}
	// A model pod runs its tenant's image: a redirect would have the adapter read, from its own
	// network position, whatever the pod names (another model's queue, or any in-cluster URL).
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	s := &Scraper{cfg: cfg, client: &client, clock: clk, limits: limitsOf(cfg.Concurrency, cfg.NamespaceConcurrency),
		queues: Queues(), wake: make(chan struct{}, 1), pods: map[types.UID]*entry{}, m: newCollectors(), models: map[[2]string]bool{}}
	if err := s.m.register(reg); err != nil {
		return nil, err
	}
	return s, nil
}

// Reading is the pod's queue from its last attempt, when that attempt answered and was
// within the last three periods: a scraper that has stalled serves nothing rather than an old
// queue. It is keyed by UID: a pod recreated under its name (a StatefulSet's) starts without.
func (s *Scraper) Reading(pod *corev1.Pod, now time.Time) (Reading, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.pods[pod.UID]
	if !ok || e.gone || !e.answered || now.Sub(e.reading.At) > 3*s.cfg.Period {
		return Reading{}, false
	}
	return e.reading, true
}

// TTFT is the pod's p95 time to first token over window, in milliseconds, from the
// snapshots of its histogram its reads kept (ttftHistory.p95), stamped with its last read:
// served while Reading is. ok is false before two reads of the histogram.
// Asking for a window keeps the pod's snapshots for it from then on (at most MaxTTFTWindow).
func (s *Scraper) TTFT(pod *corev1.Pod, now time.Time, window time.Duration) (ms float64, at time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, found := s.pods[pod.UID]
	if !found || e.gone || !e.answered || now.Sub(e.reading.At) > 3*s.cfg.Period {
		return 0, time.Time{}, false
	}
	sec, _, ok := e.ttft.p95(window)
	return sec * 1000, e.reading.At, ok
}

// Ready is nil once the first round has ended (every model pod listed at the start has had an
// attempt end, but in namespaces where one failed): until then an HPA would see pods without
// readings that merely have not been read yet.
func (s *Scraper) Ready() error {
	if s.ready.Load() {
		return nil
	}
	return errors.New("the first pass over the model pods has not ended")
}

// Run reads until ctx ends: pods are listed again every quarter period, and each is read when
// its period comes round and a slot within the bounds is free.
func (s *Scraper) Run(ctx context.Context) {
	refresh := s.clock.NewTicker(max(s.cfg.Period/4, time.Millisecond))
	defer refresh.Stop()
	var reads sync.WaitGroup
	defer reads.Wait() // ctx has ended: every read is being cut
	s.refresh()
	for {
		wakeAt := s.dispatch(ctx, &reads)
		var timer clock.Timer
		var fire <-chan time.Time
		if !wakeAt.IsZero() {
			timer = s.clock.NewTimer(wakeAt.Sub(s.clock.Now()))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-refresh.C():
			s.refresh()
		case <-fire:
		case <-s.wake:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// dispatch starts the reads that are due and fit the bounds, and returns when the next
// not-yet-due read is (zero: none); a due read waiting for a slot starts when one frees.
func (s *Scraper) dispatch(ctx context.Context, reads *sync.WaitGroup) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	cands := make([]candidate, 0, len(s.pods))
	for uid, e := range s.pods {
		c := candidate{uid: uid, namespace: e.target.Namespace, due: e.due, running: e.running, class: answered}
		switch {
		case !e.tried:
			c.class = fresh
		case !e.answered:
			c.class = failed
		}
		cands = append(cands, c)
	}
	start, wakeAt := pick(cands, now, s.limits)
	for _, uid := range start {
		e := s.pods[uid]
		e.running = true
		reads.Add(1)
		go func(t Target, started time.Time) {
			defer reads.Done()
			s.attempt(ctx, uid, t, started)
		}(e.target, now)
	}
	return wakeAt
}

// attempt reads one pod and records what it read: the reading is served from now until the
// pod's next attempt ends.
func (s *Scraper) attempt(ctx context.Context, uid types.UID, t Target, started time.Time) {
	page, err := s.read(ctx, t.URL)
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}()
	e, ok := s.pods[uid]
	if !ok {
		return
	}
	e.running = false
	if e.gone {
		delete(s.pods, uid)
		return
	}
	if ctx.Err() != nil {
		return // shutting down: a cut read says nothing of the pod
	}
	e.tried = true
	if err != nil {
		s.m.scrapes.WithLabelValues("error").Inc()
		klog.V(2).InfoS("Reading a model pod's queue", "pod", klog.KRef(t.Namespace, t.Name), "err", err)
		e.answered, e.reading = false, Reading{}
		e.failures++
		e.due = now.Add(backoff(s.cfg.Period, e.failures))
		s.slowNS[t.Namespace] = true
	} else {
		s.m.scrapes.WithLabelValues("ok").Inc()
		r := Reading{Waiting: page.Waiting, Metric: page.Queue.Metric, At: now}
		if page.HasKV {
			r.KV, r.KVMetric = page.KV, page.Queue.KVMetric
		}
		if page.TTFT != nil {
			e.ttft.add(*page.TTFT, now)
		} else {
			e.ttft = ttftHistory{keep: e.ttft.keep}
		}
		e.answered, e.reading, e.failures = true, r, 0
		e.due = started.Add(s.cfg.Period)
	}
	delete(s.round, uid)
	s.endRound(now)
}

// backoff is how long a pod that failed n attempts in a row waits for its next: a period,
// doubling to at most four, so pods that never answer cost less each round.
func backoff(period time.Duration, n int) time.Duration {
	if n > 3 {
		n = 3
	}
	return period << (n - 1)
}

// refresh lists the model pods: new ones are due now, those gone are dropped, and the queue
// series follow the readings.
func (s *Scraper) refresh() {
	pods, err := s.cfg.Pods()
	if err != nil {
		klog.ErrorS(err, "Listing model pods")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	seen := make(map[types.UID]bool, len(pods))
	s.unowned = 0
	for _, p := range pods {
		t, ok := TargetOf(p)
		if !ok {
			continue
		}
		model, ok := ServedBy(p, s.cfg.Owners)
		if !ok {
			s.unowned++
			continue
		}
		t.Model = model
		seen[p.UID] = true
		if e, ok := s.pods[p.UID]; ok {
			e.target, e.gone = t, false
		} else {
			s.pods[p.UID] = &entry{target: t, due: now}
		}
	}
	for uid, e := range s.pods {
		if seen[uid] {
			continue
		}
		if e.running {
			e.gone = true
		} else {
			delete(s.pods, uid)
		}
		delete(s.round, uid)
	}
	s.endRound(now)
	s.setSeries(len(seen))
}

// endRound ends the round when every pod it began with has had an attempt end (or is gone),
// but for pods of namespaces where an attempt failed this round: their namespace's bound
// paces them, and a tenant's silent pods must not hold the adapter unready. It then begins
// the next round with the pods there are now.
func (s *Scraper) endRound(now time.Time) {
	for _, ns := range s.round {
		if !s.slowNS[ns] {
			return
		}
	}
	if s.round != nil {
		s.m.passes.Inc()
		s.m.passSeconds.Observe(now.Sub(s.roundAt).Seconds())
		s.ready.Store(true)
	}
	s.round = make(map[types.UID]string, len(s.pods))
	for uid, e := range s.pods {
		if !e.gone {
			s.round[uid] = e.target.Namespace
		}
	}
	s.roundAt, s.slowNS = now, map[string]bool{}
	if len(s.round) == 0 { // nothing to read: the round is over as it begins
		s.ready.Store(true)
	}
}

// setSeries sets each model's queue from the readings held now.
func (s *Scraper) setSeries(targets int) {
	queues := map[[2]string]float64{}
	for _, e := range s.pods {
		if e.answered && !e.gone {
			queues[[2]string{e.target.Namespace, e.target.Model}] += e.reading.Waiting
		}
	}
	for model, q := range queues {
		s.m.queue.WithLabelValues(model[0], model[1]).Set(q)
	}
	for model := range s.models {
		if _, ok := queues[model]; !ok {
			s.m.queue.DeleteLabelValues(model[0], model[1])
		}
	}
	s.models = make(map[[2]string]bool, len(queues))
	for model := range queues {
		s.models[model] = true
	}
	s.m.targets.Set(float64(targets))
	s.m.unowned.Set(float64(s.unowned))
}

func (s *Scraper) read(ctx context.Context, url string) (Page, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Page{}, err
	}
	// The text format: the one vLLM's and SGLang's prometheus_client always serve and the
	// parser reads.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return Page{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		return Page{}, fmt.Errorf("GET %s: %d: %s", url, resp.StatusCode, Redirected)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		return Page{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParsePage(io.LimitReader(resp.Body, maxBody), s.queues)
}
