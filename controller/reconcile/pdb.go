// The PodDisruptionBudget: desired, drift and set.

package reconcile

import (
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// desiredPDB keeps voluntary disruptions (drains, upgrades) to one pod at a time, only when
// the model keeps at least two pods: with one, a budget would block every drain or protect
// nothing.
func desiredPDB(isvc *crd.InferenceService, sc Scale, b shared) *policyv1.PodDisruptionBudget {
	if sc.Min < 2 || isvc.Spec.Replicas == 0 {
		return nil
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: b.meta,
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: b.selector},
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
	}
}

func pdbDrifted(live, want *policyv1.PodDisruptionBudget) bool {
	return !hasLabels(live.Labels, want.Labels) || live.Spec.MinAvailable != nil ||
		!equality.Semantic.DeepEqual(live.Spec.Selector, want.Spec.Selector) ||
		live.Spec.MaxUnavailable == nil || *live.Spec.MaxUnavailable != *want.Spec.MaxUnavailable
}

func setPDB(out, want *policyv1.PodDisruptionBudget) {
	out.Labels = mergeLabels(out.Labels, want.Labels)
	out.Spec.Selector = want.Spec.Selector.DeepCopy()
	out.Spec.MinAvailable = nil
	out.Spec.MaxUnavailable = ptr.To(*want.Spec.MaxUnavailable)
}
