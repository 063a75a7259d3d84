package activator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

// DefaultHeader carries a request's model as "namespace/name", for a route that adds it (an
// HTTPRoute's RequestHeaderModifier) instead of prefixing the path.
const DefaultHeader = kinds.ActivatorModelHeader // the operator's routes set it

// HandlerOptions configure a Handler; zero fields take the defaults.
type HandlerOptions struct {
	// Header names the model header; DefaultHeader when empty.
	Header string
	// Transport reaches the model pods; a clone of http.DefaultTransport without a proxy when nil.
	Transport http.RoundTripper
	// MaxBufferedBody bounds the bytes of a body read before the hold; DefaultMaxBufferedBody
	// when 0.
	MaxBufferedBody int64
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

// DefaultMaxBufferedBody covers a chat request with a long prompt: held requests of one model
// keep at most MaxHeld times this in memory.
const DefaultMaxBufferedBody = 1 << 20

// Handler holds each request until its model has an endpoint, then proxies it there. The model is
// the header's "namespace/name", else the path's first two segments (/NS/NAME/v1/...), which are
// then cut from the path the pod sees.
type Handler struct {
	holder  *Holder
	header  string
	maxBody int64
	proxy   *httputil.ReverseProxy
	metrics *Metrics
	rec     Recorder
}

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
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Endpoints are pod IPs: no proxy from the environment, and a burst released at once to
		// one pod reuses its connections instead of opening a hundred.
		t.Proxy = nil
		t.MaxIdleConnsPerHost = DefaultMaxHeld
		opts.Transport = t
	}
	if opts.MaxBufferedBody <= 0 {
		opts.MaxBufferedBody = DefaultMaxBufferedBody
	}
	h := &Handler{holder: holder, header: opts.Header, maxBody: opts.MaxBufferedBody, metrics: holder.opts.Metrics, rec: opts.Recorder}
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
		Transport: opts.Transport,
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
	key, path, ok := h.keyOf(r)
	if !ok {
		writeError(w, http.StatusNotFound, "NotFound", "no model in the request: send "+h.header+": namespace/name, or a path /namespace/name/...", 0)
		return
	}
	if h.rec != nil {
		defer h.rec.Arrived(key)()
	}
	if err := h.readAhead(r); err != nil {
		return // the client went while sending its body
	}
	l, err := h.holder.hold(r.Context(), key)
	var refused *Refused
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

// readAhead reads r's body (up to maxBody) before the hold, and puts it back in front of the rest.
// Go's HTTP/1 server notices a client that hangs up only once the body was read to its end, so
// without this a held POST would keep its slot until MaxWait after its client left. A body over
// the bound is forwarded as well, its client's leaving seen at MaxWait at the latest.
func (h *Handler) readAhead(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, h.maxBody))
	if err != nil {
		return err
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
	return nil
}

// keyOf reads r's model, and the path the pod should see when the model came from the path.
func (h *Handler) keyOf(r *http.Request) (Key, string, bool) {
	if v := r.Header.Get(h.header); v != "" {
		ns, name, ok := strings.Cut(v, "/")
		return Key{Namespace: ns, Name: name}, "", ok && ns != "" && name != "" && !strings.Contains(name, "/")
	}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return Key{}, "", false
	}
	rest := "/"
	if len(parts) == 3 {
		rest += parts[2]
	}
	return Key{Namespace: parts[0], Name: parts[1]}, rest, true
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
