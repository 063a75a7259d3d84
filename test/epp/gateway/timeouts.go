package main

// An HTTPRoute rule's timeouts as Envoy-based gateways (Envoy Gateway, kgateway) enforce them
// (Gateway API GEP-1742): timeouts.request becomes Envoy's route timeout, which is 15 s when
// the route sets none; timeouts.backendRequest its per-try timeout; "0s" turns one off. The
// route timeout runs from the moment the whole request has been received to the end of the
// response: fired before the upstream's response headers, Envoy answers 504 with the body
// "upstream request timeout"; fired later, it resets the stream (route_components.proto,
// RouteAction.timeout), so a client sees its streamed response cut short.

import (
	"context"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DefaultRouteTimeout is Envoy's route timeout when the route sets none.
const DefaultRouteTimeout = 15 * time.Second

// UpstreamTimeoutBody is Envoy's local reply to a route or per-try timeout (response flag UT).
const UpstreamTimeoutBody = "upstream request timeout"

// Timeouts are a rule's timeouts.request and timeouts.backendRequest; nil: unset.
type Timeouts struct {
	Request, BackendRequest *time.Duration
}

// parseTimeouts reads a rule's timeouts; an unparsable duration counts as unset (the API
// server's schema refuses it on a real HTTPRoute CRD).
func parseTimeouts(rule map[string]any) Timeouts {
	var t Timeouts
	for field, dst := range map[string]**time.Duration{"request": &t.Request, "backendRequest": &t.BackendRequest} {
		s, found, _ := unstructured.NestedString(rule, "timeouts", field)
		if !found {
			continue
		}
		if d, err := time.ParseDuration(s); err == nil && d >= 0 {
			*dst = &d
		}
	}
	return t
}

// Bound is how long the gateway lets one forwarded request run, its response included: the
// shorter of the request timeout (def when unset) and the backendRequest timeout (a single
// attempt: this gateway never retries); 0 when neither applies.
func (t Timeouts) Bound(def time.Duration) time.Duration {
	req := def
	if t.Request != nil {
		req = *t.Request
	}
	bound := req
	if t.BackendRequest != nil && *t.BackendRequest > 0 && (bound == 0 || *t.BackendRequest < bound) {
		bound = *t.BackendRequest
	}
	return bound
}

// withRouteTimeout is ctx bounded by d (0: unbounded) and a way to tell, once the exchange
// failed or ended, whether the route timeout (not the client) ended it.
func withRouteTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc, func() bool) {
	if d <= 0 {
		c, cancel := context.WithCancel(ctx)
		return c, cancel, func() bool { return false }
	}
	c, cancel := context.WithTimeout(ctx, d)
	return c, cancel, func() bool { return ctx.Err() == nil && c.Err() == context.DeadlineExceeded }
}

// writeUpstreamTimeout is Envoy's 504 local reply.
func writeUpstreamTimeout(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusGatewayTimeout)
	_, _ = w.Write([]byte(UpstreamTimeoutBody))
}
