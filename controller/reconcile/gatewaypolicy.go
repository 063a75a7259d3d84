// The per-gateway objects a model's pool needs where the gateway reads them: an Istio
// DestinationRule that makes the gateway speak TLS to the endpoint picker (which serves TLS,
// cmd/epp's --secure-serving default; Istio sends plaintext unless told), and a GKE
// HealthCheckPolicy that health-checks the pool's pods on vLLM's /health (GKE checks "/" by
// default, which vLLM answers 404, so every backend would be unhealthy). Both as the Inference
// Extension v1.5.0 chart ships them (config/charts/inferencepool/templates/istio.yaml, gke.yaml),
// made only where their kinds are served. Desired objects and the decision here.

package reconcile

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/inferenceservice-operator/crd"
)

// The gateways' policy kinds: Istio's DestinationRule at v1 (served since Istio 1.22, the same
// schema as the chart's v1beta1) and GKE's HealthCheckPolicy.
var (
	DestinationRuleGVR   = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}
	HealthCheckPolicyGVR = schema.GroupVersionResource{Group: "networking.gke.io", Version: "v1", Resource: "healthcheckpolicies"}
)

// Kinds of the gateway policies, as actions and Events name them.
const (
	KindDestinationRule   = "DestinationRule"
	KindHealthCheckPolicy = "HealthCheckPolicy"
)

// PoolHealthPath is where the pool's pods answer health checks (vLLM's /health).
const PoolHealthPath = "/health"

// gatewayPolicies are the pool's per-gateway objects; nil where their kind is not served or
// the model has no pool route.
type gatewayPolicies struct {
	DestinationRule   *unstructured.Unstructured
	HealthCheckPolicy *unstructured.Unstructured
}

// PickerHost is the picker Service's cluster name, the host Istio matches a DestinationRule on.
func PickerHost(isvc *crd.InferenceService) string {
	return PickerName(isvc.Name) + "." + isvc.Namespace + ".svc.cluster.local"
}

// desiredGatewayPolicies builds the policies for the pool route's children in pool.
func desiredGatewayPolicies(isvc *crd.InferenceService, pool poolChildren, f Features) gatewayPolicies {
	var out gatewayPolicies
	if pool.Pool == nil {
		return out
	}
	if f.DestinationRules {
		out.DestinationRule = desiredDestinationRule(isvc)
	}
	if f.HealthCheckPolicies {
		// Named as the pool it targets; 2 s checks as the chart's, for a quick switch over.
		hcp := newChildUnstructured(isvc, HealthCheckPolicyGVR.GroupVersion().String(), KindHealthCheckPolicy)
		hcp.Object["spec"] = map[string]interface{}{
			"targetRef": map[string]interface{}{"group": InferencePoolGVR.Group, "kind": KindInferencePool, "name": isvc.Name},
			"default": map[string]interface{}{
				"timeoutSec": int64(2), "checkIntervalSec": int64(2),
				"config": map[string]interface{}{
					"type":            "HTTP",
					"httpHealthCheck": map[string]interface{}{"requestPath": PoolHealthPath, "port": int64(Port)},
				},
			},
		}
		out.HealthCheckPolicy = hcp
	}
	return out
}

// desiredDestinationRule: TLS to the picker without verification (its certificate is
// self-signed, made at start), as the chart's.
func desiredDestinationRule(isvc *crd.InferenceService) *unstructured.Unstructured {
	dr := unstructuredWith(pickerMeta(isvc), DestinationRuleGVR.GroupVersion().String(), KindDestinationRule)
	dr.Object["spec"] = map[string]interface{}{
		"host": PickerHost(isvc),
		"trafficPolicy": map[string]interface{}{
			"tls": map[string]interface{}{"mode": "SIMPLE", "insecureSkipVerify": true},
		},
	}
	return dr
}

// decideGatewayPolicies creates, corrects and deletes the policies: read and acted on where
// their kind is served (a live one is deleted when the pool route goes).
func decideGatewayPolicies(out *Output, in Input, want gatewayPolicies) {
	isvc, obs, f := in.ISVC, in.Observed, in.Features
	for _, o := range []struct {
		on         bool
		kind       string
		live, want *unstructured.Unstructured
	}{
		{f.DestinationRules, KindDestinationRule, obs.DestinationRule, want.DestinationRule},
		{f.HealthCheckPolicies, KindHealthCheckPolicy, obs.HealthCheckPolicy, want.HealthCheckPolicy},
	} {
		if o.on && decideChild(out, isvc, o.kind, o.live, o.want, o.live == nil, o.want == nil) && unstructuredDrifted(o.live, o.want) {
			upd := o.live.DeepCopy()
			setUnstructured(upd, o.want)
			out.add(Update, o.kind, upd)
		}
	}
}

// gatewayPoliciesInPlace says whether the gateway's policies for the pool are as wanted, and
// if not, what is missing: the gateway cannot use the pool without them.
func gatewayPoliciesInPlace(in Input) (bool, string) {
	isvc, obs, f := in.ISVC, in.Observed, in.Features
	key := isvc.Namespace + "/" + PickerName(isvc.Name)
	if f.DestinationRules {
		if dr := obs.DestinationRule; dr == nil || !ControlledBy(dr, isvc) || unstructuredDrifted(dr, desiredDestinationRule(isvc)) {
			return false, "DestinationRule " + key + " (TLS to the endpoint picker, which serves only TLS) is not in place yet: Istio sends the picker plaintext, and every pooled request fails (failureMode FailClose)"
		}
	}
	if f.HealthCheckPolicies {
		if p := obs.HealthCheckPolicy; p == nil || !ControlledBy(p, isvc) {
			return false, "HealthCheckPolicy " + isvc.Namespace + "/" + isvc.Name + " (health checks on " + PoolHealthPath + ") is not in place yet: GKE checks \"/\", which vLLM answers 404, so the pool's backends are unhealthy"
		}
	}
	return true, ""
}
