package crd

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzFromUnstructured: whatever JSON the cache holds (an object stored before a rule existed,
// a field of the wrong type), decoding and validating return an error, never panic.
//
//	go test ./crd -run XXX -fuzz FuzzFromUnstructured -fuzztime 60s
func FuzzFromUnstructured(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"ai.example.com/v1alpha1","kind":"InferenceService","metadata":{"name":"q"},"spec":{"model":"m","replicas":3}}`))
	f.Add([]byte(`{"spec":{"model":7,"replicas":"x","gpusPerReplica":[1],"resources":{"requests":{"cpu":"abc"}}}}`))
	f.Add([]byte(`{"spec":{"model":"m","replicas":1e40},"status":{"conditions":[{"type":1}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return
		}
		isvc, err := FromUnstructured(&unstructured.Unstructured{Object: m})
		if err != nil {
			return
		}
		_ = Validate(isvc)
		_ = isvc.Spec.GPUs()
		_ = isvc.Spec.ImageOrDefault()
		_ = isvc.Spec.GPUResourceName()
	})
}
