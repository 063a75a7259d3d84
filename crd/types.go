// Package crd is what every step of the pipeline speaks: the InferenceService API, its Go types,
// defaults, validation and the CustomResourceDefinition the API server serves, all as pure code.
package crd

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/inferenceservice-operator/controller/engine"
)

const (
	// Group is the API group of InferenceService.
	Group = "ai.example.com"
	// Version is the served and stored version.
	Version = "v1alpha1"
	// Kind is the object kind.
	Kind = "InferenceService"
	// Plural is the resource name in URLs.
	Plural = "inferenceservices"
	// Singular is the singular resource name.
	Singular = "inferenceservice"
	// ShortName is the kubectl short name.
	ShortName = "isvc"

	// DefaultGPUsPerReplica is used when spec.gpusPerReplica is omitted.
	DefaultGPUsPerReplica = 1
	// MaxGPUsPerReplica bounds one replica to the largest common GPU node.
	MaxGPUsPerReplica = 16
	// MaxReplicas keeps the HPA's maximum (3 x replicas) well inside int32 and sane.
	MaxReplicas = 1000
	// MaxNameLength leaves room for every derived name (pods add 17 characters) and keeps
	// the name usable as a label value and a DNS-1035 Service name.
	MaxNameLength = 50
)

// GroupVersion is ai.example.com/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// Resource is the GroupVersionResource used by the dynamic client and informer.
var Resource = GroupVersion.WithResource(Plural)

// CRDName names the CustomResourceDefinition, the only CRD the operator reads and patches.
const CRDName = Plural + "." + Group

// CRDResource is read and patched through the dynamic client, which the operator already has.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InferenceService is a model served by vLLM: a Deployment, a Service and an HPA.
type InferenceService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InferenceServiceSpec   `json:"spec"`
	Status InferenceServiceStatus `json:"status,omitempty"`
}

// InferenceServiceSpec is what the user owns.
type InferenceServiceSpec struct {
	// Model is the model to serve, vllm serve's positional argument (a Hugging Face id or a path);
	// clients send it as the model name.
	Model string `json:"model"`
	// Replicas is the number of model server pods; the HPA may scale between max(1, r/2) and 3r.
	Replicas int32 `json:"replicas"`
	// GPUsPerReplica is the number of nvidia.com/gpu each pod requests.
	GPUsPerReplica *int32 `json:"gpusPerReplica,omitempty"`
	// Image is the model server container image.
	Image string `json:"image,omitempty"`
	// PriorityClassName is the pods' PriorityClass: online serving high, offline work low, so
	// the scheduler preempts offline pods for online ones under pressure.
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// QueueName is the Kueue LocalQueue that admits the pods (label kueue.x-k8s.io/queue-name),
	// so online and offline work can share a quota.
	QueueName string `json:"queueName,omitempty"`
	// Resources overrides the model server's CPU and memory and the GPU resource name.
	Resources *Resources `json:"resources,omitempty"`
}

// Resources overrides the model server container's resources.
type Resources struct {
	// Requests for cpu, memory and ephemeral-storage; default cpu 2 and memory DefaultMemory
	// (10Gi for one GPU, 4Gi more per further GPU), so a namespace with a quota on them admits
	// the pods and the node keeps room for the load.
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Limits for cpu, memory and ephemeral-storage; none by default.
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// GPUResourceName is the extended resource GPUs are requested as; default nvidia.com/gpu.
	GPUResourceName string `json:"gpuResourceName,omitempty"`
}

// DefaultGPUResource is the NVIDIA device plugin's resource name.
const DefaultGPUResource corev1.ResourceName = "nvidia.com/gpu"

// DefaultRequests are the model server's requests when spec.resources.requests omits them:
// cpu 2, and memory DefaultMemory(gpus).
func DefaultRequests(gpus int32) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: defaultCPU.DeepCopy(), corev1.ResourceMemory: DefaultMemory(gpus)}
}

// DefaultMemory is the memory request that fits loading a model: 8Gi for vLLM's API server,
// engine core and one GPU worker while weights stream through host memory, 4Gi more per
// further tensor-parallel worker (each its own process with its own CUDA context and shard
// buffers), plus ShmSize, since /dev/shm is a Memory emptyDir charged to the pod.
func DefaultMemory(gpus int32) resource.Quantity {
	gi := int64(8) + 4*int64(max(gpus, 1)-1) + ShmSizeGi
	return *resource.NewQuantity(gi<<30, resource.BinarySI)
}

// ShmSizeGi is the size limit of the model server's /dev/shm (a Memory emptyDir), as vLLM's
// Kubernetes guide sets it: tensor-parallel workers exchange through it, and unbounded it
// could take the node's memory.
const ShmSizeGi = 2

// Parsed once: every reconcile builds the default requests.
var defaultCPU = resource.MustParse("2")

// GPUResourceName returns the GPU resource name with its default applied.
func (s *InferenceServiceSpec) GPUResourceName() corev1.ResourceName {
	if s.Resources == nil || s.Resources.GPUResourceName == "" {
		return DefaultGPUResource
	}
	return corev1.ResourceName(s.Resources.GPUResourceName)
}

// Phase is the one-word summary shown by kubectl get.
type Phase string

const (
	// PhaseProgressing: children are being created or updated, or pods are not ready yet.
	PhaseProgressing Phase = "Progressing"
	// PhaseReady: every child matches the spec and readyReplicas >= replicas.
	PhaseReady Phase = "Ready"
	// PhaseFailed: the operator cannot make progress without a change by the user.
	PhaseFailed Phase = "Failed"
	// PhaseTerminating: the object is being deleted and its external resources cleaned up.
	PhaseTerminating Phase = "Terminating"
)

