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
	f.Add([]byte(`{"apiVersion":"ai.example.com/v1beta1","kind":"InferenceService","metadata":{"name":"b"},"spec":{"baseModel":"m","adapters":[{"name":"a","storageURI":"hf://x"},{"name":"a"}],"autoscaling":{"minReplicas":5,"maxReplicas":2}}}`))
	f.Add([]byte(`{"apiVersion":"ai.example.com/v1alpha1","metadata":{"name":"c","annotations":{"ai.example.com/v1beta1-spec":"{\"adapters\":7}"}},"spec":{"model":"m","replicas":1}}`))
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
		_, _, _ = ExtensionsOf(isvc)
		_ = isvc.Spec.GPUs()
		_ = isvc.Spec.ImageFor(EngineOf(isvc))
		_ = isvc.Spec.GPUResourceName()
	})
}
