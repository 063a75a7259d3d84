// Package kinds is the vocabulary the informers and the reconcile share about the kinds the
// operator watches: the labels and annotations it writes and reads back, the GroupVersionResources
// it watches, what each cached object keeps (the informers' Strip transforms) and the readers
// of what is kept (WorkloadOf, ClusterQueueOf, NodeTroubled). A leaf: k8s API types and crd only.
package kinds

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/crd"
)

// The label and annotation vocabulary the operator writes on its children and reads back; the
// informers scope and index their caches by it.
// ManagedByLabel is set by the operator on every child and pod template, so the children
// informers watch only what the operator manages.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "inferenceservice-operator"
	// InstanceLabel names the InferenceService a pod or ReplicaSet belongs to (the children's
	// selector); ReplicaSets and Pods are indexed by it.
	InstanceLabel = "ai.example.com/inferenceservice"
)

// OwnedAnnotationPrefix marks the annotations the operator writes on its children (the
// replicas it last applied); the cached Deployments keep only these.
const OwnedAnnotationPrefix = crd.Group + "/"

// ContainerName is the model server's container, the only one of a model pod's containers the operator owns.
const ContainerName = "vllm"

// PickerLabel names the InferenceService whose endpoint picker an object is (its Deployment,
// Service and pods), and PickerContainerName is the picker's container, the one the cached
// picker Deployments keep.
const (
	PickerLabel         = "ai.example.com/endpoint-picker"
	PickerContainerName = "epp"
)

// RevisionAnnotation is the Deployment controller's revision of a ReplicaSet: the highest is
// the Deployment's current pod template, even after a rollback.
const RevisionAnnotation = "deployment.kubernetes.io/revision"

// StartedSinceAnnotation (a prefix; the container's name follows) is set on cached pods only,
// never on the API server: when the operator saw the container become started. The kubelet
// publishes no such time, and a readiness probe only has to pass a probe window after it.
const StartedSinceAnnotation = "cache.ai.example.com/started-since."

// LWSNameLabel, LWSGroupLabel and LWSWorkerLabel are LeaderWorkerSet's pod labels: the set, the
// group (one replica) and the pod's index in it, 0 the leader. The cached pods keep them.
const (
	LWSNameLabel   = "leaderworkerset.sigs.k8s.io/name"
	LWSGroupLabel  = "leaderworkerset.sigs.k8s.io/group-index"
	LWSWorkerLabel = "leaderworkerset.sigs.k8s.io/worker-index"
)

// AdaptersGate is the pod condition the adapters readiness gate waits for; the cached pods of
// a model with the gate keep it.
const AdaptersGate corev1.PodConditionType = "ai.example.com/adapters-loaded"

// Scale to zero (issue 35): the activator, which holds requests for a model at zero, writes
// these on the model's Service and the operator reads them back from its cached Services.
// LastRequestAnnotation is when the activator last saw a request for the model (RFC 3339,
// UTC): written at once for a request that finds no ready pod (the wake), and at most once per
// its refresh period while requests flow, so the operator can tell idle from busy.
// ColdStartAnnotation is the last cold start as the activator measured it, JSON ColdStart.
const (
	LastRequestAnnotation = crd.Group + "/last-request"
	ColdStartAnnotation   = crd.Group + "/last-cold-start"
)

// ColdStart is the value of ColdStartAnnotation: when the first request held for a model at
// zero arrived, and how long until the first byte of its answer.
type ColdStart struct {
	Arrived          string  `json:"arrived"`
	FirstByteSeconds float64 `json:"firstByteSeconds"`
}

// ActivatorModelHeader carries a request's model, "namespace/name", from the HTTPRoute's
// RequestHeaderModifier to the activator (the route rewrites the path prefix away).
const ActivatorModelHeader = "X-Activator-Model"
