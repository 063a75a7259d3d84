package podmetrics

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Owners finds the objects of a pod's owner chain by kind, namespace and name, from caches;
// nil when none is cached.
type Owners interface {
	Get(kind schema.GroupKind, namespace, name string) metav1.Object
}

var (
	podKind         = schema.GroupKind{Kind: "Pod"}
	replicaSetKind  = schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
	deploymentKind  = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	statefulSetKind = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	lwsKind         = schema.GroupKind{Group: "leaderworkerset.x-k8s.io", Kind: "LeaderWorkerSet"}
	isvcKind        = schema.GroupKind{Group: "ai.example.com", Kind: "InferenceService"}
)

// controllerSteps are the owner links the operator's children make: a Deployment's pods
// through its ReplicaSets; a LeaderWorkerSet's leaders through the leader StatefulSet and its
// workers through a StatefulSet their leader pod controls.
var controllerSteps = map[schema.GroupKind][]schema.GroupKind{
	podKind:         {replicaSetKind, statefulSetKind, lwsKind},
	replicaSetKind:  {deploymentKind},
	deploymentKind:  {isvcKind},
	statefulSetKind: {lwsKind, podKind},
	lwsKind:         {isvcKind},
}

// maxChain bounds the walk: a worker pod is five links from its InferenceService
// (pod, StatefulSet, leader pod, StatefulSet, LeaderWorkerSet).
const maxChain = 6

// ServedBy is the InferenceService whose children control the pod, following each object's
// controller reference through the caches, the UID checked at every link, and only when the
// pod's InstanceLabel names that same InferenceService. Labels alone are anyone's to set: a
// tenant's pods carrying them are not the operator's, and reading them would let them cost
// every model's reads.
func ServedBy(pod metav1.Object, owners Owners) (string, bool) {
	var obj metav1.Object = pod
	kind := podKind
	for range maxChain {
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil {
			return "", false
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return "", false
		}
		next := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
		if !allowed(kind, next) {
			return "", false
		}
		owner := owners.Get(next, pod.GetNamespace(), ref.Name)
		if owner == nil || owner.GetUID() != ref.UID {
			return "", false
		}
		if next == isvcKind {
			if name := owner.GetName(); name == pod.GetLabels()[InstanceLabel] {
				return name, true
			}
			return "", false
		}
		obj, kind = owner, next
	}
	return "", false
}

func allowed(from, to schema.GroupKind) bool {
	for _, k := range controllerSteps[from] {
		if k == to {
			return true
		}
	}
	return false
}
