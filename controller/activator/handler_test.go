package activator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// backend is a model pod: it answers with its name, the path and the body it was sent.
func backend(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s %s", name, r.URL.Path, r.Header.Get(DefaultHeader), body)
	}))
	t.Cleanup(s.Close)
	return s
}

func addr(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

// teams is the tests' Catalog: it serves every model of a namespace named team-*.
type teams struct{}

func (teams) Serves(k Key) bool { return strings.HasPrefix(k.Namespace, "team-") }

// openTo is opts serving teams, the header and the path form from every caller.
func openTo(opts HandlerOptions) HandlerOptions {
	opts.Catalog = teams{}
	opts.HeaderSources = MustSources("0.0.0.0/0,::/0")
	opts.PathSources = MustSources("0.0.0.0/0,::/0")
	return opts
}

type activator struct {
	holder  *Holder
	server  *httptest.Server
	client  *http.Client
	wakes   *wakes
	metrics *Metrics
}

func newActivator(t *testing.T, opts Options) *activator {
	t.Helper()
	a := &activator{wakes: &wakes{}, metrics: NewMetrics(prometheus.NewRegistry())}
	opts.Wake, opts.Metrics = a.wakes.wake, a.metrics
	a.holder = NewHolder(opts)
	a.server = httptest.NewServer(NewHandler(a.holder, openTo(HandlerOptions{})))
	t.Cleanup(a.server.Close)
	// A bound on every call, so a request that hangs fails the test instead of stalling it.
	a.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	t.Cleanup(a.client.CloseIdleConnections)
	return a
}

type answer struct {
	i    int
	code int
	body string
	hdr  http.Header
	err  error
}

func (a *activator) post(ctx context.Context, i int, path string) answer {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.server.URL+path, strings.NewReader(fmt.Sprintf("req-%d", i)))
	res, err := a.client.Do(req)
	if err != nil {
		return answer{i: i, err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{i: i, code: res.StatusCode, body: string(b), hdr: res.Header, err: err}
}

// arrive sends n requests one after another, each held before the next is sent.
func (a *activator) arrive(t *testing.T, ctx context.Context, n int, path string) <-chan answer {
	t.Helper()
	out := make(chan answer, n)
	base := a.holder.Held(qwen)
	for i := range n {
		go func() { out <- a.post(ctx, i, path) }()
		eventually(t, fmt.Sprintf("request %d held", i), func() bool { return a.holder.Held(qwen) == base+i+1 })
	}
	return out
}

func TestHandlerColdBurst(t *testing.T) {
	a := newActivator(t, Options{MaxHeld: 100, MaxWait: time.Minute})
	pods := []*httptest.Server{backend(t, "pod-0"), backend(t, "pod-1"), backend(t, "pod-2")}

	start := time.Now()
	out := a.arrive(t, t.Context(), 100, "/team-a/qwen3/v1/completions")
	if d := time.Since(start); d > time.Second {
		t.Fatalf("100 arrivals took %s, want them within a second", d)
	}
	a.holder.SetEndpoints(qwen, []string{addr(pods[0]), addr(pods[1]), addr(pods[2])})
	for range 100 {
		r := <-out
		// Request i arrived i-th, so it is released i-th and goes to pod i%3, with its own body.
		want := fmt.Sprintf("pod-%d /v1/completions  req-%d", r.i%3, r.i)
		if r.err != nil || r.code != http.StatusOK || r.body != want {
			t.Errorf("request %d: %d %q %v, want 200 %q", r.i, r.code, r.body, r.err, want)
		}
	}
	if n := a.wakes.of(qwen); n != 1 {
		t.Errorf("%d wakes, want 1", n)
	}
	if n := testutil.CollectAndCount(a.metrics.coldStart); n != 1 {
		t.Fatalf("%d cold start series", n)
	}
	if got := histogramCount(t, a.metrics.coldStart); got != 100 {
		t.Errorf("%d cold starts recorded, want 100", got)
	}
	if got := testutil.ToFloat64(a.metrics.wakes); got != 1 {
		t.Errorf("activator_wakes_total %v, want 1", got)
	}
	// Warm now: served at once and not counted as a cold start.
	if r := a.post(t.Context(), 100, "/team-a/qwen3/v1/completions"); r.code != http.StatusOK {
		t.Fatalf("warm request: %d %q %v", r.code, r.body, r.err)
	}
	if got := histogramCount(t, a.metrics.coldStart); got != 100 {
		t.Errorf("%d cold starts recorded after a warm request, want 100", got)
	}
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs[0].GetMetric()[0].GetHistogram().GetSampleCount()
}

func TestHandlerRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    Options
		before  int
		reason  Reason
		atLeast time.Duration
	}{
		{name: "count: the 101st gets 503 at once", opts: Options{MaxHeld: 100, MaxWait: 30 * time.Second, RetryAfter: 7 * time.Second},
			before: 100, reason: ReasonQueueFull},
		{name: "wait: 503 after the wait", opts: Options{MaxHeld: 100, MaxWait: 200 * time.Millisecond, RetryAfter: 1500 * time.Millisecond},
			reason: ReasonWaitTimeout, atLeast: 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newActivator(t, tc.opts)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.before > 0 {
				a.arrive(t, ctx, tc.before, "/team-a/qwen3/v1/completions")
			}
			start := time.Now()
			// The client's 10 s timeout fails a hang, and a queue_full that waited (MaxWait 30 s).
			r := a.post(t.Context(), tc.before, "/team-a/qwen3/v1/completions")
			if d := time.Since(start); d < tc.atLeast {
				t.Errorf("answered after %s, want at least %s", d, tc.atLeast)
			}
			if r.err != nil || r.code != http.StatusServiceUnavailable {
				t.Fatalf("%d %q %v, want 503", r.code, r.body, r.err)
			}
			wantRetry := fmt.Sprint(int((tc.opts.RetryAfter + time.Second - 1) / time.Second))
			if got := r.hdr.Get("Retry-After"); got != wantRetry {
				t.Errorf("Retry-After %q, want %q", got, wantRetry)
			}
			var body struct {
				Error struct {
					Message, Type string
					Code          int
				}
			}
			if err := json.Unmarshal([]byte(r.body), &body); err != nil || body.Error.Type != "ServiceUnavailable" ||
				body.Error.Code != 503 || !strings.Contains(body.Error.Message, "team-a/qwen3") {
				t.Errorf("body %q (%v), want OpenAI's error shape", r.body, err)
			}
			if got := r.hdr.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			if got := testutil.ToFloat64(a.metrics.refusedBy.WithLabelValues(string(tc.reason))); got != 1 {
				t.Errorf("activator_refused_total{reason=%q} %v, want 1", tc.reason, got)
			}
			if got := testutil.ToFloat64(a.metrics.held.WithLabelValues("team-a", "qwen3")); got != float64(tc.before) {
				t.Errorf("activator_held_requests %v, want %d", got, tc.before)
			}
		})
	}
}

