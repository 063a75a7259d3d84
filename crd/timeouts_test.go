package crd

import (
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// timeoutCases are spec extensions and the message the timeouts' rules answer them with ("": allowed).
var timeoutCases = []struct{ ext, want string }{
	{`{"replicas":1,"gateway":{}}`, ""},
	{`{"replicas":1,"gateway":{"timeouts":{"request":"300s"}}}`, ""},
	{`{"replicas":1,"gateway":{"timeouts":{"request":"10m","backendRequest":"5m"}}}`, ""},
	{`{"replicas":1,"gateway":{"timeouts":{"request":"0s","backendRequest":"5m"}}}`, ""},
	{`{"replicas":1,"gateway":{"timeouts":{"request":"30s"}}}`, ""},
	{`{"replicas":1,"gateway":{"timeouts":{"request":"1m","backendRequest":"2m"}}}`, RuleBackendWithinRequestMsg},
	{`{"replicas":1,"gateway":{"timeouts":{"request":"1m","backendRequest":"0s"}}}`, RuleBackendWithinRequestMsg},
	{`{"autoscaling":{"minReplicas":0,"maxReplicas":2},"gateway":{"timeouts":{"request":"30s"}}}`, RuleTimeoutHoldsColdStartMs},
	{`{"autoscaling":{"minReplicas":0,"maxReplicas":2},"gateway":{"timeouts":{"request":"3m"}}}`, ""},
	{`{"autoscaling":{"minReplicas":0,"maxReplicas":2},"gateway":{"timeouts":{"request":"0s"}}}`, ""},
	{`{"autoscaling":{"minReplicas":1,"maxReplicas":2},"gateway":{"timeouts":{"request":"30s"}}}`, ""},
}

// TestRouteTimeoutsCEL: the CRD's CEL rules and Validate (the v1alpha1 annotation's check)
// refuse and let through the same timeouts, with the same messages.
func TestRouteTimeoutsCEL(t *testing.T) {
	evalCEL := newCELSpec(t)
	for _, tc := range timeoutCases {
		s := map[string]any{}
		if err := utiljson.Unmarshal([]byte(tc.ext), &s); err != nil {
			t.Fatal(err)
		}
		s["baseModel"], s["gpusPerReplica"] = "m", int64(1)
		got := strings.Join(evalCEL(t, s), "; ")
		var ext SpecExtensions
		if err := utiljson.Unmarshal([]byte(tc.ext), &ext); err != nil {
			t.Fatal(err)
		}
		pure := strings.Join(validateTimeouts(&ext), "; ")
		for name, g := range map[string]string{"CEL": got, "Validate": pure} {
			switch {
			case tc.want == "" && g != "":
				t.Errorf("%s %s: %q", name, tc.ext, g)
			case tc.want != "" && !strings.Contains(g, tc.want):
				t.Errorf("%s %s: want %q, got %q", name, tc.ext, tc.want, g)
			}
		}
	}
}

func TestParseGatewayDuration(t *testing.T) {
	for s, ok := range map[string]bool{"300s": true, "5m": true, "1h30m": true, "0s": true, "500ms": true, "1.5s": false, "-1s": false, "": false, "5": false, "123456s": false} {
		if _, err := ParseGatewayDuration(s); (err == nil) != ok {
			t.Errorf("%q: %v", s, err)
		}
	}
	var g *Gateway
	if g.RequestTimeout() != DefaultRouteRequestTimeout || (&Gateway{Timeouts: &RouteTimeouts{Request: "10m"}}).RequestTimeout() != "10m" {
		t.Error("RequestTimeout's default")
	}
}
