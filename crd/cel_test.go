package crd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The API server's limits (k8s.io/apiserver/pkg/apis/cel), written out so go.mod keeps that
// module indirect.
const (
	perCallLimit         = 1_000_000
	runtimeCELCostBudget = 10_000_000
)

// celSpec evaluates the v1beta1 schema's CEL rules on an object with spec, as the API server
// does on create, and returns the messages of the rules that failed.
type celSpec func(t *testing.T, spec map[string]any) []string

func newCELSpec(t *testing.T) celSpec {
	t.Helper()
	v1 := DefinitionWithV1beta1(InClusterWebhook()).Spec.Versions[1].Schema.OpenAPIV3Schema
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, &internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := schema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	v := cel.NewValidator(s, true, perCallLimit)
	return func(t *testing.T, spec map[string]any) []string {
		t.Helper()
		obj := map[string]any{
			"apiVersion": GroupVersionV1beta1.String(), "kind": Kind,
			"metadata": map[string]any{"name": "m", "namespace": "ns"},
			"spec":     spec,
		}
		errs, _ := v.Validate(context.Background(), nil, s, obj, nil, runtimeCELCostBudget)
		var out []string
		for _, e := range errs {
			out = append(out, e.Detail)
		}
		return out
	}
}

// TestEngineArgsCEL: the CRD's CEL rules refuse and let through what Validate does
// (engineRefused, engineAllowed), with the same messages, evaluated as the API server does.
func TestEngineArgsCEL(t *testing.T) {
	evalCEL := newCELSpec(t)
	spec := func(t *testing.T, ext string) map[string]any {
		t.Helper()
		s := map[string]any{}
		if err := json.Unmarshal([]byte(ext), &s); err != nil {
			t.Fatal(err)
		}
		s["baseModel"], s["replicas"] = "m", int64(1)
		return s
	}
	for _, tc := range engineRefused {
		got := evalCEL(t, spec(t, tc.ext))
		if !strings.Contains(strings.Join(got, "; "), tc.want) {
			t.Errorf("%s: want %q, got %q", tc.ext, tc.want, got)
		}
	}
	for _, ok := range engineAllowed {
		if got := evalCEL(t, spec(t, ok)); len(got) > 0 {
			t.Errorf("%s: %q", ok, got)
		}
	}
}

// TestEngineArgsCELWithinRuntimeBudget: the longest list of the longest items, each scanned by
// every rule, stays within the API server's per-call and per-object CEL budgets.
func TestEngineArgsCELWithinRuntimeBudget(t *testing.T) {
	evalCEL := newCELSpec(t)
	args := make([]any, MaxEngineArgs)
	for i := range args {
		args[i] = "--" + strings.Repeat("a", maxString-2)
	}
	spec := map[string]any{"baseModel": "m", "replicas": int64(1), "engineArgs": args,
		"adapters": []any{map[string]any{"name": "a", "storageURI": "hf://o/a"}}}
	if got := evalCEL(t, spec); len(got) > 0 {
		t.Fatalf("refused: %q", got)
	}
}

// TestParallelismCEL: the CRD's CEL rules refuse and let through spec.parallelism and
// spec.multiNode's split as Validate does (parallelCases), evaluated as the API server does.
func TestParallelismCEL(t *testing.T) {
	evalCEL := newCELSpec(t)
	for _, tc := range parallelCases {
		s := map[string]any{}
		if err := utiljson.Unmarshal([]byte(tc.ext), &s); err != nil { // numbers as int64, as the API server decodes them
			t.Fatal(err)
		}
		s["baseModel"], s["replicas"], s["gpusPerReplica"] = "m", int64(1), int64(tc.gpus)
		got := evalCEL(t, s)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("gpus %d %s: %q", tc.gpus, tc.ext, got)
		case tc.want != "" && !strings.Contains(strings.Join(got, "; "), tc.want):
			t.Errorf("gpus %d %s: want %q, got %q", tc.gpus, tc.ext, tc.want, got)
		}
	}
}
