package podmetrics

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Owners finds the objects of a pod's owner chain by kind, namespace and name, from caches.
type Owners interface {
	Get(kind schema.GroupKind, namespace, name string) metav1.Object
}

// ServedBy is the InferenceService whose children control the pod.
func ServedBy(pod metav1.Object, owners Owners) (string, bool) { return "", true }

var (
	podKind         = schema.GroupKind{Kind: "Pod"}
	replicaSetKind  = schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
	deploymentKind  = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	statefulSetKind = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	lwsKind         = schema.GroupKind{Group: "leaderworkerset.x-k8s.io", Kind: "LeaderWorkerSet"}
	isvcKind        = schema.GroupKind{Group: "ai.example.com", Kind: "InferenceService"}
)
