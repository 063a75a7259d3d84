package crd

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeepCopy: a copy is equal, and writing through every pointer, map and slice of the copy
// leaves the original (the informer's cached object) unchanged.
func TestDeepCopy(t *testing.T) {
	gpus := int32(2)
	in := &InferenceService{
		TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"l": "1"},
			Annotations: map[string]string{"a": "1"}, Finalizers: []string{"f"}},
		Spec: InferenceServiceSpec{Model: "m", Replicas: 2, GPUsPerReplica: &gpus, Resources: &Resources{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}},
		Status: InferenceServiceStatus{Phase: PhaseReady, Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue}}},
	}
	orig := in.DeepCopyObject().(*InferenceService)
	if !equality.Semantic.DeepEqual(in, orig) {
		t.Fatalf("copy differs:\n%+v\n%+v", in, orig)
	}
	out := in.DeepCopy()
	out.Labels["l"], out.Annotations["a"], out.Finalizers[0] = "x", "x", "x"
	*out.Spec.GPUsPerReplica = 9
	out.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
	out.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("9Gi")
	out.Spec.Resources.GPUResourceName = "x"
	out.Status.Conditions[0].Status = metav1.ConditionFalse
	if !equality.Semantic.DeepEqual(in, orig) {
		t.Fatalf("writing through the copy changed the original:\n%+v\n%+v", in, orig)
	}
	if (*InferenceService)(nil).DeepCopy() != nil {
		t.Fatal("nil copy")
	}
}
