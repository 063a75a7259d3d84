// The walk's report: what `why` prints and `--output json` encodes, layer by layer.

package walk

import (
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

// Layers, top down; Report.Marked names one of them.
const (
	LayerISVC       = "isvc"
	LayerHPA        = "HPA"
	LayerDeployment = "Deployment"
	LayerReplicaSet = "ReplicaSet"
	LayerPods       = "Pods"
	// LayerRoute is the gateway's way to the pods: HTTPRoute, InferencePool, endpoint picker.
	LayerRoute = "Route"
	// LayerRollout is a canary rollout (status.rollout): its step, weight and verdict.
	LayerRollout = "Rollout"
)

// Report is the walk's outcome, what `why` prints and `--output json` encodes.
type Report struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Operator    Operator          `json:"operator"`
	ISVC        ISVCLayer         `json:"isvc"`
	HPA         *HPALayer         `json:"hpa,omitempty"`
	Deployment  *DeploymentLayer  `json:"deployment,omitempty"`
	ReplicaSets []ReplicaSetLayer `json:"replicaSets"`
	Pods        PodsLayer         `json:"pods"`
	// Route is the gateway layer, for a model with an HTTPRoute; nil without one.
	Route *RouteLayer `json:"route,omitempty"`
	// Marked is the first layer whose numbers do not add up; empty when the model serves as asked.
	Marked string `json:"marked,omitempty"`
	// Causes are the walk's findings, most blocking first.
	Causes []Finding `json:"causes,omitempty"`
	// Events are the marked layer's recent events, oldest first.
	Events  []Event  `json:"events,omitempty"`
	Crashed *Crashed `json:"crashed,omitempty"`
	Next    string   `json:"next,omitempty"`

	// LastStart is where the last pod start's time went (status.lastStart), and its SlowStart
	// when it was slow; nil before a start was told.
	LastStart *StartLayer `json:"lastStart,omitempty"`

	// Rollout is the last canary rollout (status.rollout) and its Rollout condition; nil without one.
	Rollout *RolloutLayer `json:"rollout,omitempty"`
}

// RolloutLayer is a canary rollout: status.rollout, and the Rollout condition's reason.
type RolloutLayer struct {
	crd.RolloutStatus
	Reason string `json:"reason,omitempty"`
}

// StartLayer is the isvc's last start.
type StartLayer struct {
	crd.StartRecord
	SlowStart string `json:"slowStart,omitempty"`
}

// ISVCLayer is the top layer's numbers.
type ISVCLayer struct {
	Model              string `json:"model"`
	Desired            int32  `json:"desired"`
	Ready              int32  `json:"ready"`
	GPUsPerReplica     int32  `json:"gpusPerReplica"`
	Phase              string `json:"phase"`
	Reason             string `json:"reason"`
	Message            string `json:"message,omitempty"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	// Queue is what Kueue did with the pods, from the isvc's Admitted condition (the
	// LocalQueue, the status and reason, the operator's message); nil for a model not queued.
	Queue *QueueLayer `json:"queue,omitempty"`
}

// QueueLayer is the isvc's Admitted condition, in the walk as the layer Kueue adds above the pods.
type QueueLayer struct {
	LocalQueue string `json:"localQueue,omitempty"`
	Status     string `json:"status"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
}

// HPALayer is the autoscaler's numbers: bounds, replicas and the queue metric against its target.
type HPALayer struct {
	Name    string `json:"name"`
	Min     int32  `json:"min"`
	Max     int32  `json:"max"`
	Current int32  `json:"current"`
	Desired int32  `json:"desired"`
	Metric  string `json:"metric,omitempty"`
	Value   string `json:"value,omitempty"` // empty when the HPA has no reading
	Target  string `json:"target,omitempty"`
	Problem string `json:"problem,omitempty"` // ScalingActive=False's reason and message
	Limited bool   `json:"limited,omitempty"` // ScalingLimited=True: at a bound
}

// DeploymentLayer is the Deployment's numbers, as `kubectl get deploy` shows them.
type DeploymentLayer struct {
	// Kind is "LeaderWorkerSet" for a multi-node model (replicas are its groups), else empty.
	Kind        string `json:"kind,omitempty"`
	Name        string `json:"name"`
	Desired     int32  `json:"desired"`
	Current     int32  `json:"current"`
	UpToDate    int32  `json:"upToDate"`
	Ready       int32  `json:"ready"`
	Available   int32  `json:"available"`
	Progressing string `json:"progressing,omitempty"` // the Progressing condition's reason
}

// ReplicaSetLayer is one ReplicaSet of the Deployment, new (highest revision) or old.
type ReplicaSetLayer struct {
	Name     string `json:"name"`
	Revision string `json:"revision"`
	New      bool   `json:"new"`
	Desired  int32  `json:"desired"`
	Current  int32  `json:"current"`
	Ready    int32  `json:"ready"`
	Failure  string `json:"failure,omitempty"` // ReplicaFailure's reason
}

// PodsLayer counts the pods by state, in the walk's order.
type PodsLayer struct {
	Total  int          `json:"total"`
	States []StateCount `json:"states"`
}

// StateCount is how many pods are in one state, and the first of them by name.
type StateCount struct {
	State string `json:"state"`
	Count int    `json:"count"`
	Pod   string `json:"pod"`
}

// Finding is one cause of the walk.
type Finding struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Event is one Event of the marked layer's objects.
type Event struct {
	Age     string `json:"age"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Object  string `json:"object"`
	Message string `json:"message"`
	Count   int32  `json:"count"`
}

// Crashed is the crashed container the causes name: its last state and its previous log's tail.
type Crashed struct {
	Pod       string   `json:"pod"`
	Container string   `json:"container"`
	Previous  bool     `json:"previous"`
	ExitCode  int32    `json:"exitCode"`
	Reason    string   `json:"reason"`
	Message   string   `json:"message,omitempty"`
	Restarts  int32    `json:"restarts"`
	Finished  string   `json:"finished"` // how long ago the run ended
	Log       []string `json:"log,omitempty"`
	// Decisive is the line of the log that says why the run died, as the operator quotes it.
	Decisive string `json:"decisive,omitempty"`
	LogError string `json:"logError,omitempty"`
	// run is what the log read is checked against: lines stamped outside it are another run's.
	run reconcile.CrashedRun
}

// RouteLayer is the way in from the gateway: gateway -> route -> pool -> picker -> pods, as
// their objects and the isvc's Routed condition say.
type RouteLayer struct {
	Route string `json:"route"`
	// Backend is where the route sends requests: "Service/NAME" or "InferencePool/NAME".
	Backend  string `json:"backend,omitempty"`
	Accepted bool   `json:"accepted"`
	// Pool is the model's InferencePool and picker; nil without the pool route.
	Pool *PoolLayer `json:"pool,omitempty"`
	// Status, Reason and Message are the isvc's Routed condition.
	Status  string `json:"status,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// PoolLayer is the InferencePool, its endpoint picker's Deployment and the pods it selects.
type PoolLayer struct {
	Name string `json:"name"`
	// Accepted is the Gateway's verdict on the pool ("" when it wrote none).
	Accepted        string `json:"accepted,omitempty"`
	Picker          string `json:"picker"`
	PickerDesired   int32  `json:"pickerDesired"`
	PickerAvailable int32  `json:"pickerAvailable"`
	PickerMissing   bool   `json:"pickerMissing,omitempty"`
}
