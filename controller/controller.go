// Package controller is the I/O around the decision, steps 2 and 4 of the pipeline (informers
// -> queue -> controller sync -> reconcile -> controller apply): event handlers map informer
// events to keys, sync reads the caches and the evidence and calls reconcile.Reconcile, apply
// writes the actions with the one conflict-retry path, the status-write policy decides, holds
// and writes status, and the finalizer deregisters the gateway route. Subpackages: reconcile
// (the pure decision), evidence (what the diagnosis reads beyond the caches, remembered
// between syncs), modelserver (the model server's LoRA adapter API), process (the binaries'
// plumbing: clients with the request budget and the write fence's wiring, leader election and
// the fence, memlimit for the heap's soft limit, endpoints for the operator's and the
// activator's /metrics and probes, servingcert for the webhook's and the metrics adapter's
// certificates), walk (the kubectl-isvc plugin's troubleshooting walk).
package controller

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/evidence"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/metrics"
	"github.com/example/inferenceservice-operator/queue"
)

// FieldManager names the operator in managedFields and audit logs.
const FieldManager = "inferenceservice-operator"

// Finalizer holds an InferenceService until its gateway route is deregistered.
const Finalizer = "ai.example.com/gateway-route"

// Caches is what the controller reads; informers.Set implements it. Returned objects belong
// to the caches and must not be modified.
type Caches interface {
	// InferenceService is a *crd.InferenceService, or the *unstructured.Unstructured that
	// did not decode.
	InferenceService(namespace, name string) (runtime.Object, bool, error)
	// InferenceServicesByIndex are the decoded models under value in one of
	// InferenceServiceIndexers' indexes.
	InferenceServicesByIndex(index, value string) ([]*crd.InferenceService, error)
	Deployment(namespace, name string) (*appsv1.Deployment, bool, error)
	Service(namespace, name string) (*corev1.Service, bool, error)
	HPA(namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, bool, error)
	ConfigMap(namespace, name string) (*corev1.ConfigMap, bool, error)
	PDB(namespace, name string) (*policyv1.PodDisruptionBudget, bool, error)
	// Optional reads an optional child (ServiceMonitorGVR, HTTPRouteGVR); absent when its
	// informer does not run.
	Optional(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, bool, error)
	// ReplicaSets and Pods of one InferenceService, by its InstanceLabel.
	ReplicaSets(namespace, instance string) ([]*appsv1.ReplicaSet, error)
	Pods(namespace, instance string) ([]*corev1.Pod, error)
	// Pod is one cached pod of a model, by name.
	Pod(namespace, name string) (*corev1.Pod, bool, error)
	// Workloads are the Kueue Workloads of pods, by pod UID; nil when they are not watched.
	Workloads(namespace string, pods []types.UID) map[types.UID]kinds.Workload
	// ClusterQueue is a Kueue ClusterQueue's borrowing, by name; absent when not watched.
	ClusterQueue(name string) (kinds.ClusterQueue, bool)
	// AdmittedBy are the cached pods' Workloads a ClusterQueue admitted.
	AdmittedBy(clusterQueue string) []metav1.Object
	// TroubledNodes are the nodes with GPU trouble by name; nil when nodes are not watched.
	TroubledNodes() map[string]*corev1.Node
	// PodsOnNode are the cached pods bound to node, and the pending ones when pending is set.
	PodsOnNode(node string, pending bool) []*corev1.Pod
	// Nodes are every cached node, stripped to its GPU facts; nil when nodes are not watched
	// (evidence.Nodes: the GPU survey reads them).
	Nodes() []*corev1.Node
	// MetricsAPI is whether the custom metrics API is available; not Known when APIServices
	// are not watched.
	MetricsAPI() kinds.MetricsAPI
}

// Metrics receives what the controller observes; metrics.Metrics implements it.
type Metrics interface {
	ConflictRetry(resource string)
	RouteAbandoned()
	APIError(reason string)
	ObserveInferenceService(s metrics.Snapshot)
	ForgetInferenceService(namespace, name string)
}

