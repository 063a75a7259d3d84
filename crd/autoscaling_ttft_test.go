package crd

import (
	"strings"
	"testing"
)

// autoscalingTTFTCases are spec.autoscaling's metric ttft, its objective and its window,
// refused (want: the message) or allowed (want empty), by the CRD's CEL rules and by Validate
// alike.
var autoscalingTTFTCases = []struct{ autoscaling, want string }{
	{`{"minReplicas":1,"maxReplicas":2,"metric":"ttft"}`, ""},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"ttft","targetTTFTMilliseconds":500}`, ""},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"ttft","targetTTFTMilliseconds":10,"ttftWindowSeconds":15}`, ""},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"ttft","targetTTFTMilliseconds":60000,"ttftWindowSeconds":600}`, ""},
	{`{"minReplicas":0,"maxReplicas":2,"metric":"ttft","ttftWindowSeconds":120,"scaleDownDelaySeconds":30}`, ""},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"TTFT"}`, RuleAutoscalingMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"targetTTFTMilliseconds":500}`, RuleTTFTTargetMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"queue","targetTTFTMilliseconds":500}`, RuleTTFTTargetMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"kvCache","targetTTFTMilliseconds":500}`, RuleTTFTTargetMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"ttftWindowSeconds":60}`, RuleTTFTWindowMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"kvCache","ttftWindowSeconds":60}`, RuleTTFTWindowMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"ttft","targetQueueLength":3}`, RuleQueueTargetMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"ttft","targetKVCacheUsagePercent":70}`, RuleKVTargetMetricMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"ttft","targetTTFTMilliseconds":9}`, RuleTTFTTargetMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"ttft","targetTTFTMilliseconds":60001}`, RuleTTFTTargetMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"ttft","ttftWindowSeconds":14}`, RuleTTFTWindowMsg},
	{`{"minReplicas":1,"maxReplicas":2,"metric":"ttft","ttftWindowSeconds":601}`, RuleTTFTWindowMsg},
}

// TestAutoscalingTTFTCEL: the schema's rules on metric ttft and its fields, as the API server
// evaluates them.
func TestAutoscalingTTFTCEL(t *testing.T) {
	saved := autoscalingMetricCases
	defer func() { autoscalingMetricCases = saved }()
	autoscalingMetricCases = autoscalingTTFTCases
	TestAutoscalingMetricCEL(t)
}

// TestAutoscalingTTFTDecoder: Validate refuses the same in the same words.
func TestAutoscalingTTFTDecoder(t *testing.T) {
	saved := autoscalingMetricCases
	defer func() { autoscalingMetricCases = saved }()
	autoscalingMetricCases = autoscalingTTFTCases
	TestAutoscalingMetricDecoder(t)
}

// TestAutoscalingTTFTDefaults: the objective and window default when unset; both survive
// the v1beta1 annotation's round trip and a deep copy.
func TestAutoscalingTTFTDefaults(t *testing.T) {
	if ms, w := (&Autoscaling{Metric: AutoscalingMetricTTFT}).TTFTTarget(); ms != DefaultTargetTTFTMilliseconds || w != DefaultTTFTWindowSeconds {
		t.Fatalf("defaults %d ms over %d s", ms, w)
	}
	i := &InferenceService{Spec: InferenceServiceSpec{Model: "m", Replicas: 5}}
	i.Name, i.Annotations = "x", map[string]string{AnnotationV1beta1Spec: `{"autoscaling":{"minReplicas":1,"maxReplicas":3,"metric":"ttft","targetTTFTMilliseconds":250,"ttftWindowSeconds":30}}`}
	ext, _, err := ExtensionsOf(i.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if ms, w := ext.Autoscaling.TTFTTarget(); ext.Autoscaling.AutoscalingMetric() != AutoscalingMetricTTFT || ms != 250 || w != 30 {
		t.Fatalf("decoded %+v", ext.Autoscaling)
	}
	c := cloneAutoscaling(ext.Autoscaling)
	*c.TargetTTFTMilliseconds, *c.TTFTWindowSeconds = 1, 1
	if ms, w := ext.Autoscaling.TTFTTarget(); ms != 250 || w != 30 {
		t.Fatal("cloneAutoscaling shares the TTFT fields")
	}
	if !strings.Contains(RuleAutoscalingMetricMsg, "ttft") {
		t.Fatal("the metric's message does not name ttft")
	}
}

// TestConvertTTFTObjective: metric ttft, its objective and its window travel in v1alpha1's
// annotation and come back, whether set or left to their defaults.
func TestConvertTTFTObjective(t *testing.T) {
	for _, a := range []*Autoscaling{
		{MinReplicas: 1, MaxReplicas: 4, Metric: AutoscalingMetricTTFT},
		{MinReplicas: 1, MaxReplicas: 4, Metric: AutoscalingMetricTTFT, TargetTTFTMilliseconds: ptrTo[int32](250), TTFTWindowSeconds: ptrTo[int32](30), ScaleDownDelaySeconds: ptrTo[int32](60)},
	} {
		in := beta()
		in.Spec.Autoscaling = a
		alpha, err := ConvertFromV1beta1(in)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ConvertToV1beta1(alpha)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := mustJSON(t, b.Spec.Autoscaling), mustJSON(t, a); got != want {
			t.Fatalf("round trip: %s, want %s (annotation %s)", got, want, alpha.Annotations[AnnotationV1beta1Spec])
		}
	}
}
