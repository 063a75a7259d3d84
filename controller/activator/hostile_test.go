package activator

// The stranger's requests (issue 49), against the Handler: each refused before anything is
// held, read or recorded; the bytes and requests it can make the activator keep, bounded in
// all and per namespace; and no redirect followed toward another address.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countingBody counts the reads of a request body.
type countingBody struct {
	io.Reader
	reads atomic.Int32
}

func (c *countingBody) Read(b []byte) (int, error) { c.reads.Add(1); return c.Reader.Read(b) }
func (c *countingBody) Close() error               { return nil }

func TestDeniedBeforeAnything(t *testing.T) {
	var rec recorder
	w := &wakes{}
	metrics := NewMetrics(prometheus.NewRegistry())
	holder := NewHolder(Options{MaxWait: time.Minute, Wake: w.wake, Metrics: metrics})
	h := NewHandler(holder, HandlerOptions{
		Catalog:       teams{},
		HeaderSources: MustSources("10.0.0.1/32"), // the gateway
		PathSources:   MustSources("10.0.1.0/24"), // the clients the install allows the path form
		Recorder:      &rec,
	})
	for _, tc := range []struct {
		name, from, path, header string
		code                     int
		reason                   Denial
		message                  string
	}{
		{"an invented key by path", "10.0.1.5:1", "/stranger/qwen3/v1/completions", "", 404, DenyNoModel, "model stranger/qwen3 is not a model the activator serves"},
		{"an invented key by header", "10.0.0.1:1", "/v1/completions", "kube-system/kube-dns", 404, DenyNoModel, "model kube-system/kube-dns is not a model the activator serves"},
		{"no model", "10.0.1.5:1", "/v1", "", 404, DenyNoModel, "no model in the request"},
		{"unload by path", "10.0.1.5:1", "/team-a/qwen3/v1/unload_lora_adapter", "", 404, DenyPath, "path /v1/unload_lora_adapter is not an inference path of model team-a/qwen3"},
		{"metrics by path", "10.0.1.5:1", "/team-a/qwen3/metrics", "", 404, DenyPath, "path /metrics is not an inference path"},
		{"collective_rpc by header", "10.0.0.1:1", "/collective_rpc", "team-a/qwen3", 404, DenyPath, "path /collective_rpc is not an inference path"},
		{"a walk out of an inference path", "10.0.0.1:1", "/v1/completions/../unload_lora_adapter", "team-a/qwen3", 404, DenyPath, "is not an inference path"},
		{"the header from a pod, not the gateway", "10.0.1.5:1", "/v1/completions", "team-a/qwen3", 403, DenySource, "the X-Activator-Model header is accepted only from the gateway"},
		{"the path form from a caller not allowed it", "10.0.2.9:1", "/team-a/qwen3/v1/completions", "", 403, DenySource, "the /namespace/name/ path form is not open to this caller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingBody{Reader: strings.NewReader(`{"prompt":"x"}`)}
			r := httptest.NewRequest(http.MethodPost, tc.path, nil)
			r.Body, r.ContentLength, r.RemoteAddr = body, 14, tc.from
			if tc.header != "" {
				r.Header.Set(DefaultHeader, tc.header)
			}
			before := testutil.ToFloat64(metrics.deniedBy.WithLabelValues(string(tc.reason)))
			rw := httptest.NewRecorder()
			h.ServeHTTP(rw, r)
			var e struct {
				Error struct {
					Message, Type string
					Code          int
				}
			}
			if err := json.Unmarshal(rw.Body.Bytes(), &e); err != nil || rw.Code != tc.code || e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.message) {
				t.Fatalf("%d %s, want %d ...%s...", rw.Code, rw.Body, tc.code, tc.message)
			}
			if n := body.reads.Load(); n != 0 {
				t.Errorf("the body was read %d times", n)
			}
			if got := testutil.ToFloat64(metrics.deniedBy.WithLabelValues(string(tc.reason))); got != before+1 {
				t.Errorf("activator_denied_total{reason=%q} %v, want %v", tc.reason, got, before+1)
			}
		})
	}
	if a, _, _ := rec.counts(); a != 0 {
		t.Errorf("%d denied requests recorded as activity", a)
	}
	if holder.HeldTotal() != 0 || w.of(Key{"stranger", "qwen3"})+w.of(qwen) != 0 {
		t.Errorf("held %d, woke %d", holder.HeldTotal(), w.of(qwen))
	}
	// Allowed, the same requests go on to the hold.
	r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	r.RemoteAddr = "10.0.0.1:1"
	r.Header.Set(DefaultHeader, "team-a/qwen3")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { h.ServeHTTP(httptest.NewRecorder(), r.WithContext(ctx)); close(done) }()
	eventually(t, "the gateway's request held", func() bool { return holder.Held(qwen) == 1 })
	cancel()
	<-done
}