// InferenceServiceStatus is what the controller observes and writes back.
type InferenceServiceStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is the number of pods the Deployment currently has (for the scale subresource).
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of pods ready to serve, from the Deployment.
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Selector is the pods' label selector (for the scale subresource).
	Selector string `json:"selector,omitempty"`
	// Phase summarises the conditions.
	Phase Phase `json:"phase,omitempty"`
	// Reason is the reason of the most blocking condition, for kubectl get.
	Reason string `json:"reason,omitempty"`
	// Conditions are the standard Kubernetes conditions: Ready, Progressing and others.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// History keeps the last MaxHistory diagnoses the model went through (failures, queueing
	// and the recoveries after them), oldest first: what happened last night, after the
	// Events (one hour) are gone.
	History []DiagnosisRecord `json:"history,omitempty"`
}

// MaxHistory bounds status.history; MaxHistoryMessage bounds each record's message.
const (
	MaxHistory        = 5
	MaxHistoryMessage = 512
)

// DiagnosisRecord is one change of the model's diagnosis.
type DiagnosisRecord struct {
	// Time is when the operator first saw the diagnosis.
	Time metav1.Time `json:"time"`
	// Phase and Reason are the status's at that time (Reason "Available" for a recovery).
	Phase  Phase  `json:"phase"`
	Reason string `json:"reason"`
	// Message is the condition's message then, cut to MaxHistoryMessage bytes.
	Message string `json:"message,omitempty"`
}

// Condition types.
const (
	// ConditionReady is True when at least spec.replicas pods are ready as the Deployment reports
	// them: each pod's readiness probe got an answer from vLLM's /health within its timeout, so
	// the server is up and its engine alive. It says nothing of adapters (AdaptersReady) or of
	// the gateway (GatewayRegistered), and a busy server that answers /health slowly stays ready.
	ConditionReady = "Ready"
	// ConditionAdaptersReady is True when every ready pod that answered lists every adapter of
	// spec.adapters on /v1/models; absent without adapters.
	ConditionAdaptersReady = "AdaptersReady"
	// ConditionProgressing is True while the operator or the Deployment is moving toward the spec.
	ConditionProgressing = "Progressing"
	// ConditionGatewayRegistered is True once the model's route is registered with the gateway.
	ConditionGatewayRegistered = "GatewayRegistered"
	// ConditionAutoscalingActive is True while the HorizontalPodAutoscaler reads its metric,
	// False with the HPA's own reason when it cannot (or is held at its maximum with the queue
	// above target), Unknown until it reports; absent without an HPA (spec.replicas 0). The
	// model serves either way: it never makes the phase Failed.
	ConditionAutoscalingActive = "AutoscalingActive"
	// ConditionAdmitted says what Kueue did with the model's pods where Kueue's Workloads are
	// watched and the model is queued (spec.queueName, or Kueue gates its pods): True once
	// every pod is admitted (reason BorrowingQuota while its ClusterQueue borrows from its
	// cohort), False while pods wait (WaitingForAdmission, or Preempting while Kueue makes room,
	// with their position where Kueue's visibility API is served). It never makes the phase
	// Failed: the Ready condition carries the wait.
	ConditionAdmitted = "Admitted"
	// ConditionRouted says where the model's HTTPRoute sends requests and whether they get
	// there: True with reason InferencePoolRoute (the pool's endpoint picker chooses the pod)
	// or ServiceRoute; False while the Gateway has not accepted the route or the pool, the
	// picker is not ready (requests go to the Service meanwhile) or the pool has no ready pod.
	// Absent without an HTTPRoute.
	ConditionRouted = "Routed"
)

// GPUs returns spec.gpusPerReplica with its default applied.
func (s *InferenceServiceSpec) GPUs() int32 {
	if s.GPUsPerReplica == nil {
		return DefaultGPUsPerReplica
	}
	return *s.GPUsPerReplica
}

// ImageFor returns spec.image, or the image of the engine named (spec.engine, "" for vLLM) when
// the spec names none. spec.image has no schema default since spec.engine: one default cannot
// be right for both engines, and an API server default is written into the object at creation
// (or by any v1alpha1 update that omits the field), which would give an SGLang model vLLM's
// image. Resolved here instead, the default follows the engine; the models created before
// carry vLLM's image in their spec, so their pods do not change.
func (s *InferenceServiceSpec) ImageFor(engineName string) string {
	if s.Image != "" {
		return s.Image
	}
	if e := engine.For(engineName); e != nil {
		return e.Image()
	}
	return DefaultImage
}

// DeepCopy copies a status, conditions included.
func (s *InferenceServiceStatus) DeepCopy() *InferenceServiceStatus {
	out := *s
	if s.Conditions != nil {
		out.Conditions = append([]metav1.Condition(nil), s.Conditions...)
	}
	if s.History != nil {
		out.History = append([]DiagnosisRecord(nil), s.History...)
	}
	return &out
}

// DeepCopyInto copies every pointer, map and slice: the operator's cache holds InferenceServices
// typed, and each reconcile works on its own copy.
func (in *InferenceService) DeepCopyInto(out *InferenceService) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if p := in.Spec.GPUsPerReplica; p != nil {
		v := *p
		out.Spec.GPUsPerReplica = &v
	}
	if r := in.Spec.Resources; r != nil {
		c := *r
		c.Requests, c.Limits = r.Requests.DeepCopy(), r.Limits.DeepCopy()
		out.Spec.Resources = &c
	}
	out.Status = *in.Status.DeepCopy()
}

// DeepCopy returns a copy sharing nothing with in.
func (in *InferenceService) DeepCopy() *InferenceService {
	if in == nil {
		return nil
	}
	out := new(InferenceService)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject makes an InferenceService a runtime.Object (Events refer to it).
func (in *InferenceService) DeepCopyObject() runtime.Object { return in.DeepCopy() }
