package podmetrics

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func modelPod(name, model, ip string, port int32, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: map[string]string{InstanceLabel: model}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9}}},
			{Name: "vllm", Image: "vllm/vllm-openai", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}}},
		}},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: status},
		}},
	}
}

func TestTargetOf(t *testing.T) {
	terminating := modelPod("p", "m", "127.1.0.5", 8000, true)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	noPort := modelPod("p", "m", "127.1.0.5", 8000, true)
	noPort.Spec.Containers = noPort.Spec.Containers[:1]
	ready := modelPod("p", "m", "127.1.0.5", 8000, true)
	owned(ready) // the cache keeps its controller
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"ready", ready, "http://127.1.0.5:8000/metrics"},
		{"IPv6", modelPod("p", "m", "fd00::5", 8000, true), "http://[fd00::5]:8000/metrics"},
		{"not ready", modelPod("p", "m", "127.1.0.5", 8000, false), ""},
		{"no IP yet", modelPod("p", "m", "", 8000, true), ""},
		{"terminating", terminating, ""},
		{"no vllm container port", noPort, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := TargetOf(tc.pod)
			if got.URL != tc.want || ok != (tc.want != "") {
				t.Fatalf("TargetOf = %q, %v; want %q", got.URL, ok, tc.want)
			}
			if ok && got.Model != "m" {
				t.Fatalf("model %q", got.Model)
			}
			// The cache's copy must give the same answer.
			stripped, _ := StripPod(tc.pod)
			if again, _ := TargetOf(stripped.(*corev1.Pod)); again != got {
				t.Fatalf("after StripPod: %+v, want %+v", again, got)
			}
			if a, b := metav1.GetControllerOfNoCopy(tc.pod), metav1.GetControllerOfNoCopy(stripped.(*corev1.Pod)); (a == nil) != (b == nil) || a != nil && a.UID != b.UID {
				t.Fatalf("after StripPod the controller is %v, want %v", b, a)
			}
		})
	}
}

// pod serves a /metrics page on a loopback port and returns a ready model pod pointing at it.
func servingPod(t *testing.T, name, model string, h http.HandlerFunc) *corev1.Pod {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return modelPod(name, model, host, int32(p), true)
}

func page(waiting int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} %d\n", waiting)
	}
}

// run starts s until the test ends.
func run(t *testing.T, s *Scraper) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestReadsReadyPodsAndDropsFailures(t *testing.T) {
	var broken atomic.Bool
	pods := []*corev1.Pod{
		servingPod(t, "a", "llama", page(3)),
		servingPod(t, "b", "llama", page(4)),
		servingPod(t, "c", "qwen", func(w http.ResponseWriter, r *http.Request) {
			if broken.Load() {
				http.Error(w, "engine dead", http.StatusInternalServerError)
				return
			}
			page(9)(w, r)
		}),
		modelPod("unready", "qwen", "127.0.0.1", 1, false),
	}
	owners := owned(pods...)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	const period = time.Minute
	reg := prometheus.NewPedanticRegistry()
	s, err := New(Config{Period: period, Timeout: time.Second, Concurrency: 2, Clock: clk, Owners: owners,
		Pods: func() ([]*corev1.Pod, error) { return pods, nil }}, reg)
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	eventually(t, "every ready pod read", func() error {
		for i, want := range []float64{3, 4, 9} {
			if r, ok := s.Reading(pods[i], clk.Now()); !ok || r.Waiting != want {
				return fmt.Errorf("pod %s: %+v %v, want %v", pods[i].Name, r, ok, want)
			}
		}
		return s.Ready()
	})
	if _, ok := s.Reading(pods[3], clk.Now()); ok {
		t.Error("an unready pod has a reading")
	}

	broken.Store(true)
	clk.Step(period) // each pod's next read, and a refresh of the series
	eventually(t, "the failed pod's reading dropped at its next attempt", func() error {
		if r, ok := s.Reading(pods[2], clk.Now()); ok {
			return fmt.Errorf("a pod whose /metrics failed still has a reading %+v", r)
		}
		if got := testutil.ToFloat64(s.m.scrapes.WithLabelValues("error")); got != 1 {
			return fmt.Errorf("%v errors counted, want 1", got)
		}
		return nil
	})
	clk.Step(period / 4) // a refresh sets the series from the readings now held
	eventually(t, "the queue series follow the readings", func() error {
		if n := testutil.CollectAndCount(s.m.queue); n != 1 {
			return fmt.Errorf("%d queue series, want only llama's once qwen has no reading", n)
		}
		if got := testutil.ToFloat64(s.m.queue.WithLabelValues("team-a", "llama")); got != 7 {
			return fmt.Errorf("llama's queue %v, want 7", got)
		}
		return nil
	})
	if r, ok := s.Reading(pods[0], clk.Now().Add(3*period+time.Second)); ok {
		t.Errorf("a reading older than three periods is served: %+v", r)
	}
}