// heldPost sends a POST of size bytes for path and returns its answer's channel.
func heldPost(a *activator, ctx context.Context, path string, size int) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.server.URL+path, bytes.NewReader(bytes.Repeat([]byte("x"), size)))
		res, err := a.client.Do(req)
		if err != nil {
			out <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		out <- answer{code: res.StatusCode, body: string(b), hdr: res.Header}
	}()
	return out
}

func TestBufferBounds(t *testing.T) {
	a := &activator{wakes: &wakes{}, metrics: NewMetrics(prometheus.NewRegistry())}
	a.holder = NewHolder(Options{MaxWait: time.Minute, Wake: a.wakes.wake, Metrics: a.metrics})
	budget := NewBudget(3<<10, 2<<10)
	a.server = httptest.NewServer(NewHandler(a.holder, openTo(HandlerOptions{MaxBufferedBody: 1 << 10, Budget: budget})))
	t.Cleanup(a.server.Close)
	a.client = &http.Client{Timeout: 10 * time.Second}
	teamB := Key{Namespace: "team-b", Name: "m"}

	held := []<-chan answer{heldPost(a, t.Context(), "/team-a/qwen3/v1/completions", 1<<10)}
	eventually(t, "one held", func() bool { return a.holder.Held(qwen) == 1 })
	held = append(held, heldPost(a, t.Context(), "/team-a/qwen3/v1/completions", 1<<10))
	eventually(t, "two held", func() bool { return a.holder.Held(qwen) == 2 })
	// team-a's 2 KiB are claimed: its next body is refused, another namespace's is not.
	r := <-heldPost(a, t.Context(), "/team-a/qwen3/v1/completions", 1<<10)
	if r.code != http.StatusServiceUnavailable || r.hdr.Get("Retry-After") == "" || !strings.Contains(r.body, "namespace team-a's share of the activator's buffer for request bodies") {
		t.Fatalf("team-a past its share: %d %q", r.code, r.body)
	}
	held = append(held, heldPost(a, t.Context(), "/team-b/m/v1/completions", 1<<10))
	eventually(t, "team-b's held", func() bool { return a.holder.Held(teamB) == 1 })
	// 3 KiB claimed in all: team-c is refused too.
	r = <-heldPost(a, t.Context(), "/team-c/m/v1/completions", 100)
	if r.code != http.StatusServiceUnavailable || !strings.Contains(r.body, "the activator's buffer for request bodies (0 MiB) is full") {
		t.Fatalf("past the total: %d %q", r.code, r.body)
	}
	for reason, want := range map[Reason]float64{ReasonBufferNamespace: 1, ReasonBufferTotal: 1} {
		if got := testutil.ToFloat64(a.metrics.refusedBy.WithLabelValues(string(reason))); got != want {
			t.Errorf("activator_refused_total{reason=%q} %v, want %v", reason, got, want)
		}
	}
	// Up: the held bodies are sent on whole, and every byte is given back.
	pod := backend(t, "pod-0")
	a.holder.SetEndpoints(qwen, []string{addr(pod)})
	a.holder.SetEndpoints(teamB, []string{addr(pod)})
	for _, c := range held {
		if r := <-c; r.code != http.StatusOK || !strings.HasSuffix(r.body, strings.Repeat("x", 1<<10)) {
			t.Fatalf("held request: %d %.60q", r.code, r.body)
		}
	}
	eventually(t, "the budget given back", func() bool { total, _ := budget.Used("team-a"); return total == 0 })
}

// TestBufferGivenBackOnceSent: a stream that runs for long holds none of its prompt's bytes
// once the proxy has sent them on.
func TestBufferGivenBackOnceSent(t *testing.T) {
	budget := NewBudget(0, 0)
	holder := NewHolder(Options{MaxWait: time.Minute})
	srv := httptest.NewServer(NewHandler(holder, openTo(HandlerOptions{Budget: budget})))
	t.Cleanup(srv.Close)
	release := make(chan struct{})
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
	}))
	t.Cleanup(pod.Close)
	t.Cleanup(func() { close(release) })
	holder.SetEndpoints(qwen, []string{addr(pod)})
	res, err := (&http.Client{Timeout: 10 * time.Second}).Post(srv.URL+"/team-a/qwen3/v1/completions", "application/json", bytes.NewReader(make([]byte, 512<<10)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d", res.StatusCode)
	}
	// Streaming still (the pod holds the response open): the 512 KiB are given back.
	eventually(t, "the prompt's bytes given back", func() bool { total, _ := budget.Used("team-a"); return total == 0 })
}

