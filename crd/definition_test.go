package crd

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite manifests/crd from crd.Definition()")

// ManifestPath is the generated CRD manifest, relative to this package.
var manifestPath = filepath.Join("..", "manifests", "crd", "inferenceservices.ai.example.com.yaml")

// defaultManifestPath is the default install's CRD: v1beta1 stored, the conversion webhook
// (manifests/components/v1beta1 patches manifests/crd's into it; manifests/overlays/v1alpha1
// keeps manifests/crd's).
var defaultManifestPath = filepath.Join("..", "manifests", "components", "v1beta1", "inferenceservices.ai.example.com.yaml")

func TestManifestMatchesDefinition(t *testing.T) {
	for path, def := range map[string]*apiextensionsv1.CustomResourceDefinition{
		manifestPath:        Definition(),
		defaultManifestPath: DefinitionWithV1beta1(InClusterWebhook()),
	} {
		want, err := manifestYAML(def)
		if err != nil {
			t.Fatal(err)
		}
		want = append([]byte("# Generated from crd.Definition() by `go test ./crd -run TestManifest -update`; do not edit.\n"), want...)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./crd -run TestManifest -update)", err)
		}
		if string(got) != string(want) {
			t.Fatalf("%s drifted from crd.Definition(); run go test ./crd -run TestManifest -update", path)
		}
	}
}

// jsonFields lists the JSON names of a struct's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...) // inline, as encoding/json flattens it
			continue
		}
		name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func schemaFields(props map[string]any) []string {
	var out []string
	for k := range props {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestSchemaMatchesGoTypes(t *testing.T) {
	t.Run("v1alpha1", func(t *testing.T) {
		schemaMatches(t, Definition().Spec.Versions[0].Schema.OpenAPIV3Schema, InferenceServiceSpec{}, InferenceServiceStatus{})
	})
	t.Run("v1beta1", func(t *testing.T) {
		v := DefinitionWithV1beta1(InClusterWebhook()).Spec.Versions
		if len(v) != 2 || v[1].Name != VersionV1beta1 || v[0].Storage || !v[1].Storage {
			t.Fatalf("versions %+v: want v1alpha1 and v1beta1 (storage)", v)
		}
		schemaMatches(t, v[1].Schema.OpenAPIV3Schema, InferenceServiceSpecV1beta1{}, InferenceServiceStatusV1beta1{})
	})
}

func schemaMatches(t *testing.T, s *apiextensionsv1.JSONSchemaProps, spec, status any) {
	for name, typ := range map[string]reflect.Type{
		"spec":   reflect.TypeOf(spec),
		"status": reflect.TypeOf(status),
	} {
		props := map[string]any{}
		for k := range s.Properties[name].Properties {
			props[k] = nil
		}
		if got, want := schemaFields(props), jsonFields(typ); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: schema fields %v, Go fields %v", name, got, want)
		}
		for k, p := range s.Properties[name].Properties {
			if p.Description == "" {
				t.Errorf("%s.%s has no description (kubectl explain would be empty)", name, k)
			}
		}
	}
	for _, r := range s.Properties["spec"].Required {
		if _, ok := s.Properties["spec"].Properties[r]; !ok {
			t.Errorf("required field %q is not in the schema", r)
		}
	}
}

// manifestYAML renders the definition without the server-owned status and empty metadata.
func manifestYAML(def *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	raw, err := yaml.Marshal(def)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	delete(m["metadata"].(map[string]any), "creationTimestamp")
	return yaml.Marshal(m)
}

// TestScaleDownDelaySchema: v1beta1's autoscaling.scaleDownDelaySeconds carries the CEL rule
// and message the API server refuses a bad value with, both on the bound the pure Validate uses.
func TestScaleDownDelaySchema(t *testing.T) {
	s := DefinitionWithV1beta1(InClusterWebhook()).Spec.Versions[1].Schema.OpenAPIV3Schema
	p, ok := s.Properties["spec"].Properties["autoscaling"].Properties["scaleDownDelaySeconds"]
	if !ok || p.Type != "integer" || p.Format != "int32" || len(p.XValidations) != 1 {
		t.Fatalf("spec.autoscaling.scaleDownDelaySeconds: %+v", p)
	}
	max := strconv.Itoa(MaxScaleDownDelaySeconds)
	if r := p.XValidations[0]; r.Rule != RuleScaleDownDelay || r.Message != RuleScaleDownDelayMessage ||
		!strings.HasSuffix(r.Rule, "<= "+max) || !strings.Contains(r.Message, "between 0 and "+max) {
		t.Fatalf("rule %+v, want the bound %s", r, max)
	}
}

// TestParallelismSchema: v1beta1's spec.parallelism has the Go type's fields, both required,
// each bounded as Validate bounds it.
func TestParallelismSchema(t *testing.T) {
	s := DefinitionWithV1beta1(InClusterWebhook()).Spec.Versions[1].Schema.OpenAPIV3Schema
	p, ok := s.Properties["spec"].Properties["parallelism"]
	if !ok || p.Type != "object" {
		t.Fatalf("spec.parallelism: %+v", p)
	}
	props := map[string]any{}
	for k := range p.Properties {
		props[k] = nil
	}
	want := jsonFields(reflect.TypeOf(Parallelism{}))
	if got := schemaFields(props); !reflect.DeepEqual(got, want) {
		t.Fatalf("schema fields %v, Go fields %v", got, want)
	}
	required := append([]string(nil), p.Required...)
	sort.Strings(required)
	if !reflect.DeepEqual(required, want) {
		t.Errorf("required %v, want both sizes", p.Required)
	}
	for name, f := range p.Properties {
		if f.Type != "integer" || f.Format != "int32" || f.Minimum == nil || *f.Minimum != 1 || f.Maximum == nil || *f.Maximum != MaxParallelSize || f.Description == "" {
			t.Errorf("spec.parallelism.%s: %+v, want an int32 from 1 to %d", name, f, MaxParallelSize)
		}
	}
}
