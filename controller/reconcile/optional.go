package reconcile

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// Children whose CRDs may not be installed: a Prometheus Operator ServiceMonitor per model, a
// Gateway API HTTPRoute per model with spec.gateway, and with --autoscaler=keda a KEDA
// ScaledObject per model instead of its HPA. They are unstructured, so the operator needs
// none of these projects' Go modules.
var (
	ServiceMonitorGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	HTTPRouteGVR      = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	ScaledObjectGVR   = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
)

// Kinds of the optional children, and their resources.
const (
	KindServiceMonitor = "ServiceMonitor"
	KindHTTPRoute      = "HTTPRoute"
	KindScaledObject   = "ScaledObject"
)

// GVROfKind is the resource of an optional child's kind.
func GVROfKind(kind string) (schema.GroupVersionResource, bool) {
	switch kind {
	case KindServiceMonitor:
		return ServiceMonitorGVR, true
	case KindHTTPRoute:
		return HTTPRouteGVR, true
	case KindScaledObject:
		return ScaledObjectGVR, true
	case KindLeaderWorkerSet:
		return LeaderWorkerSetGVR, true
	}
	return schema.GroupVersionResource{}, false
}

// Features are the optional children this cluster can hold, found by discovery at start.
type Features struct {
	// ServiceMonitors: monitoring.coreos.com/v1 is served.
	ServiceMonitors bool
	// HTTPRoutes: gateway.networking.k8s.io/v1 is served and GatewayParent names the Gateway
	// routes attach to.
	HTTPRoutes    bool
	GatewayParent types.NamespacedName
	// ScaledObjects: --autoscaler=keda and keda.sh/v1alpha1 is served: each model gets a
	// ScaledObject whose Prometheus trigger asks KEDAPrometheus, instead of an HPA.
	ScaledObjects  bool
	KEDAPrometheus string
	// KEDAUnserved: --autoscaler=keda but KEDA's CRD is not served. The models keep their
	// HPAs, and their AutoscalingActive condition says why.
	KEDAUnserved bool
	// LeaderWorkerSets: leaderworkerset.x-k8s.io/v1 is served, so multi-node models
	// (spec.multiNode) can run; without it they are refused (MultiNodeUnsupported).
	LeaderWorkerSets bool
	// KueueWorkloads: kueue.x-k8s.io/v1beta2 Workloads are served and watched, so a gated
	// pod's wait is told in Kueue's words.
	KueueWorkloads bool
	// KueueVisibility: Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta2) is served,
	// so a queued pod's position is read (WantsQueuePositions).
	KueueVisibility bool
	// KueueClusterQueues: Kueue's ClusterQueues are watched, so an admitted model says what
	// its ClusterQueue borrows from its cohort.
	KueueClusterQueues bool
	// CreatingEvidenceAfter: a pod whose container is still being created this long after it
	// was scheduled has its Events read (CreatingPods); 0 reads none.
	CreatingEvidenceAfter time.Duration
}

// metricsPath is where vLLM serves Prometheus metrics, on its API port.
const metricsPath = "/metrics"

// desiredServiceMonitor scrapes vLLM's /metrics (num_requests_waiting and the rest) through
// the model's Service.
func desiredServiceMonitor(isvc *crd.InferenceService) *unstructured.Unstructured {
	u := newChildUnstructured(isvc, "monitoring.coreos.com/v1", KindServiceMonitor)
	u.Object["spec"] = map[string]interface{}{
		"selector":          map[string]interface{}{"matchLabels": map[string]interface{}{kinds.InstanceLabel: isvc.Name}},
		"namespaceSelector": map[string]interface{}{"matchNames": []interface{}{isvc.Namespace}},
		// The model's label on its series: KEDA's query selects the model by it (QueueQuery).
		"podTargetLabels": []interface{}{kinds.InstanceLabel},
		"endpoints": []interface{}{map[string]interface{}{
			"port": PortName, "path": metricsPath, "interval": "15s", "scheme": "http",
		}},
	}
	return u
}

// InferencePaths are the model server's paths a client reaches through the gateway: vLLM
// v0.11's OpenAI-compatible inference API and its tokenizer. The rest stays inside the
// cluster: /v1/load_lora_adapter and /v1/unload_lora_adapter (anyone could replace a served
// adapter), /health, /metrics, /reset_prefix_cache, /sleep, /wake_up, /collective_rpc, the
// profiler and the server's info.
var InferencePaths = []string{
	"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings", "/v1/models",
	"/v1/audio/transcriptions", "/v1/audio/translations", "/v1/score", "/v1/rerank",
	"/pooling", "/classify", "/tokenize", "/detokenize",
}

