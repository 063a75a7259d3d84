package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
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
	reqs       []request
	cut        chan struct{}     // closed by Cut; replaced for later requests
	bodies     map[*cutBody]bool // upstream bodies being streamed
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

type request struct {
	at           time.Time
	method, path string
}

// StartProxy starts a proxy, closed when the test ends. It presents no client certificate
// upstream: the process's own ServiceAccount token authenticates it.
func (e *Env) StartProxy(t testing.TB) *Proxy {
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
		p.mu.Lock()
		p.reqs = append(p.reqs, request{time.Now(), r.Method, r.URL.Path})
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	t.Cleanup(func() { p.srv.CloseClientConnections(); p.srv.Close() })
	kc, err := clientcmd.LoadFromFile(e.SAKubeconfig)
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

// Writes counts the mutating requests other than the Lease's sent in [from, to).
func (p *Proxy) Writes(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.reqs {
		switch r.method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			continue
		}
		if strings.HasPrefix(r.path, "/apis/coordination.k8s.io/") || r.at.Before(from) || !r.at.Before(to) {
			continue
		}
		n++
	}
	return n
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
