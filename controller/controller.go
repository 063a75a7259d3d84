package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers"
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
	// Busy reports that the client's API budget is contended: Normal Events are skipped and a
	// new isvc's first, transient status waits then. Nil is never busy.
	Busy func() bool
	// ProgressHold bounds how long transient statuses are held; 0 writes every transition.
	ProgressHold time.Duration
	// DeregisterTimeout, when positive, releases a deleted isvc's finalizer once deregistering
	// its route has failed for that long since the deletion; 0 waits for the gateway (except
	// in a namespace being deleted).
	DeregisterTimeout time.Duration
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
	// busy, holds and progressHold hold back statuses about to be stale (hold.go).
	busy         func() bool
	holds        holds
	progressHold time.Duration
	// namesakes are children whose create found someone else's object (namesakes.go).
	namesakes namesakes
	// deregisterTimeout bounds how long a deletion waits for the gateway (abandonRoute).
	deregisterTimeout time.Duration
}

// New builds a controller; call Handlers to wire it to informers, then Run.
func New(cfg Config) *Controller {
	version := cfg.Version
	if version == "" {
		version = crd.Version
	}
	rec := cfg.Recorder
	if cfg.Busy != nil {
		rec = shedding{EventRecorder: rec, busy: cfg.Busy}
	}
	return &Controller{
		kube: cfg.Kube, dyn: cfg.Dynamic, features: cfg.Features, caches: cfg.Caches, queue: cfg.Queue,
		isvcs:    cfg.Dynamic.Resource(schema.GroupVersion{Group: crd.Group, Version: version}.WithResource(crd.Plural)),
		recorder: rec, gateway: cfg.Gateway, metrics: cfg.Metrics, version: version, now: time.Now,
		busy: cfg.Busy, progressHold: cfg.ProgressHold, deregisterTimeout: cfg.DeregisterTimeout,
	}
}

// Run reconciles with the given number of workers until ctx is done, then waits for in-flight
// reconciles to finish.
func (c *Controller) Run(ctx context.Context, workers int) {
	klog.InfoS("Starting workers", "count", workers)
	c.queue.Run(ctx, workers, c.sync)
	klog.InfoS("Workers stopped")
}

// Handlers are the informer event handlers: each maps an event to the InferenceService key.
func (c *Controller) Handlers() informers.Handlers {
	return informers.Handlers{
		// An InferenceService's resync is its periodic reconcile: it re-checks what no event
		// reports (a gateway route lost, an unlabeled namesake gone) and writes nothing when
		// converged.
		InferenceService: c.handler(true, func(obj metav1.Object) {
			c.queue.Add(queue.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()})
		}),
		Child:      c.handler(false, c.enqueueOwner),
		ReplicaSet: c.handler(false, c.enqueueDeploymentOwner),
		Pod:        c.handler(false, c.enqueuePodOwner),
	}
}

// handler unwraps tombstones and, unless resyncs are wanted, skips updates whose
// resourceVersion did not change (a resync of a child says nothing new).
func (c *Controller) handler(resyncs bool, enqueue func(metav1.Object)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if m, err := metaOf(obj); err == nil {
				enqueue(m)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, err1 := metaOf(oldObj)
			n, err2 := metaOf(newObj)
			if err1 == nil && err2 == nil && (resyncs || o.GetResourceVersion() != n.GetResourceVersion()) {
				enqueue(n)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if m, err := metaOf(obj); err == nil {
				enqueue(m)
			}
		},
	}
}

func metaOf(obj interface{}) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	return m, nil
}

// enqueueOwner maps a child to its InferenceService through the controller reference. No UID
// check: a child of a deleted namesake wakes the current one, which waits for it to be
// garbage-collected (ReplacingPrevious) and creates its own the moment it is gone. A child
// controlled by someone else but carrying the instance label still wakes its namesake, whose
// status names it.
func (c *Controller) enqueueOwner(obj metav1.Object) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != crd.Kind || !reconcile.IsOurGroup(ref.APIVersion) {
		if name, ok := obj.GetLabels()[reconcile.InstanceLabel]; ok {
			c.queue.Add(queue.Key{Namespace: obj.GetNamespace(), Name: name})
		}
		return
	}
	c.queue.Add(queue.Key{Namespace: obj.GetNamespace(), Name: ref.Name})
}

// enqueueDeploymentOwner maps a ReplicaSet to its Deployment, then to the InferenceService.
func (c *Controller) enqueueDeploymentOwner(obj metav1.Object) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != "Deployment" {
		return
	}
	d, ok, err := c.caches.Deployment(obj.GetNamespace(), ref.Name)
	if err != nil || !ok || d.UID != ref.UID {
		return
	}
	c.enqueueOwner(d)
}

// enqueuePodOwner maps a Pod to its ReplicaSet's Deployment's InferenceService.
func (c *Controller) enqueuePodOwner(obj metav1.Object) {
	if name, ok := obj.GetLabels()[reconcile.InstanceLabel]; ok {
		// The instance label is ours and immutable on the template; pods of a rollout in
		// progress may belong to a ReplicaSet the cache has not seen yet.
		c.queue.Add(queue.Key{Namespace: obj.GetNamespace(), Name: name})
	}
}