func TestHandlerClientGoneFreesSlot(t *testing.T) {
	// MaxWait beyond eventually's 5 s: only the client's leaving can free the slot in time.
	a := newActivator(t, Options{MaxHeld: 1, MaxWait: 8 * time.Second})
	ctx, cancel := context.WithCancel(t.Context())
	out := a.arrive(t, ctx, 1, "/team-a/qwen3/v1/completions")
	cancel()
	if r := <-out; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled request: %d %v", r.code, r.err)
	}
	eventually(t, "the slot freed", func() bool { return a.holder.Held(qwen) == 0 })
	if n := testutil.CollectAndCount(a.metrics.held); n != 0 {
		t.Errorf("%d held series left for a model nobody waits for", n)
	}
	// With the bound at 1, a second request is held (not refused) and served.
	out = a.arrive(t, t.Context(), 1, "/team-a/qwen3/v1/completions")
	a.holder.SetEndpoints(qwen, []string{addr(backend(t, "pod-0"))})
	if r := <-out; r.code != http.StatusOK {
		t.Fatalf("next request: %d %q %v", r.code, r.body, r.err)
	}
}

func TestHandlerKey(t *testing.T) {
	a := newActivator(t, Options{MaxWait: time.Minute})
	a.holder.SetEndpoints(qwen, []string{addr(backend(t, "pod-0"))})
	for _, tc := range []struct {
		name, path, header string
		code               int
		body               string
	}{
		{name: "path", path: "/team-a/qwen3/v1/chat/completions", code: 200, body: "pod-0 /v1/chat/completions  req-0"},
		{name: "path, nothing after the model", path: "/team-a/qwen3", code: 404},
		// The header wins and is not passed on; the path is the pod's as sent.
		{name: "header", path: "/v1/chat/completions", header: "team-a/qwen3", code: 200, body: "pod-0 /v1/chat/completions  req-0"},
		{name: "no model", path: "/v1", code: 404},
		{name: "bad header", path: "/v1/chat/completions", header: "qwen3", code: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, a.server.URL+tc.path, strings.NewReader("req-0"))
			if tc.header != "" {
				req.Header.Set(DefaultHeader, tc.header)
			}
			res, err := a.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.code || (tc.body != "" && string(b) != tc.body) {
				t.Fatalf("%d %q, want %d %q", res.StatusCode, b, tc.code, tc.body)
			}
		})
	}
}

