// http_requests_total as vLLM v0.11 serves it: its api_server's mount_metrics instruments the
// FastAPI app with prometheus_fastapi_instrumentator's defaults (the status grouped as "2xx",
// "5xx", ...; a path no route matches is handler "none") and excludes the handlers /metrics,
// /health, /load, /ping, /version and /server_info, each a regular expression searched in the
// handler (so /v1/load_lora_adapter, which contains "/load", is not counted either). The API-key
// middleware wraps the instrumentator, so a refused key is not counted. It is the one family on
// /metrics that counts failed requests: vllm:request_success_total counts only finished ones.

package vllm

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/pyrepr"
)

// excludedHandlers are vLLM v0.11's Instrumentator(excluded_handlers=...).
var excludedHandlers = func() []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, h := range []string{"/metrics", "/health", "/load", "/ping", "/version", "/server_info"} {
		out = append(out, regexp.MustCompile(h))
	}
	return out
}()

// httpRequests is the counter's series, in the order first seen (prometheus_client's).
type httpRequests struct {
	mu     sync.Mutex
	series []httpSeries
}

type httpSeries struct {
	handler, method, status string
	n                       uint64
	created                 float64
}

// handlerLabel is the instrumentator's handler: the path of the route that matches the request
// fully (its path and its method), else "none".
func handlerLabel(routes [][2]string, path, method string) string {
	for _, rt := range routes {
		if rt[0] != path {
			continue
		}
		for _, m := range strings.Split(rt[1], ", ") {
			if m == method {
				return path
			}
		}
	}
	return "none"
}

// count records an answered request; code 0 (unanswered) is not counted.
func (h *httpRequests) count(routes [][2]string, r *http.Request, code int) {
	if code == 0 {
		return
	}
	handler := handlerLabel(routes, r.URL.Path, r.Method)
	for _, re := range excludedHandlers {
		if re.MatchString(handler) {
			return
		}
	}
	status := fmt.Sprintf("%dxx", code/100)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.series {
		s := &h.series[i]
		if s.handler == handler && s.method == r.Method && s.status == status {
			s.n++
			return
		}
	}
	h.series = append(h.series, httpSeries{handler: handler, method: r.Method, status: status, n: 1,
		created: float64(time.Now().UnixNano()) / 1e9})
}

// write is the family as prometheus_client's generate_latest writes a labelled counter: the
// _total samples, then the _created ones as a gauge of their own; labels sorted.
func (h *httpRequests) write(b *strings.Builder) {
	const help = "Total number of requests by method, status and handler."
	h.mu.Lock()
	defer h.mu.Unlock()
	lbl := func(s httpSeries) string {
		return fmt.Sprintf("handler=%q,method=%q,status=%q", s.handler, s.method, s.status)
	}
	fmt.Fprintf(b, "# HELP http_requests_total %s\n# TYPE http_requests_total counter\n", help)
	for _, s := range h.series {
		fmt.Fprintf(b, "http_requests_total{%s} %s\n", lbl(s), pyrepr.Float(float64(s.n)))
	}
	if len(h.series) == 0 {
		return
	}
	fmt.Fprintf(b, "# HELP http_requests_created %s\n# TYPE http_requests_created gauge\n", help)
	for _, s := range h.series {
		fmt.Fprintf(b, "http_requests_created{%s} %s\n", lbl(s), pyrepr.Float(s.created))
	}
}