func TestHeldBounds(t *testing.T) {
	w := &wakes{}
	h := NewHolder(Options{MaxHeld: 5, MaxHeldPerNamespace: 2, MaxHeldTotal: 3, MaxWait: time.Minute, Wake: w.wake})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	hold := func(k Key) <-chan error {
		out := make(chan error, 1)
		go func() { _, err := h.hold(ctx, k); out <- err }()
		return out
	}
	a1, a2, b1 := Key{"team-a", "m1"}, Key{"team-a", "m2"}, Key{"team-b", "m"}
	hold(a1)
	hold(a2)
	eventually(t, "team-a's two held", func() bool { return h.HeldTotal() == 2 })
	var refused *Refused
	if _, err := h.hold(ctx, Key{"team-a", "m3"}); !asRefused(err, &refused) || refused.Reason != ReasonHeldNamespace ||
		refused.Error() != "namespace team-a already has 2 requests held for its models starting; retry after 10s" {
		t.Fatalf("team-a's third: %v", err)
	}
	hold(b1)
	eventually(t, "three held", func() bool { return h.HeldTotal() == 3 })
	if _, err := h.hold(ctx, Key{"team-c", "m"}); !asRefused(err, &refused) || refused.Reason != ReasonHeldTotal ||
		refused.Error() != "the activator already holds 3 requests for models starting; retry after 10s" {
		t.Fatalf("past the total: %v", err)
	}
	// A refused key leaves no entry behind, and was never woken.
	h.mu.Lock()
	_, kept := h.models[Key{"team-c", "m"}]
	h.mu.Unlock()
	if kept || w.of(Key{"team-c", "m"}) != 0 {
		t.Fatalf("refused key kept %v, woken %d", kept, w.of(Key{"team-c", "m"}))
	}
	// Released: the counts follow.
	h.SetEndpoints(a1, []string{"10.0.0.1:8000"})
	eventually(t, "two held", func() bool { return h.HeldTotal() == 2 })
	hold(Key{"team-c", "m"})
	eventually(t, "room again: team-c's held", func() bool { return h.Held(Key{"team-c", "m"}) == 1 })
}

func asRefused(err error, r **Refused) bool {
	x, ok := err.(*Refused)
	*r = x
	return ok
}

// TestProxyFollowsNoRedirect: a pod that answers 307 toward another address gets its answer
// passed back to the client as it is; the activator sends nothing there itself.
func TestProxyFollowsNoRedirect(t *testing.T) {
	var victimHit atomic.Int32
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { victimHit.Add(1) }))
	t.Cleanup(victim.Close)
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, victim.URL+"/v1/unload_lora_adapter", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(pod.Close)
	a := newActivator(t, Options{MaxWait: time.Minute})
	a.holder.SetEndpoints(qwen, []string{addr(pod)})
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Post(a.server.URL+"/team-a/qwen3/v1/completions", "application/json", strings.NewReader(`{"lora_name":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTemporaryRedirect || !strings.HasPrefix(res.Header.Get("Location"), victim.URL) {
		t.Fatalf("%d %q, want the pod's 307 passed back", res.StatusCode, res.Header.Get("Location"))
	}
	if n := victimHit.Load(); n != 0 {
		t.Fatalf("the redirect's target got %d requests", n)
	}
}

// TestTransportTimeouts: the proxy's transport bounds a pod's headers and its idle connections.
func TestTransportTimeouts(t *testing.T) {
	tr := NewTransport(0)
	if tr.ResponseHeaderTimeout != DefaultResponseHeaderTimeout || tr.IdleConnTimeout != DefaultIdleConnTimeout || tr.Proxy != nil {
		t.Fatalf("%v %v, proxy %v", tr.ResponseHeaderTimeout, tr.IdleConnTimeout, tr.Proxy != nil)
	}
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers
	}))
	t.Cleanup(pod.Close)
	holder := NewHolder(Options{MaxWait: time.Minute})
	srv := httptest.NewServer(NewHandler(holder, openTo(HandlerOptions{Transport: NewTransport(100 * time.Millisecond)})))
	t.Cleanup(srv.Close)
	holder.SetEndpoints(qwen, []string{addr(pod)})
	res, err := (&http.Client{Timeout: 10 * time.Second}).Get(srv.URL + "/team-a/qwen3/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "timeout awaiting response headers") {
		t.Fatalf("%d %s, want 502 past the response-header timeout", res.StatusCode, b)
	}
}
