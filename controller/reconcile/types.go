// Reconcile's input and output: what the caches hold, the actions on children and the decision.

package reconcile

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/rollout"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// Observed is what the caches hold for one InferenceService. Every pointer is shared with an
// informer's cache and must not be modified.
type Observed struct {
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	HPA        *autoscalingv2.HorizontalPodAutoscaler
	ConfigMap  *corev1.ConfigMap // an earlier version's adapter list, deleted when ours
	PDB        *policyv1.PodDisruptionBudget
	// Optional children, read only when Features says their CRDs are installed.
	ServiceMonitor *unstructured.Unstructured
	HTTPRoute      *unstructured.Unstructured
	ScaledObject   *unstructured.Unstructured
	// NetworkPolicy and PickerNetworkPolicy (the picker's name), read when
	// Features.NetworkPolicies.
	NetworkPolicy       *unstructured.Unstructured
	PickerNetworkPolicy *unstructured.Unstructured
	// LeaderWorkerSet is a multi-node model's child in the Deployment's place, read when
	// Features.LeaderWorkerSets.
	LeaderWorkerSet *unstructured.Unstructured
	// The pool route's children (pool.go): the InferencePool, read when Features.InferencePools;
	// the picker's Deployment and Service always (the typed caches hold them); its
	// ServiceAccount and RoleBinding when Features.HTTPRoutes.
	InferencePool        *unstructured.Unstructured
	Picker               *appsv1.Deployment
	PickerService        *corev1.Service
	PickerServiceAccount *unstructured.Unstructured
	PickerRoleBinding    *unstructured.Unstructured
	// The pool's gateway policies (gatewaypolicy.go), read where their kinds are served.
	DestinationRule   *unstructured.Unstructured
	HealthCheckPolicy *unstructured.Unstructured
	// RouteNeighbours are the gateway routes of the other models whose paths overlap this
	// model's (the same path, an ancestor or one under it), from the caches' route index.
	RouteNeighbours []Route
	// GrantNeededElsewhere: another model of the namespace is routed through the activator,
	// so the namespace's ReferenceGrant stays when this one no longer needs it.
	GrantNeededElsewhere bool
	// ActivatorGrant is the ReferenceGrant in the activator's namespace for the model's
	// namespace (ActivatorGrantName), read when Features.ReferenceGrants.
	ActivatorGrant *unstructured.Unstructured
	ReplicaSets    []*appsv1.ReplicaSet
	Pods           []*corev1.Pod
	// Nodes are the cluster's nodes with GPU trouble (StripNode's view, NodeTroubled), by
	// name; nil when the operator does not watch nodes.
	Nodes map[string]*corev1.Node
	// MetricsAPI is whether HPAs can read custom metrics at all (the aggregator's APIServices);
	// not Known when the operator does not watch them.
	MetricsAPI kinds.MetricsAPI
	// PodEvents are the Events of the pods CreatingPods named, by pod UID, from the I/O layer.
	PodEvents map[types.UID][]PodEvent
	// GPUSurvey is the schedulable nodes' GPUs of the model's resource, free and in use, read
	// only when WantsGPUSurvey; nil when not read.
	GPUSurvey []NodeGPUs
	// PlacementSurvey is the nodes' taints and labels, read only when WantsPlacementSurvey;
	// nil when not read.
	PlacementSurvey []NodePlacement
	// LastWords are the decisive lines of the crashed runs LastWordsWanted named, by the run's
	// container ID (CrashedRun.RunID), from the I/O layer's pods/log reads.
	LastWords map[string]string

	// Starts are the starts of the runs StartsWanted named, by run ID, as StartOf tells them
	// (nil for a run whose log did not say); StoredLastStart is the status's last start.
	Starts          map[string]*crd.StartRecord
	StoredLastStart *crd.StartRecord
	// Workloads are the Kueue Workloads of the model's pods, by pod UID (WorkloadOf), read
	// when Features.KueueWorkloads, with positions read for the pending ones.
	Workloads map[types.UID]kinds.Workload
	// ClusterQueues are the ClusterQueues that admitted the model's pods, by name, read when
	// Features.KueueClusterQueues.
	ClusterQueues map[string]kinds.ClusterQueue
	// GroupFailures are a multi-node model's StatefulSets' refused pod creations (the latest
	// fresh FailedCreate Event's message, by StatefulSet name), read when WantsGroupFailures.
	GroupFailures map[string]string
	// Weights is a managed cache's claim, fill Job and fill log (cache.go), read by the I/O
	// layer when spec.cache.size is set.
	Weights Weights
	// A canary rollout's children (canary.go): the canary's Deployment and Service (CanaryName)
	// and its pods (InstanceLabel CanaryInstance); StoredRollout is status.rollout as stored.
	CanaryDeployment *appsv1.Deployment
	CanaryService    *corev1.Service
	CanaryPods       []*corev1.Pod
	// CanaryReplicaSets are the canary Deployment's, whose pods load the adapters too.
	CanaryReplicaSets []*appsv1.ReplicaSet
	StoredRollout     *crd.RolloutStatus
}

