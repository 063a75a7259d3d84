package crd

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// placementCases are spec placement fields (YAML, merged into a valid spec) and the message
// refusing them ("" lets them through).
var placementCases = []struct{ fields, want string }{
	{`{tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}`, ""},
	{`{tolerations: [{key: pool, operator: Equal, value: gpu, effect: NoExecute, tolerationSeconds: 30}]}`, ""},
	{`{tolerations: [{operator: Exists}]}`, ""},
	{`{tolerations: [{key: nvidia.com/gpu, operator: Exists, value: "true", effect: NoSchedule}]}`, RuleTolerationExistsMsg},
	{`{tolerations: [{value: gpu, operator: Equal}]}`, RuleTolerationKeyMsg},
	{`{tolerations: [{key: pool, value: gpu, effect: NoSchedule, tolerationSeconds: 30}]}`, RuleTolerationSecsMsg},
	{`{podMetadata: {labels: {team: search, cost-center: "42"}, annotations: {sidecar.istio.io/inject: "false"}}}`, ""},
	{`{podMetadata: {labels: {ai.example.com/inferenceservice: other}}}`, RulePodLabelsReservedMsg},
	{`{podMetadata: {labels: {app.kubernetes.io/instance: other}}}`, RulePodLabelsReservedMsg},
	{`{podMetadata: {labels: {app.kubernetes.io/name: vllm}}}`, RulePodLabelsReservedMsg},
	{`{podMetadata: {labels: {ai.example.com/endpoint-picker: other}}}`, RulePodLabelsReservedMsg},
	{`{podMetadata: {labels: {leaderworkerset.sigs.k8s.io/name: other}}}`, RulePodLabelsReservedMsg},
	{`{podMetadata: {labels: {kueue.x-k8s.io/queue-name: free}}}`, RulePodLabelsReservedMsg},
	{`{podMetadata: {labels: {pod-template-hash: abc}}}`, RulePodLabelsReservedMsg},
	{`{podMetadata: {annotations: {ai.example.com/env: HF_TOKEN}}}`, RulePodAnnotationsOwnMsg},
	{`{podMetadata: {annotations: {cache.ai.example.com/started-since.x: "1"}}}`, RulePodAnnotationsOwnMsg},
	{`{nodeSelector: {pool: gpu}, serviceAccountName: model-reader, imagePullSecrets: [{name: regcred}], runtimeClassName: nvidia}`, ""},
	{`{topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {ai.example.com/inferenceservice: m}}}]}`, ""},
	{`{affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: gpu, operator: In, values: [l4]}]}]}}}}`, ""},
}

// TestPlacementCEL: the CRD's rules refuse what placementErrors refuses, with its messages,
// evaluated as the API server does.
func TestPlacementCEL(t *testing.T) {
	evalCEL := newCELSpec(t)
	for _, tc := range placementCases {
		j, err := yaml.YAMLToJSON([]byte(tc.fields))
		if err != nil {
			t.Fatal(err)
		}
		spec := map[string]any{}
		if err := utiljson.Unmarshal(j, &spec); err != nil {
			t.Fatal(err)
		}
		spec["baseModel"], spec["replicas"] = "m", int64(1)
		got := strings.Join(evalCEL(t, spec), "; ")
		var typed Placement
		if err := yaml.Unmarshal([]byte(tc.fields), &typed); err != nil {
			t.Fatal(err)
		}
		decoded := strings.Join(placementErrors(&typed), "; ")
		for what, msg := range map[string]string{"CEL": got, "placementErrors": decoded} {
			switch {
			case tc.want == "" && msg != "":
				t.Errorf("%s: %s refused: %s", tc.fields, what, msg)
			case tc.want != "" && !strings.Contains(msg, tc.want):
				t.Errorf("%s: %s: want %q, got %q", tc.fields, what, tc.want, msg)
			}
		}
	}
}

// TestSchemaEnumsRefuseWhatThePodWould: the schema's enums refuse an effect or operator the
// API server would refuse at pod creation.
func TestSchemaEnumsRefuseWhatThePodWould(t *testing.T) {
	props := DefinitionWithV1beta1(InClusterWebhook()).Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	tol := props["tolerations"].Items.Schema.Properties
	if len(tol["effect"].Enum) != 3 || len(tol["operator"].Enum) != 4 {
		t.Fatalf("toleration enums: effect %v operator %v", tol["effect"].Enum, tol["operator"].Enum)
	}
	for _, f := range []string{"nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "imagePullSecrets", "serviceAccountName", "runtimeClassName", "podMetadata"} {
		if props[f].Type == "" {
			t.Errorf("spec.%s missing from the schema", f)
		}
	}
	if p := props["affinity"].Properties["nodeAffinity"].Properties["requiredDuringSchedulingIgnoredDuringExecution"].Properties["nodeSelectorTerms"]; p.Type != "array" {
		t.Errorf("affinity's shape is not the PodSpec's: nodeSelectorTerms %+v", p)
	}
}

// TestConvertPlacementRoundTrip: every placement field travels through v1alpha1's annotation
// and comes back whole; the copy shares nothing with the input.
func TestConvertPlacementRoundTrip(t *testing.T) {
	in := beta()
	in.Spec.Placement = Placement{
		NodeSelector:     map[string]string{"pool": "gpu"},
		Tolerations:      []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Affinity:         &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"l4"}}}}}}}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}, ServiceAccountName: "reader", RuntimeClassName: ptrTo("nvidia"),
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}},
		PodMetadata:               &PodMetadata{Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"x/y": "z"}},
	}
	want := mustJSON(t, in)
	a, err := ConvertFromV1beta1(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.Annotations[AnnotationV1beta1Spec], `"tolerations"`) {
		t.Fatalf("annotation lacks the placement: %s", a.Annotations[AnnotationV1beta1Spec])
	}
	ext, _, err := ExtensionsOf(a)
	if err != nil || ext.ServiceAccountName != "reader" || ext.Tolerations[0].Key != "nvidia.com/gpu" {
		t.Fatalf("extensions %+v, %v", ext.Placement, err)
	}
	b, err := ConvertToV1beta1(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, b); got != want {
		t.Fatalf("v1beta1 -> v1alpha1 -> v1beta1:\n got %s\nwant %s", got, want)
	}
	c := in.Spec.Placement.DeepCopy()
	c.NodeSelector["pool"], c.Tolerations[0].Key, *c.RuntimeClassName, c.PodMetadata.Labels["team"] = "x", "x", "x", "x"
	c.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values[0] = "x"
	if mustJSON(t, in) != want {
		t.Fatal("writing through the copy changed the original")
	}
}
