package activator

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

// DefaultHeader carries a request's model as "namespace/name", for a route that adds it (an
// HTTPRoute's RequestHeaderModifier) instead of prefixing the path.
const DefaultHeader = kinds.ActivatorModelHeader // the operator's routes set it

// HandlerOptions configure a Handler; zero fields take the defaults, except that a nil Catalog
// serves no model and empty Sources admit nobody.
type HandlerOptions struct {
	// Header names the model header; DefaultHeader when empty.
	Header string
	// Catalog says which keys name a model the activator serves; nil serves none.
	Catalog Catalog
	// HeaderSources are the callers whose model header is believed: the gateway's addresses.
	HeaderSources Sources
	// PathSources are the callers who may name a model by the path form (/namespace/name/...).
	PathSources Sources
	// Transport reaches the model pods; NewTransport(DefaultResponseHeaderTimeout) when nil.
	Transport http.RoundTripper
	// MaxBufferedBody bounds the bytes of a body read before the hold; DefaultMaxBufferedBody
	// when 0.
	MaxBufferedBody int64
	// Budget bounds the bytes of all bodies read ahead at once, in all and per namespace; nil
	// bounds nothing.
	Budget *Budget
	// Recorder, if set, hears of every request and cold start (the activity writer).
	Recorder Recorder
}

// Recorder hears of the requests a Handler serves; *Activity is one.
type Recorder interface {
	// Arrived is called as a request's model is known, done once it is answered or refused.
	Arrived(Key) (done func())
	// ColdStarted is called at the first byte of a request that was held.
	ColdStarted(key Key, arrived time.Time, firstByte time.Duration)
}

// DefaultMaxBufferedBody covers a chat request with a long prompt; the Budget bounds the sum.
const DefaultMaxBufferedBody = 1 << 20

// Proxy timeouts. A request reaches the proxy only once its model has a ready endpoint, so
// these bound a pod that stops answering, not a cold start.
const (
	// DefaultResponseHeaderTimeout bounds the wait for a pod's response headers: a streamed
	// completion sends them at once, a whole one after its last token, so this is the longest
	// non-streamed completion the activator waits for.
	DefaultResponseHeaderTimeout = 10 * time.Minute
	// DefaultIdleConnTimeout closes a kept-alive connection to a pod unused this long, so the
	// connections of a model gone to zero do not outlive it.
	DefaultIdleConnTimeout = 90 * time.Second
	// DefaultDialTimeout bounds a connection to a pod that was ready a moment ago.
	DefaultDialTimeout = 10 * time.Second
)

