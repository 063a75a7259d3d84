// The custom metrics API as the aggregator registers it: whether an HPA can read Pods metrics
// at all, whatever any one model does.

package kinds

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// APIServiceGVR is the aggregator's registration of an API group version.
var APIServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// CustomMetricsGroup is the API the HPA controller reads Pods metrics (num_requests_waiting) from.
const CustomMetricsGroup = "custom.metrics.k8s.io"

// MetricsAPI is what the cached APIServices say of CustomMetricsGroup.
type MetricsAPI struct {
	// Known: the operator watches APIServices; otherwise nothing below is claimed.
	Known bool
	// Available: some version of the group is registered and its APIService Available.
	Available bool
	// Why it is not, in a line, when Known and not Available.
	Why string
}

// StripAPIService keeps what MetricsAPIOf reads: the name, group, version and the Available
// condition without its time, so only a change of availability is a change of the cache.
func StripAPIService(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return stripManagedFields(obj)
	}
	out := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]interface{}{"name": u.GetName(), "uid": string(u.GetUID()), "resourceVersion": u.GetResourceVersion()},
	}}
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	version, _, _ := unstructured.NestedString(u.Object, "spec", "version")
	_ = unstructured.SetNestedField(out.Object, group, "spec", "group")
	_ = unstructured.SetNestedField(out.Object, version, "spec", "version")
	if c, ok := availableCondition(u); ok {
		_ = unstructured.SetNestedSlice(out.Object, []interface{}{map[string]interface{}{
			"type": "Available", "status": c["status"], "reason": c["reason"], "message": c["message"]}}, "status", "conditions")
	}
	return out, nil
}

func availableCondition(u *unstructured.Unstructured) (map[string]interface{}, bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]interface{}); ok && m["type"] == "Available" {
			return m, true
		}
	}
	return nil, false
}

// MetricsAPIOf reads CustomMetricsGroup's state from the APIServices (any, stripped or not):
// available when one of its versions is; else why, from the newest version's condition.
func MetricsAPIOf(apiServices []*unstructured.Unstructured) MetricsAPI {
	var ours []*unstructured.Unstructured
	for _, u := range apiServices {
		if g, _, _ := unstructured.NestedString(u.Object, "spec", "group"); g == CustomMetricsGroup {
			ours = append(ours, u)
		}
	}
	if len(ours) == 0 {
		return MetricsAPI{Known: true, Why: "no APIService registers " + CustomMetricsGroup + " (no metrics adapter is installed)"}
	}
	// v1beta2 before v1beta1: the HPA controller reads the preferred version.
	sort.Slice(ours, func(i, j int) bool { return ours[i].GetName() > ours[j].GetName() })
	for _, u := range ours {
		if c, ok := availableCondition(u); ok && c["status"] == "True" {
			return MetricsAPI{Known: true, Available: true}
		}
	}
	why := "APIService " + ours[0].GetName() + " is not available"
	if c, ok := availableCondition(ours[0]); ok {
		reason, _ := c["reason"].(string)
		msg, _ := c["message"].(string)
		if reason != "" {
			why += " (" + reason + ")"
		}
		if msg != "" {
			why += ": " + msg
		}
	}
	return MetricsAPI{Known: true, Why: why}
}
