// The Prometheus Operator ServiceMonitor that scrapes a model's pods: desired (drift and
// set are the optional children's, in optional.go).

package reconcile

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

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

// withCanaryService widens the model's ServiceMonitor to its canary's Service while a canary
// runs (canary.go): a rollout judged from Prometheus (--rollout-prometheus-url) reads both sides'
// series, told apart by the InstanceLabel podTargetLabels carries (the canary's is
// CanaryInstance). Only then, so a model without a rollout keeps its ServiceMonitor as it was.
func withCanaryService(sm *unstructured.Unstructured, name string) *unstructured.Unstructured {
	out := sm.DeepCopy()
	_ = unstructured.SetNestedField(out.Object, map[string]interface{}{"matchExpressions": []interface{}{map[string]interface{}{
		"key": kinds.InstanceLabel, "operator": "In", "values": []interface{}{name, CanaryInstance(name)}}}}, "spec", "selector")
	return out
}