// NewTransport is the transport to model pods: no proxy from the environment (endpoints are
// pod IPs), a burst released at once to one pod reusing its connections instead of opening a
// hundred, and the timeouts above.
func NewTransport(responseHeaderTimeout time.Duration) *http.Transport {
	if responseHeaderTimeout <= 0 {
		responseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.MaxIdleConnsPerHost = DefaultMaxHeld
	t.ResponseHeaderTimeout = responseHeaderTimeout
	t.IdleConnTimeout = DefaultIdleConnTimeout
	return t
}

// Handler holds each request until its model has an endpoint, then proxies it there. The model is
// the header's "namespace/name", else the path's first two segments (/NS/NAME/v1/...), which are
// then cut from the path the pod sees.
type Handler struct {
	holder  *Holder
	header  string
	catalog Catalog
	// headerFrom and pathFrom are the callers allowed each way of naming a model.
	headerFrom, pathFrom Sources
	maxBody              int64
	budget               *Budget
	proxy                *httputil.ReverseProxy
	metrics              *Metrics
	rec                  Recorder
}

// copyBuffers lends the proxy the buffer it copies a response through. Without it each response
// allocates 32 KiB, two thirds of all a proxied request allocates (issue 55's profile), and so
// most of the collector's work under load. A stream keeps its buffer until it ends, as it kept
// the one it allocated.
type copyBuffers struct{ pool sync.Pool }

// copyBufferSize is httputil's own, when it allocates.
const copyBufferSize = 32 << 10

func (b *copyBuffers) Get() []byte {
	if p, ok := b.pool.Get().(*[]byte); ok {
		return *p
	}
	return make([]byte, copyBufferSize)
}

func (b *copyBuffers) Put(buf []byte) { b.pool.Put(&buf) }

// target is where one request goes, handed from ServeHTTP to the proxy's Rewrite.
type target struct {
	endpoint string
	// path is the path the pod sees; empty to keep the request's.
	path string
}

type targetKey struct{}

// NewHandler returns a Handler over holder; its cold starts are recorded on holder's Metrics.
func NewHandler(holder *Holder, opts HandlerOptions) *Handler {
	if opts.Header == "" {
		opts.Header = DefaultHeader
	}
	if opts.Transport == nil {
		opts.Transport = NewTransport(DefaultResponseHeaderTimeout)
	}
	defaultIfUnset(&opts.MaxBufferedBody, DefaultMaxBufferedBody)
	h := &Handler{holder: holder, header: opts.Header, catalog: opts.Catalog, headerFrom: opts.HeaderSources, pathFrom: opts.PathSources,
		maxBody: opts.MaxBufferedBody, budget: opts.Budget, metrics: holder.opts.Metrics, rec: opts.Recorder}
	// A ReverseProxy never follows a redirect: a pod's 3xx goes back to the client as it is,
	// so the activator is nobody's deputy toward another address (TestProxyFollowsNoRedirect).
	h.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(targetKey{}).(target)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = t.endpoint
			pr.Out.Host = t.endpoint
			if t.path != "" {
				pr.Out.URL.Path, pr.Out.URL.RawPath = t.path, ""
			}
			pr.Out.Header.Del(h.header)
			pr.SetXForwarded()
		},
		Transport:  opts.Transport,
		BufferPool: &copyBuffers{},
		// Completions stream token by token. The proxy flushes a response of unknown length
		// (SSE, chunked) write by write already; -1 makes that the rule for every response.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client is gone; nobody reads an answer
			}
			writeError(w, http.StatusBadGateway, "BadGateway", "model server did not answer: "+err.Error(), 0)
		},
	}
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	// Every check before anything is held, read or recorded: a refused request costs nothing.
	key, path, byHeader, ok := h.keyOf(r)
	if !ok {
		h.deny(w, DenyNoModel, noModelMessage(h.header))
		return
	}
	if byHeader && !h.headerFrom.Admits(r.RemoteAddr) {
		h.deny(w, DenySource, headerSourceMessage(h.header))
		return
	}
	if !byHeader && !h.pathFrom.Admits(r.RemoteAddr) {
		h.deny(w, DenySource, pathSourceMessage)
		return
	}
	podPath := path
	if byHeader {
		podPath = r.URL.Path
	}
	if !InferencePath(podPath) {
		h.deny(w, DenyPath, pathMessage(podPath, key))
		return
	}
	if h.catalog == nil || !h.catalog.Serves(key) {
		h.deny(w, DenyNoModel, unknownModelMessage(key))
		return
	}
	if h.rec != nil {
		defer h.rec.Arrived(key)()
	}
	release, err := h.readAhead(r, key)
	var refused *Refused
	switch {
	case errors.As(err, &refused):
		h.metrics.refused(refused.Reason)
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailable", refused.Error(), refused.RetryAfter)
		return
	case err != nil:
		return // the client went while sending its body
	}
	defer release()
	l, err := h.holder.hold(r.Context(), key)
	switch {
	case errors.As(err, &refused):
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailable", refused.Error(), refused.RetryAfter)
		return
	case err != nil:
		return // the client went while held: its slot is free, and there is no one to answer
	}
	defer l.release()
	if l.cold {
		w = &firstByte{ResponseWriter: w, arrived: arrived, observe: func(d time.Duration) {
			h.metrics.coldStarted(d)
			if h.rec != nil {
				h.rec.ColdStarted(key, arrived, d)
			}
		}}
	}
	ctx := context.WithValue(r.Context(), targetKey{}, target{endpoint: l.endpoint, path: path})
	h.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// deny answers a request refused before anything was held: 404 (403 for a caller not allowed
