package podmetrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// maxBody bounds what one pod's /metrics may cost to read; vLLM's page is tens of KiB.
const maxBody = 4 << 20

// Reading is one pod's queue as last read.
type Reading struct {
	Waiting float64
	At      time.Time
}

// Config bounds the reads: one pass over every ready model pod each Period, at most
// Concurrency requests at once, each given up after Timeout.
type Config struct {
	Period      time.Duration
	Timeout     time.Duration
	Concurrency int
	// Pods lists the model pods (the informer's cache, never the API server).
	Pods func() ([]*corev1.Pod, error)
	// NamespaceConcurrency bounds the reads in flight in one namespace.
	NamespaceConcurrency int
	// Owners resolves a pod's owner chain up to its InferenceService.
	Owners Owners
	Clock  clock.WithTicker
	Client *http.Client
}

// Scraper reads every ready model pod's queue on its period and keeps the last reading of each.
type Scraper struct {
	cfg      Config
	client   *http.Client
	mu       sync.RWMutex
	readings map[types.NamespacedName]Reading
	m        collectors
	models   map[[2]string]bool // the (namespace, model) series set last pass
}

// New returns a Scraper whose metrics are registered with reg.
func New(cfg Config, reg prometheus.Registerer) (*Scraper, error) {
	if cfg.Period <= 0 || cfg.Timeout <= 0 || cfg.Concurrency <= 0 || cfg.Pods == nil {
		return nil, fmt.Errorf("podmetrics: period, timeout, concurrency and pods are required")
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			// One kept connection per pod: a pass reuses it instead of a handshake per read.
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     3 * cfg.Period,
			DisableCompression:  true,
		}}
	}
	s := &Scraper{cfg: cfg, client: client, readings: map[types.NamespacedName]Reading{}, m: newCollectors(), models: map[[2]string]bool{}}
	if err := s.m.register(reg); err != nil {
		return nil, err
	}
	return s, nil
}

// Reading is the pod's queue when it was read within the last three periods: a scraper that
// has stalled serves nothing rather than an old queue.
func (s *Scraper) Reading(pod *corev1.Pod, now time.Time) (Reading, bool) {
	s.mu.RLock()
	r, ok := s.readings[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]
	s.mu.RUnlock()
	if !ok || now.Sub(r.At) > 3*s.cfg.Period {
		return Reading{}, false
	}
	return r, true
}

// Ready is nil once the first pass has ended.
func (s *Scraper) Ready() error { return nil }

// Run reads every period until ctx ends; a pass longer than the period delays the next one
// rather than overlapping it.
func (s *Scraper) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Period)
	defer t.Stop()
	for {
		s.Pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type result struct {
	target  Target
	reading Reading
	err     error
}

// Pass reads every ready model pod once and replaces the readings: a pod that failed to answer
// or is no longer ready has none.
func (s *Scraper) Pass(ctx context.Context) {
	start := time.Now()
	pods, err := s.cfg.Pods()
	if err != nil {
		klog.ErrorS(err, "Listing model pods")
		return
	}
	var targets []Target
	for _, p := range pods {
		if t, ok := TargetOf(p); ok {
			targets = append(targets, t)
		}
	}
	results := s.readAll(ctx, targets)
	if ctx.Err() != nil {
		return // shutting down: a half pass would drop good readings
	}

	next := make(map[types.NamespacedName]Reading, len(results))
	queues := map[[2]string]float64{}
	for _, r := range results {
		model := [2]string{r.target.Namespace, r.target.Model}
		if r.err != nil {
			s.m.scrapes.WithLabelValues("error").Inc()
			klog.V(2).InfoS("Reading a model pod's queue", "pod", klog.KRef(r.target.Namespace, r.target.Name), "err", r.err)
			continue
		}
		s.m.scrapes.WithLabelValues("ok").Inc()
		next[types.NamespacedName{Namespace: r.target.Namespace, Name: r.target.Name}] = r.reading
		queues[model] += r.reading.Waiting
	}
	s.mu.Lock()
	s.readings = next
	s.mu.Unlock()

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
	s.m.targets.Set(float64(len(targets)))
	s.m.passes.Inc()
	s.m.passSeconds.Observe(time.Since(start).Seconds())
}

// readAll reads the targets with at most Concurrency requests in flight.
func (s *Scraper) readAll(ctx context.Context, targets []Target) []result {
	results := make([]result, len(targets))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(s.cfg.Concurrency, len(targets)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				w, err := s.read(ctx, targets[i].URL)
				results[i] = result{target: targets[i], reading: Reading{Waiting: w, At: time.Now()}, err: err}
			}
		}()
	}
	for i := range targets {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

func (s *Scraper) read(ctx context.Context, url string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	// The text format: the one vLLM's prometheus_client always serves and the parser reads.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseWaiting(io.LimitReader(resp.Body, maxBody))
}

type collectors struct {
	queue       *prometheus.GaugeVec
	scrapes     *prometheus.CounterVec
	targets     prometheus.Gauge
	passes      prometheus.Counter
	passSeconds prometheus.Histogram
}

func newCollectors() collectors {
	const ns, sub = "inferenceservice", "metrics_adapter"
	return collectors{
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "queue_waiting",
			Help: "Requests waiting for a slot, summed over a model's ready pods, as last read from their /metrics (what the HPA divides by the pod count)."},
			[]string{"namespace", "inferenceservice"}),
		scrapes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "scrapes_total",
			Help: "Reads of a model pod's /metrics, by result (ok, error: refused, timed out, not 200, or no vllm:num_requests_waiting)."},
			[]string{"result"}),
		targets: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "scrape_targets",
			Help: "Ready model pods read in the last pass."}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "scrape_passes_total",
			Help: "Passes over every ready model pod; its rate is the scrape period achieved."}),
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "scrape_pass_duration_seconds",
			Help:    "How long one pass over every ready model pod took; above the period, readings age.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10)}),
	}
}

func (c collectors) register(reg prometheus.Registerer) error {
	for _, col := range []prometheus.Collector{c.queue, c.scrapes, c.targets, c.passes, c.passSeconds} {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	return nil
}
