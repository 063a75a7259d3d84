package crd

import (
	"encoding/json"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// rolloutCases are specs (JSON, on top of a one-replica model with a gateway route) with the
// message the API server and Validate give, "" for none.
var rolloutCases = []struct{ name, spec, want string }{
	{"rolling update by default", `{"rollout": {}}`, ""},
	{"canary", `{"rollout": {"strategy": "Canary", "steps": [{"weight": 10, "durationSeconds": 60}, {"weight": 50, "durationSeconds": 60}]}}`, ""},
	{"canary without steps", `{"rollout": {"strategy": "Canary"}}`, RuleRolloutStepsMsg},
	{"weights not increasing", `{"rollout": {"strategy": "Canary", "steps": [{"weight": 50, "durationSeconds": 60}, {"weight": 50, "durationSeconds": 60}]}}`, RuleRolloutIncreasingMsg},
	{"weights decreasing", `{"rollout": {"strategy": "Canary", "steps": [{"weight": 10, "durationSeconds": 60}, {"weight": 30, "durationSeconds": 60}, {"weight": 20, "durationSeconds": 60}]}}`, RuleRolloutIncreasingMsg},
	{"canary without gateway", `{"gateway": null, "rollout": {"strategy": "Canary", "steps": [{"weight": 10, "durationSeconds": 60}]}}`, RuleRolloutNeedsGatewayMsg},
	{"canary with multiNode", `{"gpusPerReplica": 2, "multiNode": {"nodes": 2}, "rollout": {"strategy": "Canary", "steps": [{"weight": 10, "durationSeconds": 60}]}}`, RuleRolloutNotMultiNodeMsg},
	{"canary with replicas 0", `{"replicas": 0, "rollout": {"strategy": "Canary", "steps": [{"weight": 10, "durationSeconds": 60}]}}`, RuleRolloutNotScaleToZeroMsg},
	{"canary with minReplicas 0", `{"replicas": null, "autoscaling": {"minReplicas": 0, "maxReplicas": 2}, "rollout": {"strategy": "Canary", "steps": [{"weight": 10, "durationSeconds": 60}]}}`, RuleRolloutNotScaleToZeroMsg},
	{"canary with autoscaling from 1", `{"replicas": null, "autoscaling": {"minReplicas": 1, "maxReplicas": 2}, "rollout": {"strategy": "Canary", "steps": [{"weight": 10, "durationSeconds": 60}]}}`, ""},
	{"rolling update with scale to zero", `{"replicas": 0, "rollout": {"strategy": "RollingUpdate"}}`, ""},
}

func rolloutSpec(t *testing.T, patch string) map[string]any {
	t.Helper()
	s := map[string]any{"baseModel": "m", "replicas": int64(1), "gateway": map[string]any{}}
	var p map[string]any
	if err := utiljson.Unmarshal([]byte(patch), &p); err != nil {
		t.Fatal(err)
	}
	for k, v := range p {
		if v == nil {
			delete(s, k)
			continue
		}
		s[k] = v
	}
	return s
}

// TestRolloutCEL: the API server refuses what a canary cannot do, in the rule's words.
func TestRolloutCEL(t *testing.T) {
	evalCEL := newCELSpec(t)
	for _, tc := range rolloutCases {
		got := strings.Join(evalCEL(t, rolloutSpec(t, tc.spec)), "; ")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: want %q, got %q", tc.name, tc.want, got)
		}
	}
}

// TestRolloutValidate: Validate refuses the same, with the same messages, on the v1alpha1 view.
func TestRolloutValidate(t *testing.T) {
	for _, tc := range rolloutCases {
		b, _ := json.Marshal(map[string]any{"apiVersion": GroupVersionV1beta1.String(), "kind": Kind,
			"metadata": map[string]any{"name": "m", "namespace": "ns"}, "spec": rolloutSpec(t, tc.spec)})
		var hub InferenceServiceV1beta1
		if err := json.Unmarshal(b, &hub); err != nil {
			t.Fatal(err)
		}
		isvc, err := ConvertFromV1beta1(&hub)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := Validate(isvc); err != nil {
			got = err.Error()
		}
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: want %q, got %q", tc.name, tc.want, got)
		}
	}
}

// TestRolloutRoundTrip: spec.rollout and status.rollout survive v1beta1 -> v1alpha1 -> v1beta1.
func TestRolloutRoundTrip(t *testing.T) {
	in := &InferenceServiceV1beta1{Spec: InferenceServiceSpecV1beta1{BaseModel: "m", Engine: EngineVLLM,
		Rollout: &Rollout{Strategy: RolloutCanary, Steps: []RolloutStep{{Weight: 10, DurationSeconds: 60}}, CanaryReplicas: ptrTo[int32](2),
			Analysis: &RolloutAnalysis{MinRequests: ptrTo[int32](5)}}},
		Status: InferenceServiceStatusV1beta1{Rollout: &RolloutStatus{Phase: RolloutProgressing, Step: 1, Steps: 1, Weight: 10, CanaryRevision: "abc"}}}
	in.Spec.Replicas = ptrTo[int32](1)
	alpha, err := ConvertFromV1beta1(in)
	if err != nil {
		t.Fatal(err)
	}
	ext, st, err := ExtensionsOf(alpha)
	if err != nil || !ext.Rollout.IsCanary() || st.Rollout == nil || st.Rollout.Weight != 10 {
		t.Fatalf("extensions %+v %+v %v", ext.Rollout, st.Rollout, err)
	}
	back, err := ConvertToV1beta1(alpha)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(in.Spec.Rollout)
	b, _ := json.Marshal(back.Spec.Rollout)
	if string(a) != string(b) || back.Status.Rollout == nil || *back.Status.Rollout != *in.Status.Rollout {
		t.Errorf("round trip: %s -> %s, status %+v", a, b, back.Status.Rollout)
	}
}
