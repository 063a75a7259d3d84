package crd

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite manifests/crd from crd.Definition()")

// ManifestPath is the generated CRD manifest, relative to this package.
var manifestPath = filepath.Join("..", "manifests", "crd", "inferenceservices.ai.example.com.yaml")

func TestManifestMatchesDefinition(t *testing.T) {
	want, err := manifestYAML()
	if err != nil {
		t.Fatal(err)
	}
	want = append([]byte("# Generated from crd.Definition() by `go test ./crd -run TestManifest -update`; do not edit.\n"), want...)
	if *update {
		if err := os.WriteFile(manifestPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatalf("%v (run go test ./crd -run TestManifest -update)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s drifted from crd.Definition(); run go test ./crd -run TestManifest -update", manifestPath)
	}
}

// jsonFields lists the JSON names of a struct's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
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
	s := Definition().Spec.Versions[0].Schema.OpenAPIV3Schema
	for name, typ := range map[string]reflect.Type{
		"spec":   reflect.TypeOf(InferenceServiceSpec{}),
		"status": reflect.TypeOf(InferenceServiceStatus{}),
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
func manifestYAML() ([]byte, error) {
	raw, err := yaml.Marshal(Definition())
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