// its way of naming a model) in OpenAI's error shape, counted by reason.
func (h *Handler) deny(w http.ResponseWriter, d Denial, msg string) {
	h.metrics.denied(d)
	if d == DenySource {
		writeError(w, http.StatusForbidden, "Forbidden", msg, 0)
		return
	}
	writeError(w, http.StatusNotFound, "NotFound", msg, 0)
}

// readAhead reads r's body (up to maxBody) before the hold, and puts it back in front of the rest.
// Go's HTTP/1 server notices a client that hangs up only once the body was read to its end, so
// without this a held POST would keep its slot until MaxWait after its client left. A body over
// the bound is forwarded as well, its client's leaving seen at MaxWait at the latest. The bytes
// read are claimed from the Budget before they are allocated, and given back once the proxy
// has sent them on (or the request ends); past the Budget's bounds it returns a *Refused.
func (h *Handler) readAhead(r *http.Request, key Key) (release func(), err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return func() {}, nil
	}
	var claimed int64
	var chunks [][]byte
	for read := int64(0); read < h.maxBody; {
		size := min(readChunk, h.maxBody-read)
		if r.ContentLength > 0 {
			// Known: one allocation of exactly what comes (up to the bound).
			size = min(r.ContentLength, h.maxBody) - read
		}
		if size <= 0 {
			break
		}
		if reason, limit, ok := h.budget.take(key.Namespace, size); !ok {
			h.budget.give(key.Namespace, claimed)
			return nil, &Refused{Key: key, Reason: reason, RetryAfter: h.holder.RetryAfter(), MaxBytes: limit}
		}
		claimed += size
		buf := make([]byte, size)
		n, err := io.ReadFull(r.Body, buf)
		chunks, read = append(chunks, buf[:n]), read+int64(n)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			h.budget.give(key.Namespace, claimed)
			return nil, err
		}
	}
	var once sync.Once
	release = func() { once.Do(func() { h.budget.give(key.Namespace, claimed) }) }
	r.Body = &replay{chunks: chunks, rest: r.Body, drained: release}
	return release, nil
}

// readChunk is the allocation step of a body of unknown length (chunked): small, so a short
// body claims little more than it is.
const readChunk = 16 << 10

// replay reads the chunks read ahead, then the rest of the body. Once the chunks are read (the
// proxy sent them to the pod) it drops them and gives their bytes back to the Budget: a
// completion that streams for minutes holds none of its prompt. The transport reads it on its
// own goroutine, so mu guards the chunks.
type replay struct {
	mu      sync.Mutex
	chunks  [][]byte
	rest    io.ReadCloser
	drained func()
}

func (p *replay) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.chunks) > 0 {
		n := copy(b, p.chunks[0])
		if p.chunks[0] = p.chunks[0][n:]; len(p.chunks[0]) == 0 {
			p.chunks[0] = nil
			p.chunks = p.chunks[1:]
			if len(p.chunks) == 0 {
				p.drained()
			}
		}
		if n > 0 || len(b) == 0 {
			return n, nil
		}
	}
	return p.rest.Read(b)
}

func (p *replay) Close() error { return p.rest.Close() }

// keyOf reads r's model, whether the header named it, and the path the pod should see when
// the path named it.
func (h *Handler) keyOf(r *http.Request) (key Key, path string, byHeader, ok bool) {
	if v := r.Header.Get(h.header); v != "" {
		ns, name, ok := strings.Cut(v, "/")
		return Key{Namespace: ns, Name: name}, "", true, ok && ns != "" && name != "" && !strings.Contains(name, "/")
	}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return Key{}, "", false, false
	}
	rest := "/"
	if len(parts) == 3 {
		rest += parts[2]
	}
	return Key{Namespace: parts[0], Name: parts[1]}, rest, false, true
}

// writeError answers in OpenAI's error shape, which clients of a vLLM server already parse.
func writeError(w http.ResponseWriter, code int, typ, message string, retryAfter time.Duration) {
	if retryAfter > 0 {
		// Whole seconds, rounded up: a client told 0 would retry at once.
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	body.Error.Message, body.Error.Type, body.Error.Code = message, typ, code
	_ = json.NewEncoder(w).Encode(body)
}
