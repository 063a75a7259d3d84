package crd

import (
	"encoding/json"
	"strings"
	"testing"
)

// autoscalingMetricCases are spec.autoscaling's metric and targets, refused (want: the message)
// or allowed (want empty), by the CRD's CEL rules and by Validate alike.
var autoscalingMetricCases = []struct{ autoscaling, want string }{
	{`{"minReplicas":1,"maxReplicas":2}`, ""},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"queue"}`, ""},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"queue","targetQueueLength":4}`, ""},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"kvCache"}`, ""},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"kvCache","targetKVCacheUsagePercent":1}`, ""},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"kvCache","targetKVCacheUsagePercent":90}`, ""},
	{`{"minReplicas":0,"maxReplicas":2,"metric":"kvCache","targetKVCacheUsagePercent":60}`, ""},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"latency"}`, RuleAutoscalingMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"KVCache"}`, RuleAutoscalingMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"kvCache","targetQueueLength":3}`, RuleQueueTargetMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"targetKVCacheUsagePercent":70}`, RuleKVTargetMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"queue","targetKVCacheUsagePercent":70}`, RuleKVTargetMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"kvCache","targetKVCacheUsagePercent":0}`, RuleKVTargetMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"kvCache","targetKVCacheUsagePercent":91}`, RuleKVTargetMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"kvCache","targetKVCacheUsagePercent":100}`, RuleKVTargetMsg},
}

// TestAutoscalingMetricCEL: the schema's rules on spec.autoscaling.metric and its targets, as
// the API server evaluates them.
func TestAutoscalingMetricCEL(t *testing.T) {
	evalCEL := newCELSpec(t)
	for _, tc := range autoscalingMetricCases {
		a := map[string]any{}
		if err := json.Unmarshal([]byte(tc.autoscaling), &a); err != nil {
			t.Fatal(err)
		}
		for k, v := range a { // JSON numbers as the API server's decoder gives them
			if f, ok := v.(float64); ok {
				a[k] = int64(f)
			}
		}
		got := strings.Join(evalCEL(t, map[string]any{"baseModel": "m", "autoscaling": a}), "; ")
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: refused: %s", tc.autoscaling, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: want %q, got %q", tc.autoscaling, tc.want, got)
		}
	}
}

// TestAutoscalingMetricDecoder: Validate refuses the same in the same words.
func TestAutoscalingMetricDecoder(t *testing.T) {
	for _, tc := range autoscalingMetricCases {
		i := &InferenceService{Spec: InferenceServiceSpec{Model: "m", Replicas: 5}}
		i.Name, i.Annotations = "x", map[string]string{AnnotationV1beta1Spec: `{"autoscaling":` + tc.autoscaling + `}`}
		err := Validate(i)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.autoscaling, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: want %q, got %v", tc.autoscaling, tc.want, err)
		}
	}
}

// TestAutoscalingMetricDefault: unset, the metric is the queue; the fields survive a round
// trip through the v1beta1 annotation and a deep copy.
func TestAutoscalingMetricDefault(t *testing.T) {
	if m := (&Autoscaling{}).AutoscalingMetric(); m != AutoscalingMetricQueue {
		t.Fatalf("default metric %q", m)
	}
	i := &InferenceService{Spec: InferenceServiceSpec{Model: "m", Replicas: 5}}
	i.Name, i.Annotations = "x", map[string]string{AnnotationV1beta1Spec: `{"autoscaling":{"minReplicas":1,"maxReplicas":3,"metric":"kvCache","targetKVCacheUsagePercent":60}}`}
	ext, _, err := ExtensionsOf(i.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if a := ext.Autoscaling; a == nil || a.AutoscalingMetric() != AutoscalingMetricKVCache || a.TargetKVCacheUsagePercent == nil || *a.TargetKVCacheUsagePercent != 60 {
		t.Fatalf("decoded %+v", ext.Autoscaling)
	}
	c := cloneAutoscaling(ext.Autoscaling)
	*c.TargetKVCacheUsagePercent = 10
	if *ext.Autoscaling.TargetKVCacheUsagePercent != 60 {
		t.Fatal("cloneAutoscaling shares targetKVCacheUsagePercent")
	}
}