// Config wires a Controller.
type Config struct {
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	Caches   Caches
	Queue    *queue.Queue
	Recorder events.EventRecorder
	// Gateway registers routes; nil disables registration and the finalizer.
	Gateway Registrar
	Metrics Metrics
	// Features are the optional children to manage.
	Features reconcile.Features
	// Version is the InferenceService version the caches hold and status is written in:
	// crd.Version (v1alpha1, the default) or crd.VersionV1beta1.
	Version string
	// BudgetContended reports that the clients' request budget is contended
	// (clients.Budget.Contended): Normal Events are shed and a new isvc's first, transient
	// status waits then. Nil is never contended.
	BudgetContended func() bool
	// ProgressHold bounds how long transient statuses are held; 0 writes every transition.
	ProgressHold time.Duration
	// ModelServers asks model pods what adapters they serve and loads and unloads them
	// (modelserver.Client); nil neither observes nor loads adapters.
	ModelServers ModelServers
	// DeregisterTimeout, when positive, releases a deleted isvc's finalizer once deregistering
	// its route has failed for that long since the deletion; 0 waits for the gateway (except
	// in a namespace being deleted).
	DeregisterTimeout time.Duration
	// RolloutPrometheus, when set, is where a canary step's metrics window is read
	// (canaryprom.go) instead of the pods' own /metrics.
	RolloutPrometheus PromQuerier
}

// Controller reconciles InferenceServices.
type Controller struct {
	kube     kubernetes.Interface // writes children
	dyn      dynamic.Interface    // writes optional (unstructured) children
	features reconcile.Features
	isvcs    dynamic.NamespaceableResourceInterface // writes isvc status and finalizers
	caches   Caches                                 // every read on the hot path
	queue    *queue.Queue                           // keys of isvcs to reconcile
	recorder events.EventRecorder                   // Events on the isvc for users
	gateway  Registrar
	metrics  Metrics
	version  string // of the isvcs the caches hold
	now      func() time.Time
	// budgetContended and progressHold hold back statuses about to be stale (status.go).
	budgetContended func() bool
	progressHold    time.Duration
	// memory is what is remembered of each isvc between its syncs (memory.go): held statuses,
	// status writes the cache has not shown, creates in flight, namesakes, adapter attempts.
	memory memory
	// deregisterTimeout bounds how long a deletion waits for the gateway (abandonRoute).
	deregisterTimeout time.Duration
	// modelServers load LoRA adapters into model pods (adapters.go).
	modelServers ModelServers
	// evidence reads what the diagnosis needs beyond the caches, and remembers it (evidence/).
	evidence *evidence.Reader
	// rolloutProm reads canary steps' windows from Prometheus; nil reads the pods (canary.go).
	rolloutProm PromQuerier
}

// New builds a controller; call Handlers to wire it to informers, then Run.
func New(cfg Config) *Controller {
	version := cfg.Version
	if version == "" {
		version = crd.Version
	}
	rec := cfg.Recorder
	if cfg.BudgetContended != nil {
		rec = sheddingRecorder{EventRecorder: rec, contended: cfg.BudgetContended}
	}
	return &Controller{
		kube: cfg.Kube, dyn: cfg.Dynamic, features: cfg.Features, caches: cfg.Caches, queue: cfg.Queue,
		isvcs:    cfg.Dynamic.Resource(schema.GroupVersion{Group: crd.Group, Version: version}.WithResource(crd.Plural)),
		recorder: rec, gateway: cfg.Gateway, metrics: cfg.Metrics, version: version, now: time.Now,
		budgetContended: cfg.BudgetContended, progressHold: cfg.ProgressHold, deregisterTimeout: cfg.DeregisterTimeout,
		modelServers: cfg.ModelServers, evidence: evidence.New(evidenceConfig(cfg)), rolloutProm: cfg.RolloutPrometheus,
	}
}

// evidenceConfig wires the evidence reader to the controller's clients, caches and queue; a
// Metrics that counts reads (metrics.Metrics) counts the reader's.
func evidenceConfig(cfg Config) evidence.Config {
	ec := evidence.Config{Kube: cfg.Kube, Dynamic: cfg.Dynamic, Nodes: cfg.Caches, Queue: cfg.Queue}
	if m, ok := cfg.Metrics.(interface{ PodLogRead(result string) }); ok {
		ec.CountLogRead = m.PodLogRead
	}
	if m, ok := cfg.Metrics.(interface{ PodEventRead(result string) }); ok {
		ec.CountEventRead = m.PodEventRead
	}
	if m, ok := cfg.Metrics.(interface {
		StartPhase(phase string, seconds float64)
	}); ok {
		ec.ObserveStartPhase = m.StartPhase
	}
	return ec
}

// Run reconciles with the given number of workers until ctx is done, then waits for in-flight
// reconciles to finish.
func (c *Controller) Run(ctx context.Context, workers int) {
	klog.InfoS("Starting workers", "count", workers)
	c.queue.Run(ctx, workers, c.sync)
	klog.InfoS("Workers stopped")
}