// inflight counts the requests a client has under way, on the client's side: a server
// notices a cancelled request later than the client frees its slot.
type inflight struct {
	now, peak atomic.Int32
	next      http.RoundTripper
}

func (c *inflight) RoundTrip(r *http.Request) (*http.Response, error) {
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	return c.next.RoundTrip(r)
}

// TestReadsBoundConcurrencyAndTime: reads of pods that answered are held to the concurrency,
// reads of pods yet to answer to their own pool, and each read is cut at the timeout.
func TestReadsBoundConcurrencyAndTime(t *testing.T) {
	var hang atomic.Bool
	release := make(chan struct{})
	slow := func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		page(1)(w, r)
	}
	counter := &inflight{next: http.DefaultTransport}
	var pods []*corev1.Pod
	for i := range 12 {
		p := servingPod(t, fmt.Sprint("p", i), "m", slow)
		p.Namespace = fmt.Sprint("ns-", i) // apart, so only the pools' bounds apply
		pods = append(pods, p)
	}
	owners := owned(pods...)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	const period = time.Minute
	s, err := New(Config{Period: period, Timeout: 200 * time.Millisecond, Concurrency: 2, Clock: clk, Owners: owners, Client: &http.Client{Transport: counter},
		Pods: func() ([]*corev1.Pod, error) { return pods, nil }}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	hang.Store(true) // first attempts hang: the pool of pods yet to answer, 4 x 2
	run(t, s)
	eventually(t, "every first read cut at the timeout", func() error {
		if got := testutil.ToFloat64(s.m.scrapes.WithLabelValues("error")); got != 12 {
			return fmt.Errorf("%v timed-out reads counted as errors, want 12", got)
		}
		return nil
	})
	if p := counter.peak.Load(); p != 8 {
		t.Errorf("peak %d reads in flight of pods yet to answer, want their pool's bound 8", p)
	}
	if _, ok := s.Reading(pods[0], clk.Now()); ok {
		t.Error("a timed-out read left a reading")
	}

	hang.Store(false)
	clk.Step(period) // retried: every pod answers
	eventually(t, "every pod answered", func() error {
		if got := testutil.ToFloat64(s.m.scrapes.WithLabelValues("ok")); got != 12 {
			return fmt.Errorf("%v reads answered, want 12", got)
		}
		return nil
	})
	hang.Store(true)
	counter.peak.Store(0)
	clk.Step(period) // next reads hang: pods that answered hold only the concurrency
	eventually(t, "every answered pod's next read cut at the timeout", func() error {
		if got := testutil.ToFloat64(s.m.scrapes.WithLabelValues("error")); got != 24 {
			return fmt.Errorf("%v timed-out reads counted as errors, want 24", got)
		}
		return nil
	})
	close(release)
	if p := counter.peak.Load(); p != 2 {
		t.Errorf("peak %d reads in flight of pods that answered, want the bound 2", p)
	}
}

