package main

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/example/inferenceservice-operator/crd"
)

// kserveResource is KServe's InferenceService: the same kind and short name (isvc) as ours,
// group serving.kserve.io.
var kserveResource = schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"}

// listKinds are the lists the fake dynamic client serves: both InferenceServices, as a cluster
// with KServe installed beside the operator does.
var listKinds = map[schema.GroupVersionResource]string{
	crd.Resource:   "InferenceServiceList",
	kserveResource: "InferenceServiceList",
}

// ours is one of our InferenceServices, its status as the operator writes it.
func ours(ns, name, model string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": "InferenceService",
		"metadata": map[string]any{"namespace": ns, "name": name, "generation": int64(2)},
		"spec":     map[string]any{"model": model, "replicas": int64(1), "gpusPerReplica": int64(2)},
		"status":   map[string]any{"phase": "Ready", "readyReplicas": int64(1), "observedGeneration": int64(2)},
	}}
}

// kserve is one of KServe's, which the plugin must never read.
func kserve(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kserveResource.GroupVersion().String(), "kind": "InferenceService",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"predictor": map[string]any{"model": map[string]any{"modelFormat": map[string]any{"name": "sklearn"}}}},
	}}
}

// world is a fake cluster for the commands: its clients and what was asked of them.
type world struct {
	kube *kubefake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
}

func newWorld(objs ...runtime.Object) world {
	return world{kube: kubefake.NewClientset(), dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)}
}

// connect hands the world's clients to the commands, in -n's namespace (else "default"),
// as connectFlags would from a kubeconfig without one.
func (w world) connect(f *genericclioptions.ConfigFlags) (clients, error) {
	ns := "default"
	if f.Namespace != nil && *f.Namespace != "" {
		ns = *f.Namespace
	}
	return clients{kube: w.kube, dyn: w.dyn, namespace: ns}, nil
}
