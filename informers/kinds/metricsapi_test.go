package kinds

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func apiService(name, group, status, reason, message string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]interface{}{"name": name, "managedFields": []interface{}{map[string]interface{}{"manager": "x"}}},
		"spec":     map[string]interface{}{"group": group, "version": strings.SplitN(name, ".", 2)[0], "caBundle": "Zm9v"},
	}}
	if status != "" {
		_ = unstructured.SetNestedSlice(u.Object, []interface{}{map[string]interface{}{
			"type": "Available", "status": status, "reason": reason, "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}}, "status", "conditions")
	}
	return u
}

func TestMetricsAPIOf(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        []*unstructured.Unstructured
		available bool
		why       string
	}{
		{"none registered", []*unstructured.Unstructured{apiService("v1.apps", "apps", "True", "Local", "")}, false, "no APIService registers custom.metrics.k8s.io"},
		{"preferred available", []*unstructured.Unstructured{apiService("v1beta2.custom.metrics.k8s.io", CustomMetricsGroup, "True", "Passed", "")}, true, ""},
		{"older version available", []*unstructured.Unstructured{
			apiService("v1beta1.custom.metrics.k8s.io", CustomMetricsGroup, "True", "Passed", ""),
			apiService("v1beta2.custom.metrics.k8s.io", CustomMetricsGroup, "False", "MissingEndpoints", "no endpoints"),
		}, true, ""},
		{"down: the newest version says why", []*unstructured.Unstructured{
			apiService("v1beta1.custom.metrics.k8s.io", CustomMetricsGroup, "False", "FailedDiscoveryCheck", "older"),
			apiService("v1beta2.custom.metrics.k8s.io", CustomMetricsGroup, "False", "MissingEndpoints", "endpoints for service/x in \"y\" have no addresses"),
		}, false, `APIService v1beta2.custom.metrics.k8s.io is not available (MissingEndpoints): endpoints for service/x in "y" have no addresses`},
		{"no condition yet", []*unstructured.Unstructured{apiService("v1beta2.custom.metrics.k8s.io", CustomMetricsGroup, "", "", "")}, false, "APIService v1beta2.custom.metrics.k8s.io is not available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Stripped or not, the same answer.
			for _, strip := range []bool{false, true} {
				in := tc.in
				if strip {
					in = nil
					for _, u := range tc.in {
						s, err := StripAPIService(u)
						if err != nil {
							t.Fatal(err)
						}
						in = append(in, s.(*unstructured.Unstructured))
					}
				}
				got := MetricsAPIOf(in)
				if !got.Known || got.Available != tc.available || !strings.HasPrefix(got.Why, tc.why) || (tc.why == "") != (got.Why == "") {
					t.Errorf("strip %v: got %+v, want available %v why %q", strip, got, tc.available, tc.why)
				}
			}
		})
	}
}

func TestStripAPIServiceKeepsOnlyWhatIsRead(t *testing.T) {
	s, err := StripAPIService(apiService("v1beta2.custom.metrics.k8s.io", CustomMetricsGroup, "False", "MissingEndpoints", "m"))
	if err != nil {
		t.Fatal(err)
	}
	u := s.(*unstructured.Unstructured)
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "caBundle"); found {
		t.Error("caBundle kept")
	}
	if len(u.GetManagedFields()) != 0 {
		t.Error("managedFields kept")
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	if len(conds) != 1 || conds[0].(map[string]interface{})["lastTransitionTime"] != nil {
		t.Errorf("conditions %v: want Available without its time", conds)
	}
}
