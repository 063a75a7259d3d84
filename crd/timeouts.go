// spec.gateway.timeouts: the HTTPRoute timeouts the model's route carries (Gateway API
// HTTPRouteTimeouts, GEP-1742), their defaults and their validation as pure code.

package crd

import (
	"fmt"
	"regexp"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// RouteTimeouts are the route's request and backendRequest timeouts, Gateway API durations
// ("300s", "5m", "1h30m"; "0s" turns a timeout off).
type RouteTimeouts struct {
	// Request bounds a client's request through the gateway, until the response is complete
	// (Envoy's route timeout); default DefaultRouteRequestTimeout.
	Request string `json:"request,omitempty"`
	// BackendRequest bounds one attempt from the gateway to a backend (Envoy's per-try
	// timeout); at most Request. Unset: only Request applies.
	BackendRequest string `json:"backendRequest,omitempty"`
}

// DefaultRouteRequestTimeout is the request timeout of a route without spec.gateway.timeouts:
// the Inference Extension's chart's (timeouts.request: 300s), over the activator's longest
// hold (MinRouteRequestTimeoutAtZero). Unset, Envoy-based gateways cut a route at 15 s.
const DefaultRouteRequestTimeout = "300s"

// MinRouteRequestTimeoutAtZero is the shortest request timeout of a model that scales to zero:
// the activator's default hold (--max-wait 3m), so a request held for a cold start is not cut
// by the gateway before the model serves it.
const MinRouteRequestTimeoutAtZero = 3 * time.Minute

// gatewayDuration is the Gateway API's Duration format (GEP-2257).
var gatewayDuration = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

// GatewayDurationPattern is gatewayDuration for the schema.
const GatewayDurationPattern = `^([0-9]{1,5}(h|m|s|ms)){1,4}$`

// The timeouts' CEL rules, the Gateway API's own for backendRequest and ours for scale to zero.
const (
	RuleBackendWithinRequest    = `!(has(self.request) && has(self.backendRequest) && duration(self.request) != duration('0s') && (duration(self.backendRequest) == duration('0s') || duration(self.backendRequest) > duration(self.request)))`
	RuleBackendWithinRequestMsg = "spec.gateway.timeouts.backendRequest must not be longer than timeouts.request (nor 0s, off, while request is on)"
	RuleTimeoutHoldsColdStart   = `!has(self.gateway) || !has(self.gateway.timeouts) || !has(self.gateway.timeouts.request) || !has(self.autoscaling) || self.autoscaling.minReplicas != 0 || duration(self.gateway.timeouts.request) == duration('0s') || duration(self.gateway.timeouts.request) >= duration('3m')`
	RuleTimeoutHoldsColdStartMs = "spec.gateway.timeouts.request must be at least 3m (or 0s, off) with autoscaling.minReplicas 0: the activator holds a request for a cold start up to 3m (its --max-wait), and the gateway would cut it first"
)

// ParseGatewayDuration reads a Gateway API duration.
func ParseGatewayDuration(s string) (time.Duration, error) {
	if !gatewayDuration.MatchString(s) {
		return 0, fmt.Errorf("%q is not a Gateway API duration (such as 300s, 5m or 1h30m)", s)
	}
	return time.ParseDuration(s)
}

// RequestTimeout is the route's request timeout: spec.gateway.timeouts.request, else the default.
func (g *Gateway) RequestTimeout() string {
	if g != nil && g.Timeouts != nil && g.Timeouts.Request != "" {
		return g.Timeouts.Request
	}
	return DefaultRouteRequestTimeout
}

// BackendRequestTimeout is spec.gateway.timeouts.backendRequest; "" when unset.
func (g *Gateway) BackendRequestTimeout() string {
	if g != nil && g.Timeouts != nil {
		return g.Timeouts.BackendRequest
	}
	return ""
}

// validateTimeouts repeats the timeouts' schema and CEL rules (the annotation form of
// v1alpha1 passes neither).
func validateTimeouts(e *SpecExtensions) []string {
	if e.Gateway == nil || e.Gateway.Timeouts == nil {
		return nil
	}
	t := e.Gateway.Timeouts
	var errs []string
	var req, be time.Duration
	var reqErr, beErr error
	if t.Request != "" {
		if req, reqErr = ParseGatewayDuration(t.Request); reqErr != nil {
			errs = append(errs, "spec.gateway.timeouts.request: "+reqErr.Error())
		}
	}
	if t.BackendRequest != "" {
		if be, beErr = ParseGatewayDuration(t.BackendRequest); beErr != nil {
			errs = append(errs, "spec.gateway.timeouts.backendRequest: "+beErr.Error())
		}
	}
	if reqErr != nil || beErr != nil {
		return errs
	}
	if t.Request != "" && t.BackendRequest != "" && req != 0 && (be == 0 || be > req) {
		errs = append(errs, RuleBackendWithinRequestMsg)
	}
	if t.Request != "" && req != 0 && req < MinRouteRequestTimeoutAtZero && e.Autoscaling != nil && e.Autoscaling.MinReplicas == 0 {
		errs = append(errs, RuleTimeoutHoldsColdStartMs)
	}
	return errs
}

// routeTimeoutsSchema is spec.gateway.timeouts' schema: the Gateway API's HTTPRouteTimeouts.
func routeTimeoutsSchema() apiextensionsv1.JSONSchemaProps {
	d := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Pattern: GatewayDurationPattern, MaxLength: ptr.To[int64](24), Description: desc}
	}
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "The route's timeouts (Gateway API HTTPRouteTimeouts), as Gateway API durations such as 300s or 5m; 0s turns one off. Unset, request is " + DefaultRouteRequestTimeout + " (the Inference Extension chart's): Envoy-based gateways otherwise cut every route at 15 s, a long generation and a cold start held by the activator alike.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"request":        d("How long the gateway waits for the whole response to a client's request (Envoy's route timeout); default " + DefaultRouteRequestTimeout + ". With minReplicas 0, at least 3m: the activator's hold for a cold start."),
			"backendRequest": d("How long the gateway waits for one attempt at the backend (Envoy's per-try timeout); at most request. Unset: only request applies."),
		},
		XValidations: apiextensionsv1.ValidationRules{{Rule: RuleBackendWithinRequest, Message: RuleBackendWithinRequestMsg}},
	}
}
