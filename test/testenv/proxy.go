package testenv

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// Proxy is a TLS reverse proxy on loopback in front of the API server for one operator
// process: it records what the process sent on the wire (so a write counts even if the
// process dies right after) and can cut its connections (a partition, as the process sees it).
type Proxy struct {
	// Kubeconfig is the ServiceAccount's kubeconfig pointed at the proxy.
	Kubeconfig string
	srv        *httptest.Server
	mu         sync.Mutex
	reqs       []Request
	cut        chan struct{}     // closed by Cut; replaced for later requests
	bodies     map[*cutBody]bool // upstream bodies being streamed
	answer     func(*http.Request) int
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// cutBody is an upstream response body that ends cleanly (io.EOF) once the proxy cuts it.
type cutBody struct {
	io.ReadCloser
	cut <-chan struct{}
}

func (b *cutBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	select {
	case <-b.cut:
		return n, io.EOF
	default:
		return n, err
	}
}

func (p *Proxy) track(body io.ReadCloser) io.ReadCloser {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := &cutBody{ReadCloser: body, cut: p.cut}
	p.bodies[b] = true
	return closeFunc{b, func() { p.mu.Lock(); delete(p.bodies, b); p.mu.Unlock() }}
}

type closeFunc struct {
	*cutBody
	done func()
}

func (c closeFunc) Close() error { c.done(); return c.cutBody.ReadCloser.Close() }

// Request is one request the process sent, as the proxy received it.
type Request struct {
	At                  time.Time // when its headers reached the proxy
	Method, Path, Query string
	// Code is the status the process got back: the API server's, or the proxy's own answer.
	Code int
	// BlockOwnerDeletion: the body sets an ownerReference's blockOwnerDeletion, for which the
	// API server's admission checks update on the owner's finalizers subresource.
	BlockOwnerDeletion bool
	// Body is the request's body, kept for writes of a status subresource only (a report
	// diffs them to say what a repeated write changed).
	Body []byte
}

// statusRecorder keeps the status code written through it.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Answer makes the proxy answer, instead of the API server, every request for which fn returns
// a status code (409 Conflict, say): the process sees the API server's error for it. fn returns
// 0 to forward the request. nil forwards everything again.
func (p *Proxy) Answer(fn func(*http.Request) int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answer = fn
}

// Requests returns every request recorded so far, in the order they reached the proxy.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.reqs...)
}

// StartProxy starts a proxy for the operator's ServiceAccount, closed when the test ends. It
// presents no client certificate upstream: the process's own ServiceAccount token
// authenticates it.
func (e *Env) StartProxy(t testing.TB) *Proxy {
	t.Helper()
	return e.StartProxyFor(t, e.SAKubeconfig)
}

// StartProxyFor is StartProxy for the identity of another kubeconfig (a token).
func (e *Env) StartProxyFor(t testing.TB, kubeconfig string) *Proxy {
	t.Helper()
	cfg := e.Cluster.RESTConfig()
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	ca := cfg.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	rp := httputil.NewSingleHostReverseProxy(upstream)
	p := &Proxy{cut: make(chan struct{}), bodies: map[*cutBody]bool{}}
	upstreamRT := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	rp.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		res, err := upstreamRT.RoundTrip(r)
		if err == nil {
			res.Body = p.track(res.Body)
		}
		return res, err
	})
	rp.FlushInterval = -1                    // watches stream
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed process's cancelled requests are expected
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery}
		if r.Body != nil && r.Method != http.MethodGet {
			body, err := io.ReadAll(r.Body)
			_ = r.Body.Close()
			if err != nil {
				return // the process went away mid-request
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec.BlockOwnerDeletion = bytes.Contains(body, []byte(`"blockOwnerDeletion":true`))
			if strings.HasSuffix(r.URL.Path, "/status") {
				rec.Body = body
			}
		}
		p.mu.Lock()
		i := len(p.reqs)
		p.reqs = append(p.reqs, rec)
		answer := p.answer
		p.mu.Unlock()
		sw := &statusRecorder{ResponseWriter: w}
		if answer != nil {
			if code := answer(r); code != 0 {
				answerStatus(sw, r, code)
			}
		}
		if sw.code == 0 {
			rp.ServeHTTP(sw, r)
		}
		p.mu.Lock()
		p.reqs[i].Code = sw.code
		p.mu.Unlock()
	}))
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	t.Cleanup(func() { p.srv.CloseClientConnections(); p.srv.Close() })
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.Server = p.srv.URL
		c.CertificateAuthorityData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	}
	p.Kubeconfig = filepath.Join(t.TempDir(), "proxied.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

// answerStatus writes a metav1.Status the way the API server does, so client-go classifies it.
func answerStatus(w http.ResponseWriter, r *http.Request, code int) {
	msg := fmt.Sprintf("the recording proxy answered %s %s with %d", r.Method, r.URL.Path, code)
	body, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: msg, Reason: reasonForCode(code), Code: int32(code)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func reasonForCode(code int) metav1.StatusReason {
	switch code {
	case http.StatusConflict:
		return metav1.StatusReasonConflict
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	case http.StatusGone:
		return metav1.StatusReasonExpired
	default:
		return metav1.StatusReasonInternalError
	}
}

// Writes counts the mutating requests other than the Lease's sent in [from, to).
func (p *Proxy) Writes(from, to time.Time) int { return len(p.WriteRequests(from, to)) }

// WriteRequests are the mutating requests other than the Lease's sent in [from, to).
func (p *Proxy) WriteRequests(from, to time.Time) []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Request
	for _, r := range p.reqs {
		if isWrite(r, from, to) {
			out = append(out, r)
		}
	}
	return out
}

func isWrite(r Request, from, to time.Time) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return !strings.HasPrefix(r.Path, "/apis/coordination.k8s.io/") && !r.At.Before(from) && r.At.Before(to)
}

// Cut ends every response being streamed, watches included, the way the API server ends a
// watch: upstream the request is cancelled, downstream the body ends cleanly, so the client
// resumes from the last resourceVersion it saw (a connection error would make it relist
// without trying). Its connection stays open.
func (p *Proxy) Cut() {
	p.mu.Lock()
	close(p.cut)
	p.cut = make(chan struct{})
	bodies := p.bodies
	p.bodies = map[*cutBody]bool{}
	p.mu.Unlock()
	for b := range bodies {
		_ = b.ReadCloser.Close() // unblocks its Read, which then reports io.EOF
	}
}