// desiredHTTPRoute routes spec.gateway.route (default /{namespace}/{name}) on the parent
// Gateway to the model's Service, one rule per inference path, the prefix stripped on the way
// in; nil without spec.gateway. Fields the Gateway API defaults are written out, so the
// comparison sees no drift.
func desiredHTTPRoute(isvc *crd.InferenceService, ext *crd.SpecExtensions, parent types.NamespacedName) *unstructured.Unstructured {
	if ext.Gateway == nil {
		return nil
	}
	r := RouteOf(isvc, ext)
	u := newChildUnstructured(isvc, "gateway.networking.k8s.io/v1", KindHTTPRoute)
	rules := make([]interface{}, 0, len(InferencePaths))
	prefix := strings.TrimSuffix(r.Path, "/")
	for _, p := range InferencePaths {
		rules = append(rules, map[string]interface{}{
			"matches": []interface{}{map[string]interface{}{
				"path": map[string]interface{}{"type": "PathPrefix", "value": prefix + p},
			}},
			"filters": []interface{}{map[string]interface{}{
				"type": "URLRewrite",
				"urlRewrite": map[string]interface{}{
					"path": map[string]interface{}{"type": "ReplacePrefixMatch", "replacePrefixMatch": p},
				},
			}},
			"backendRefs": []interface{}{map[string]interface{}{
				"group": "", "kind": "Service", "name": isvc.Name, "port": int64(Port), "weight": int64(1),
			}},
		})
	}
	u.Object["spec"] = map[string]interface{}{
		"parentRefs": []interface{}{map[string]interface{}{
			"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": parent.Namespace, "name": parent.Name,
		}},
		"rules": rules,
	}
	return u
}

// routeAccepted reports whether the HTTPRoute's status says the parent Gateway accepted it
// for the current generation; a route without status (no Gateway controller) is not.
func routeAccepted(r *unstructured.Unstructured, parent types.NamespacedName) bool {
	parents, _, _ := unstructured.NestedSlice(r.Object, "status", "parents")
	for _, p := range parents {
		pm, ok := p.(map[string]interface{})
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(pm, "parentRef", "name")
		ns, _, _ := unstructured.NestedString(pm, "parentRef", "namespace")
		if name != parent.Name || (ns != "" && ns != parent.Namespace) {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(pm, "conditions")
		for _, c := range conds {
			cm, ok := c.(map[string]interface{})
			if !ok || cm["type"] != "Accepted" {
				continue
			}
			gen, found, _ := unstructured.NestedInt64(cm, "observedGeneration")
			if cm["status"] == "True" && (!found || gen == r.GetGeneration()) {
				return true
			}
		}
	}
	return false
}

func newChildUnstructured(isvc *crd.InferenceService, apiVersion, kind string) *unstructured.Unstructured {
	meta := childMeta(isvc)
	labels := map[string]interface{}{}
	for k, v := range meta.Labels {
		labels[k] = v
	}
	ref := meta.OwnerReferences[0]
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]interface{}{
			"name": meta.Name, "namespace": meta.Namespace, "labels": labels,
			"ownerReferences": []interface{}{map[string]interface{}{
				"apiVersion": ref.APIVersion, "kind": ref.Kind, "name": ref.Name, "uid": string(ref.UID),
				"controller": true, "blockOwnerDeletion": true,
			}},
		},
	}}
}

// unstructuredDrifted compares labels and the whole spec: the operator owns every field it
// writes there, and writes out what the CRDs default.
func unstructuredDrifted(live, want *unstructured.Unstructured) bool {
	return !hasLabels(live.GetLabels(), want.GetLabels()) || !equality.Semantic.DeepEqual(live.Object["spec"], want.Object["spec"])
}

func setUnstructured(out, want *unstructured.Unstructured) {
	out.SetLabels(mergeLabels(out.GetLabels(), want.GetLabels()))
	out.Object["spec"] = runtimeDeepCopy(want.Object["spec"])
}

func runtimeDeepCopy(v interface{}) interface{} {
	return (&unstructured.Unstructured{Object: map[string]interface{}{"v": v}}).DeepCopy().Object["v"]
}
