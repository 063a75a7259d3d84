// The drift/set machinery the child kinds share. Each kind's file has a pair: xDrifted compares
// only the fields the operator owns (never what the API server defaults or other controllers
// write back, or the operator would loop), and setX writes those fields onto a copy of the live
// object. A test checks that after setX, xDrifted is false. Here: the label helpers the pairs
// use, OwnedPatch (how an update is sent) and Remerge (an update retried after a conflict).

package reconcile

import (
	"encoding/json"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func mergeLabels(have, want map[string]string) map[string]string {
	if have == nil {
		have = make(map[string]string, len(want))
	}
	maps.Copy(have, want)
	return have
}

// OwnedPatch is the two-way strategic merge patch from base to obj. base's resourceVersion is
// left out of the comparison, so the patch always carries obj's as a precondition.
func OwnedPatch(base, obj Child) ([]byte, error) {
	b := base.DeepCopyObject().(Child)
	b.SetResourceVersion("")
	from, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(from, to, obj)
}

// SameController reports whether live has the same controller as the object we built.
func SameController(live, ours metav1.Object) bool {
	a, b := metav1.GetControllerOfNoCopy(live), metav1.GetControllerOfNoCopy(ours)
	return a != nil && b != nil && a.UID == b.UID
}

// Remerge re-applies the owned fields of the action's object (an updated copy) onto a freshly
// read live object, after a conflict.
func Remerge(live Child, a Action) (Child, bool) {
	desired := a.Object
	switch l := live.(type) {
	case *appsv1.Deployment:
		d := desired.(*appsv1.Deployment)
		if IsPicker(d) {
			if !pickerDrifted(l, d) {
				return nil, false
			}
			setPicker(l, d)
			return l, true
		}
		if IsCanary(d) {
			if !canaryDrifted(l, d) {
				return nil, false
			}
			setCanary(l, d)
			return l, true
		}
		if !deploymentDrifted(l, d, a.Scale) {
			return nil, false
		}
		setDeployment(l, d, a.Scale)
		return l, true
	case *corev1.ConfigMap:
		d := desired.(*corev1.ConfigMap)
		if !configMapDrifted(l, d) {
			return nil, false
		}
		setConfigMap(l, d)
		return l, true
	case *policyv1.PodDisruptionBudget:
		d := desired.(*policyv1.PodDisruptionBudget)
		if !pdbDrifted(l, d) {
			return nil, false
		}
		setPDB(l, d)
		return l, true
	case *unstructured.Unstructured:
		d := desired.(*unstructured.Unstructured)
		if k := d.GetKind(); k == KindPickerServiceAccess || k == KindPickerRoleBinding {
			if !identityDrifted(l, d) {
				return nil, false
			}
			setIdentity(l, d)
			return l, true
		}
		if d.GetKind() == KindLeaderWorkerSet {
			if !lwsDrifted(l, d, a.Scale) {
				return nil, false
			}
			setLWS(l, d, a.Scale)
			return l, true
		}
		drifted := unstructuredDrifted
		if d.GetKind() == KindInferencePool {
			drifted = poolDrifted
		}
		if !drifted(l, d) {
			return nil, false
		}
		setUnstructured(l, d)
		return l, true
	case *corev1.Service:
		d := desired.(*corev1.Service)
		if IsPicker(d) {
			if !pickerServiceDrifted(l, d) {
				return nil, false
			}
			setPickerService(l, d)
			return l, true
		}
		if !serviceDrifted(l, d) {
			return nil, false
		}
		setService(l, d)
		return l, true
	case *autoscalingv2.HorizontalPodAutoscaler:
		d := desired.(*autoscalingv2.HorizontalPodAutoscaler)
		if !hpaDrifted(l, d) {
			return nil, false
		}
		setHPA(l, d)
		return l, true
	}
	return nil, false
}