// A streamed completion reaches the client chunk by chunk, also on a cold start (where the
// response writer is wrapped to see the first byte).
func TestHandlerStreams(t *testing.T) {
	next := make(chan struct{})
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json") // not SSE: the proxy must flush anyway
		fmt.Fprintln(w, `{"token":"a"}`)
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		fmt.Fprintln(w, `{"token":"b"}`)
	}))
	defer pod.Close()
	a := newActivator(t, Options{MaxWait: time.Minute})

	type line struct {
		s   string
		err error
	}
	lines := make(chan line, 2)
	go func() {
		res, err := a.client.Post(a.server.URL+"/team-a/qwen3/v1/completions", "application/json", strings.NewReader("{}"))
		if err != nil {
			lines <- line{err: err}
			return
		}
		defer res.Body.Close()
		br := bufio.NewReader(res.Body)
		for range 2 {
			s, err := br.ReadString('\n')
			lines <- line{s, err}
		}
	}()
	eventually(t, "the request held", func() bool { return a.holder.Held(qwen) == 1 })
	a.holder.SetEndpoints(qwen, []string{addr(pod)})
	// The first chunk arrives while the pod still holds the second back.
	if l := <-lines; l.err != nil || l.s != "{\"token\":\"a\"}\n" {
		t.Fatalf("first chunk %q %v", l.s, l.err)
	}
	close(next)
	if l := <-lines; l.err != nil || l.s != "{\"token\":\"b\"}\n" {
		t.Fatalf("second chunk %q %v", l.s, l.err)
	}
}

func TestHandlerPodUnreachable(t *testing.T) {
	a := newActivator(t, Options{MaxWait: time.Minute})
	gone := backend(t, "pod-0")
	ep := addr(gone)
	gone.Close()
	a.holder.SetEndpoints(qwen, []string{ep})
	r := a.post(t.Context(), 0, "/team-a/qwen3/v1/completions")
	if r.err != nil || r.code != http.StatusBadGateway || !strings.Contains(r.body, `"type":"BadGateway"`) {
		t.Fatalf("%d %q %v, want 502 in OpenAI's shape", r.code, r.body, r.err)
	}
	if n := a.holder.Inflight(qwen); n != 0 {
		t.Fatalf("%d in flight after the request ended", n)
	}
}

// recorder counts what a Handler tells its Recorder.
type recorder struct {
	mu                   sync.Mutex
	arrived, done, colds int
	cold                 []time.Duration
}

func (r *recorder) Arrived(k Key) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrived++
	return func() { r.mu.Lock(); r.done++; r.mu.Unlock() }
}

func (r *recorder) ColdStarted(k Key, arrived time.Time, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.colds++
	r.cold = append(r.cold, d)
}

func (r *recorder) counts() (int, int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.arrived, r.done, r.colds
}

// TestHandlerRecordsActivity: every request with a model is recorded from arrival to answer,
// refused ones included (demand all the same), and only held ones as cold starts.
func TestHandlerRecordsActivity(t *testing.T) {
	var rec recorder
	holder := NewHolder(Options{MaxHeld: 1, MaxWait: time.Minute})
	srv := httptest.NewServer(NewHandler(holder, openTo(HandlerOptions{Recorder: &rec})))
	t.Cleanup(srv.Close)
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) int {
		res, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}

	cold := make(chan int, 1)
	go func() { cold <- get("/team-a/qwen3/v1/models") }()
	eventually(t, "the first request held", func() bool { return holder.Held(qwen) == 1 })
	if code := get("/team-a/qwen3/v1/models"); code != http.StatusServiceUnavailable {
		t.Fatalf("second request %d, want 503 past MaxHeld", code)
	}
	if a, d, _ := rec.counts(); a != 2 || d != 1 {
		t.Fatalf("arrived %d done %d while one is held, want 2 and 1", a, d)
	}
	holder.SetEndpoints(qwen, []string{addr(backend(t, "pod-0"))})
	if code := <-cold; code != http.StatusOK {
		t.Fatalf("held request %d", code)
	}
	if code := get("/team-a/qwen3/v1/models"); code != http.StatusOK {
		t.Fatalf("warm request %d", code)
	}
	if code := get("/"); code != http.StatusNotFound {
		t.Fatalf("request without a model %d", code)
	}
	eventually(t, "every request done", func() bool { a, d, _ := rec.counts(); return a == 3 && d == 3 })
	if _, _, c := rec.counts(); c != 1 {
		t.Fatalf("%d cold starts recorded, want the held request's 1", c)
	}
}

// The proxy copies each response through a buffer it borrows, not one it allocates (32 KiB a
// response, two thirds of all a proxied request allocated: issue 55's profile), so at
// thousands of requests a second the collector does not run for the buffers alone.
func TestHandlerReusesCopyBuffers(t *testing.T) {
	whole := `{"id":"cmpl-1","object":"text_completion","choices":[{"text":" The"}]}`
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, whole)
	}))
	defer pod.Close()
	h := NewHolder(Options{})
	h.SetEndpoints(qwen, []string{addr(pod)})
	handler := NewHandler(h, openTo(HandlerOptions{}))
	serve := func() {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/team-a/qwen3/v1/completions", strings.NewReader("{}")))
		if w.Code != http.StatusOK || w.Body.String() != whole {
			t.Fatalf("%d %q", w.Code, w.Body.String())
		}
	}
	serve() // the connection to the pod, once
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		serve()
	}
	runtime.ReadMemStats(&after)
	// Everything else a request allocates here, the pod's side included, is about 10 KiB.
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated a request", per)
	if per > 24<<10 {
		t.Errorf("%d bytes allocated a request, want under %d: a copy buffer each?", per, 24<<10)
	}
}