// Input is everything Reconcile depends on.
type Input struct {
	ISVC *crd.InferenceService
	// Ext are the v1beta1 fields (adapters, autoscaling, gateway), from crd.ExtensionsOf.
	Ext      crd.SpecExtensions
	Features Features
	Observed Observed
	Now      metav1.Time
	// Adapters is what each server-ready pod answered on /v1/models, from the controller's I/O layer;
	// nil when not observed (the model has no adapters, or no client is configured).
	Adapters []PodAdapters
	// RolloutWindow is a canary step's metrics since its first read, from the I/O layer; nil
	// while none is read.
	RolloutWindow *rollout.Window
	// RolloutWaiting is why RolloutWindow is nil when it could not be read (a Prometheus query
	// failed or found no series); "" otherwise.
	RolloutWaiting string
}

// Verb is what to do with a child.
type Verb string

// Verbs.
const (
	Create Verb = "create"
	Update Verb = "update"
	Delete Verb = "delete"
)

// Child is any of the objects the operator manages.
type Child interface {
	metav1.Object
	runtime.Object
}

// Action is one change to one child. For Update, Object is a copy of the live object with the
// owned fields set, carrying the resourceVersion read from the cache.
type Action struct {
	Verb   Verb
	Kind   string
	Object Child
	// Cached, on an Update of a typed child, is the cached object Object was derived from: the
	// cache holds only part of the live object, so the update is sent as a patch from Cached to
	// Object and what the cache dropped is left as it is. Unstructured children (whole in
	// their cache) are updated whole.
	Cached Child
	// Scale is the Deployment's, for re-merging after a conflict.
	Scale Scale
	// AfterDeployment marks an action on a child that acts on the Deployment, or the
	// LeaderWorkerSet in its place (see Reconcile): it is applied only once that create
	// succeeded, or found the child ours.
	AfterDeployment bool
}

// Output is Reconcile's decision.
type Output struct {
	Actions []Action
	// Conflicts name children that exist but are not controlled by this InferenceService.
	Conflicts []string
	// Predecessors name children of a deleted namesake, still to be garbage-collected.
	Predecessors []string
	// Causes are why the model is not serving yet; Status is decided from them.
	Causes []Cause
	Status crd.InferenceServiceStatus
	// StatusExt are v1beta1's status additions (endpoint, model name, route, loaded adapters).
	StatusExt crd.StatusExtensions
	// AdapterSteps are the runtime LoRA calls to make on ready pods: unloads of adapters the
	// spec no longer wants, loads of wanted ones a pod lacks. A load that failed is planned
	// again (Failed is reported, not a reason to stop): the I/O layer spaces the attempts.
	AdapterSteps []AdapterStep
	// AdapterGates are the adapters readiness gate conditions to write on pods' status, where
	// they change.
	AdapterGates []PodGate
	// Weights is the managed cache's plan (cache.go), applied beside Actions.
	Weights WeightsPlan
	// Recheck, when positive, is how long until Status changes with time alone (a started
	// pod's readiness window ends with no event to say so).
	Recheck time.Duration
	// RolloutChanged: status.rollout moved (a step passed, a rollback, a promotion): the status
	// is written in this pass, with its actions, so the decision is kept whatever follows.
	RolloutChanged bool
}

func (o *Output) add(v Verb, kind string, obj Child) {
	o.Actions = append(o.Actions, Action{Verb: v, Kind: kind, Object: obj})
}

// update sends upd, a copy of the cached live object with the owned fields set, as a patch
// from live: caches may hold only part of an object.
func (o *Output) update(kind string, upd, live Child) {
	o.Actions = append(o.Actions, Action{Verb: Update, Kind: kind, Object: upd, Cached: live})
}

// conflict records a child this InferenceService does not control. One still controlled by a
// deleted InferenceService of the same name is no conflict: the garbage collector removes it,
// and its deletion event reconciles this one again.
func (o *Output) conflict(isvc *crd.InferenceService, kind string, obj metav1.Object) {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.Kind == crd.Kind && ref.Name == isvc.Name && IsOurGroup(ref.APIVersion) {
		o.Predecessors = append(o.Predecessors, kind+" "+obj.GetNamespace()+"/"+obj.GetName()+
			" still belongs to a deleted InferenceService of the same name (uid "+string(ref.UID)+"); waiting for the garbage collector to remove it")
		return
	}
	o.Conflicts = append(o.Conflicts, ConflictMessage(kind, obj))
}

func ConflictMessage(kind string, obj metav1.Object) string {
	owner := "no controller"
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		owner = "controller " + ref.Kind + " " + ref.Name
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName() + " already exists and is not owned by this InferenceService (" + owner + "); delete or rename it"
}