// TestRedirectsAreNotFollowed: a model pod runs its tenant's image; its /metrics answering 307
// to another pod's page gives it no reading (not the other pod's queue), the other pod is read
// only for itself, and a client the caller supplies is held to the same rule.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var victimReads atomic.Int32
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		victimReads.Add(1)
		page(50)(w, r)
	}))
	t.Cleanup(victim.Close)
	for _, supplied := range []*http.Client{nil, {}} {
		victimReads.Store(0)
		pods := []*corev1.Pod{servingPod(t, "tenant", "llama", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, victim.URL+"/metrics", http.StatusTemporaryRedirect)
		})}
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		s, err := New(Config{Period: time.Minute, Timeout: time.Second, Concurrency: 2, Clock: clk, Owners: owned(pods...),
			Pods: func() ([]*corev1.Pod, error) { return pods, nil }, Client: supplied}, prometheus.NewPedanticRegistry())
		if err != nil {
			t.Fatal(err)
		}
		run(t, s)
		eventually(t, "the redirecting pod's read counted as an error", func() error {
			if got := testutil.ToFloat64(s.m.scrapes.WithLabelValues("error")); got != 1 {
				return fmt.Errorf("%v errors counted, want 1", got)
			}
			return nil
		})
		if r, ok := s.Reading(pods[0], clk.Now()); ok {
			t.Fatalf("supplied client %v: the redirecting pod has a reading %+v", supplied != nil, r)
		}
		if n := victimReads.Load(); n != 0 {
			t.Fatalf("supplied client %v: the redirect's target was read %d times", supplied != nil, n)
		}
		if supplied != nil && supplied.CheckRedirect != nil {
			t.Fatal("the caller's client was changed")
		}
	}
}

func TestReadRefusesRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://127.0.0.1:1/metrics")
		w.WriteHeader(http.StatusFound)
		_, _ = io.WriteString(w, "vllm:num_requests_waiting 7\n")
	}))
	t.Cleanup(srv.Close)
	s, err := New(Config{Period: time.Minute, Timeout: time.Second, Concurrency: 1, Owners: owned(),
		Pods: func() ([]*corev1.Pod, error) { return nil, nil }}, prometheus.NewPedanticRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.read(context.Background(), srv.URL+"/metrics"); err == nil || !strings.Contains(err.Error(), "302: "+Redirected) {
		t.Fatalf("a 302: %v", err)
	}
}

// TestReadsEachPodInItsEnginesSeries: a vLLM pod and an SGLang pod side by side, each read in
// its own engine's queue family and its reading named for the metric its HPA asks; the SGLang
// page's token_usage is read in the same pass, the vLLM one without a KV gauge gives none.
func TestReadsEachPodInItsEnginesSeries(t *testing.T) {
	pods := []*corev1.Pod{
		servingPod(t, "v", "llama", page(3)),
		servingPod(t, "s", "qwen", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, sglangPage) }),
	}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s, err := New(Config{Period: time.Minute, Timeout: time.Second, Concurrency: 2, Clock: clk, Owners: owned(pods...),
		Pods: func() ([]*corev1.Pod, error) { return pods, nil }}, prometheus.NewPedanticRegistry())
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	want := []Reading{{Waiting: 3, Metric: "num_requests_waiting"}, {Waiting: 7, Metric: "num_queue_reqs", KV: 0.6, KVMetric: "token_usage"}}
	eventually(t, "both pods read", func() error {
		for i, w := range want {
			if r, ok := s.Reading(pods[i], clk.Now()); !ok || r.Waiting != w.Waiting || r.Metric != w.Metric || r.KV != w.KV || r.KVMetric != w.KVMetric {
				return fmt.Errorf("pod %s: %+v %v, want %+v", pods[i].Name, r, ok, w)
			}
		}
		return nil
	})
}

// A pod's read keeps no connection to it between periods: at 1,000 pods, a kept connection
// each (its two goroutines and buffers, tens of KB) was most of the adapter's memory above its
// base (issue 55), against one TCP handshake per pod per period, which the pod serves on
// plain HTTP.
func TestReadsKeepNoConnectionBetweenPeriods(t *testing.T) {
	const n = 50
	var open atomic.Int32
	var pods []*corev1.Pod
	for i := range n {
		srv := httptest.NewUnstartedServer(page(i))
		srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		p, _ := strconv.Atoi(port)
		pods = append(pods, modelPod(fmt.Sprint("p", i), "m", host, int32(p), true))
	}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s, err := New(Config{Period: time.Minute, Timeout: time.Second, Concurrency: 4, Clock: clk, Owners: owned(pods...),
		Pods: func() ([]*corev1.Pod, error) { return pods, nil }}, prometheus.NewPedanticRegistry())
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	eventually(t, "every pod read", s.Ready)
	eventually(t, "no connection kept after the pass", func() error {
		if o := open.Load(); o != 0 {
			return fmt.Errorf("%d of %d pods' connections still open", o, n)
		}
		return nil
	})
}
