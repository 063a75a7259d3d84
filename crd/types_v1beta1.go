package crd

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// VersionV1beta1 is the second served version and, where it is served, the storage version.
	VersionV1beta1 = "v1beta1"
	// MaxAdapters bounds spec.adapters so the CEL uniqueness rule stays within its cost budget.
	MaxAdapters = 64
)

// GroupVersionV1beta1 is ai.example.com/v1beta1.
var GroupVersionV1beta1 = schema.GroupVersion{Group: Group, Version: VersionV1beta1}

// ResourceV1beta1 is the GroupVersionResource of v1beta1, for dynamic clients.
var ResourceV1beta1 = GroupVersionV1beta1.WithResource(Plural)

// InferenceServiceV1beta1 is InferenceService as served at ai.example.com/v1beta1: a base
// model with LoRA adapters, fixed replicas or autoscaling bounds, and a gateway route.
type InferenceServiceV1beta1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InferenceServiceSpecV1beta1   `json:"spec"`
	Status InferenceServiceStatusV1beta1 `json:"status,omitempty"`
}

// InferenceServiceSpecV1beta1 is what the user owns, in v1beta1.
type InferenceServiceSpecV1beta1 struct {
	// BaseModel is the model vLLM serves (v1alpha1 spec.model).
	BaseModel string `json:"baseModel"`
	// Adapters are LoRA adapters served on top of the base model.
	Adapters []Adapter `json:"adapters,omitempty"`
	// Replicas is a fixed number of model server pods; exactly one of replicas and autoscaling.
	Replicas *int32 `json:"replicas,omitempty"`
	// Autoscaling bounds the HPA instead of deriving them from replicas.
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`
	// GPUsPerReplica is the number of GPUs each pod requests.
	GPUsPerReplica *int32 `json:"gpusPerReplica,omitempty"`
	// Parallelism splits a replica's GPUs into vLLM's tensor x pipeline parallel sizes; unset,
	// they are all tensor parallel on one node (spec.multiNode has its own defaults).
	Parallelism *Parallelism `json:"parallelism,omitempty"`
	// Engine is the model server: EngineVLLM (the default) or EngineSGLang. Fixed at creation.
	Engine string `json:"engine,omitempty"`
	// Image is the model server container image; unset, the engine's (ImageFor).
	Image string `json:"image,omitempty"`
	// Resources overrides the model server's CPU and memory and the GPU resource name.
	Resources *Resources `json:"resources,omitempty"`
	// PriorityClassName is the pods' PriorityClass.
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// QueueName is the Kueue LocalQueue that admits the pods.
	QueueName string `json:"queueName,omitempty"`
	// Gateway configures the model's route on the gateway.
	Gateway *Gateway `json:"gateway,omitempty"`
	// EngineArgs are extra vLLM arguments (--max-model-len 8192, --gpu-memory-utilization 0.9,
	// --trust-remote-code ...), after the ones the operator owns; those are refused here.
	EngineArgs []string `json:"engineArgs,omitempty"`
	// Env are extra environment variables of the model server (HF_TOKEN from a Secret for a
	// gated model); the names the operator sets are refused.
	Env []corev1.EnvVar `json:"env,omitempty"`
	// Cache keeps downloaded weights on a PersistentVolumeClaim, so a restart or a new replica
	// does not download them again.
	Cache *Cache `json:"cache,omitempty"`
	// StartupTimeoutSeconds is how long a pod may take to download and load the weights before
	// its port opens; default DefaultStartupTimeoutSeconds.
	StartupTimeoutSeconds *int32 `json:"startupTimeoutSeconds,omitempty"`
	// MultiNode spreads each replica over several nodes, for a model larger than one node:
	// the replica becomes a LeaderWorkerSet group of one pod per node.
	MultiNode *MultiNode `json:"multiNode,omitempty"`
	// Rollout is how a new version of the model server is rolled out: a rolling update (the
	// default) or a canary judged by its own metrics (rollout.go).
	Rollout *Rollout `json:"rollout,omitempty"`
	// Placement is the pods' node selector, tolerations, affinity, topology spread, pull
	// secrets, ServiceAccount, RuntimeClass and added labels and annotations, flat under spec.
	Placement `json:",inline"`
}

// MultiNode is how one replica spans nodes: spec.gpusPerReplica split evenly over Nodes
// pods, vLLM's tensor parallelism inside a node and pipeline parallelism across them.
type MultiNode struct {
	// Nodes is the number of nodes (pods) one replica spans, 2 to MaxNodesPerReplica.
	Nodes int32 `json:"nodes"`
	// TensorParallelSize is vLLM's --tensor-parallel-size; default the GPUs of one node
	// (gpusPerReplica / nodes).
	TensorParallelSize *int32 `json:"tensorParallelSize,omitempty"`
	// PipelineParallelSize is vLLM's --pipeline-parallel-size; default nodes.
	PipelineParallelSize *int32 `json:"pipelineParallelSize,omitempty"`
}

// MaxNodesPerReplica bounds spec.multiNode.nodes.
const MaxNodesPerReplica = 8

// Parallelism is vLLM's tensor and pipeline parallel sizes for a replica of gpus GPUs, with
// the defaults applied.
func (m *MultiNode) Parallelism(gpus int32) (tensor, pipeline int32) {
	tensor, pipeline = gpus/max(m.Nodes, 1), m.Nodes
	if m.TensorParallelSize != nil {
		tensor = *m.TensorParallelSize
	}
	if m.PipelineParallelSize != nil {
		pipeline = *m.PipelineParallelSize
	}
	return tensor, pipeline
}

// Parallelism is how vLLM splits one replica's spec.gpusPerReplica GPUs: TensorParallelSize x
// PipelineParallelSize of them. Tensor parallel alone must divide the model's attention heads,
// so 3 or 6 GPUs crash most models; pipeline stages split the layers, which need not divide
// evenly, so an uneven count takes pipeline parallel (vLLM's advice for uneven splits).
type Parallelism struct {
	// TensorParallelSize is vLLM's --tensor-parallel-size: the GPUs each layer is split over.
	TensorParallelSize int32 `json:"tensorParallelSize"`
	// PipelineParallelSize is vLLM's --pipeline-parallel-size: the stages the layers run in.
	PipelineParallelSize int32 `json:"pipelineParallelSize"`
}

// MaxParallelSize bounds each of a replica's parallel sizes: its most GPUs, with spec.multiNode.
const MaxParallelSize = MaxGPUsPerReplica * MaxNodesPerReplica

// Cache is the PersistentVolumeClaim the model server keeps Hugging Face downloads on: one of
// the user's (ClaimName), or a managed one the operator makes and fills once (Size).
type Cache struct {
	// ClaimName is a PersistentVolumeClaim in the model's namespace, mounted at CachePath with
	// HF_HOME pointing there; ReadWriteMany when replicas run on more than one node.
	ClaimName string `json:"claimName,omitempty"`
	// Size makes the cache managed: a claim of this size, named after the weights and shared
	// by the namespace's models on them, filled once by a Job before any pod starts.
	Size string `json:"size,omitempty"`
	// StorageClassName is the managed claim's class; the cluster's default when unset.
	StorageClassName *string `json:"storageClassName,omitempty"`
	// AccessModes are the managed claim's; default ReadWriteMany (replicas on many nodes).
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
	// TokenSecret is the Secret key holding the Hugging Face token the fill Job downloads with.
	TokenSecret *SecretKey `json:"tokenSecret,omitempty"`
	// Source is where the weights come from when not the Hugging Face Hub: s3://BUCKET/PREFIX
	// fills a managed cache (Size) from object storage; pvc://CLAIM/PATH serves weights already
	// on a claim of the user's (ClaimName's claim, at a path in it).
	Source string `json:"source,omitempty"`
	// CredentialsSecret is a Secret in the model's namespace whose keys the s3:// fill gets as
	// its environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL,
	// AWS_DEFAULT_REGION: the names boto3 reads).
	CredentialsSecret *SecretRef `json:"credentialsSecret,omitempty"`
	// ServiceAccountName is the s3:// fill pod's ServiceAccount, for workload identity (IRSA,
	// EKS Pod Identity, GKE): the identity's webhook gives the pod its token and boto3 finds it.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// SecretRef names a Secret in the model's namespace.
type SecretRef struct {
	Name string `json:"name"`
}

// S3 is the bucket and prefix of an s3:// source (the prefix without its slashes).
func (c *Cache) S3() (bucket, prefix string, ok bool) {
	if c == nil {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(c.Source, "s3://")
	if !ok {
		return "", "", false
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	return bucket, strings.Trim(prefix, "/"), bucket != ""
}

// PVC is the claim and the path in it of a pvc:// source, or ClaimName and "" (the weights
// in the claim's Hugging Face cache).
func (c *Cache) PVC() (claim, path string) {
	if c == nil {
		return "", ""
	}
	if rest, ok := strings.CutPrefix(c.Source, "pvc://"); ok {
		claim, path, _ = strings.Cut(rest, "/")
		return claim, strings.Trim(path, "/")
	}
	return c.ClaimName, ""
}

// CacheStatus is a managed weights cache as the model last read it: its claim, whether it is
// filled, and while it fills the fill's bytes, total and rate (from its log, so approximate).
type CacheStatus struct {
	Claim          string `json:"claim"`
	Phase          string `json:"phase"`
	Bytes          int64  `json:"bytes,omitempty"`
	TotalBytes     int64  `json:"totalBytes,omitempty"`
	BytesPerSecond int64  `json:"bytesPerSecond,omitempty"`
}

// Phases of a managed weights cache.
const (
	CacheFilling = "Filling"
	CacheFilled  = "Filled"
	CacheFailed  = "Failed"
)

// SecretKey names one key of a Secret in the model's namespace.
type SecretKey struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// Managed reports whether the operator makes and fills the cache's claim.
func (c *Cache) Managed() bool { return c != nil && c.Size != "" }

const (
	// CachePath is where spec.cache is mounted and HF_HOME points: the image's default
	// Hugging Face home, so vLLM's own paths need no change.
	CachePath = "/root/.cache/huggingface"
	// DefaultStartupTimeoutSeconds lets a first start download and load a model of a few
	// hundred GB on a fast link; a cached start needs far less.
	DefaultStartupTimeoutSeconds = 3600
	// MinStartupTimeoutSeconds and MaxStartupTimeoutSeconds bound spec.startupTimeoutSeconds.
	MinStartupTimeoutSeconds = 60
	MaxStartupTimeoutSeconds = 86400
	// MaxEngineArgs and MaxEnv bound the lists so CEL's cost stays within budget.
	MaxEngineArgs = 64
	MaxEnv        = 64
)

// Adapter is a LoRA adapter loaded into the model server.
type Adapter struct {
	// Name is the adapter's model name in the OpenAI API; unique within the isvc.
	Name string `json:"name"`
	// StorageURI is where the adapter's weights are (hf://, s3://, a path).
	StorageURI string `json:"storageURI"`
	// Rank is the adapter's LoRA rank, from which the server's --max-lora-rank is sized.
	Rank *int32 `json:"rank,omitempty"`
}

// MaxAdapterRank is the largest rank vLLM v0.11 serves (LoRAConfig's MaxLoRARanks).
const MaxAdapterRank = 512

// Autoscaling bounds the HorizontalPodAutoscaler.
type Autoscaling struct {
	// MinReplicas is the HPA's lower bound; 0 scales the model to zero after IdleSeconds
	// without a request, and back up on the next one (held by the activator meanwhile).
	MinReplicas int32 `json:"minReplicas"`
	// MaxReplicas is the HPA's upper bound; at least minReplicas.
	MaxReplicas int32 `json:"maxReplicas"`
	// Metric is the signal the HPA scales on: AutoscalingMetricQueue (unset: the default, the
	// engine's waiting queue) or AutoscalingMetricKVCache (the engine's KV-cache use).
	Metric string `json:"metric,omitempty"`
	// TargetQueueLength is the target average of the engine's queue per pod (metric queue).
	TargetQueueLength *int32 `json:"targetQueueLength,omitempty"`
	// TargetKVCacheUsagePercent is the target average share of each pod's KV cache in use, in
	// percent (metric kvCache); DefaultTargetKVCacheUsagePercent when unset.
	TargetKVCacheUsagePercent *int32 `json:"targetKVCacheUsagePercent,omitempty"`
	// ScaleDownDelaySeconds is the HPA's scale-down stabilization window: it removes a pod
	// only once every recommendation of that many seconds allowed it. Unset, the operator sets
	// no window and the HPA controller's default applies (5 minutes unless the cluster changed it).
	ScaleDownDelaySeconds *int32 `json:"scaleDownDelaySeconds,omitempty"`
	// IdleSeconds, with minReplicas 0, is how long the model may go without a request before
	// it is scaled to zero; DefaultIdleSeconds when unset.
	IdleSeconds *int32 `json:"idleSeconds,omitempty"`
}

// The signals spec.autoscaling.metric names.
const (
	AutoscalingMetricQueue   = "queue"
	AutoscalingMetricKVCache = "kvCache"
)

// AutoscalingMetric is a's metric with its default, the queue.
func (a *Autoscaling) AutoscalingMetric() string {
	if a == nil || a.Metric == "" {
		return AutoscalingMetricQueue
	}
	return a.Metric
}

// Bounds of spec.autoscaling.targetKVCacheUsagePercent. The HPA controller leaves replicas as
// they are while the reading is within its tolerance (0.1 by default) of the target
// (replica_calculator.go), so it scales up only above 1.1 x target; KV use cannot pass 100%,
// so above 90 a model would never scale up.
const (
	DefaultTargetKVCacheUsagePercent = 70
	MinTargetKVCacheUsagePercent     = 1
	MaxTargetKVCacheUsagePercent     = 90
)

// Bounds of spec.autoscaling.idleSeconds: below a minute a model would sleep between a
// chat's turns; a day is longer than any idle window worth a GPU.
const (
	DefaultIdleSeconds = 300
	MinIdleSeconds     = 60
	MaxIdleSeconds     = 86400
)

// Idle returns the idle window of a model that scales to zero, and whether it does.
func (a *Autoscaling) Idle() (time.Duration, bool) {
	if a == nil || a.MinReplicas != 0 {
		return 0, false
	}
	s := int32(DefaultIdleSeconds)
	if a.IdleSeconds != nil {
		s = *a.IdleSeconds
	}
	return time.Duration(s) * time.Second, true
}

// MaxScaleDownDelaySeconds bounds spec.autoscaling.scaleDownDelaySeconds as the HPA API
// bounds its stabilization window (one hour).
const MaxScaleDownDelaySeconds = 3600

// Gateway configures the route registered with the gateway.
type Gateway struct {
	// Route is the path prefix; default /{namespace}/{name}.
	Route string `json:"route,omitempty"`
	// Priority orders overlapping routes; higher wins.
	Priority *int32 `json:"priority,omitempty"`
	// Timeouts are the route's timeouts; unset, DefaultRouteRequestTimeout (gateways' own
	// defaults, 15 s on Envoy, would cut long generations and cold starts).
	Timeouts *RouteTimeouts `json:"timeouts,omitempty"`
}

// InferenceServiceStatusV1beta1 is the v1alpha1 status plus what v1beta1 adds.
type InferenceServiceStatusV1beta1 struct {
	// ObservedGeneration is the spec generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is the number of pods the Deployment currently has.
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of pods ready to serve.
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Selector is the pods' label selector.
	Selector string `json:"selector,omitempty"`
	// Phase summarises the conditions.
	Phase Phase `json:"phase,omitempty"`
	// Reason is the reason of the most blocking condition.
	Reason string `json:"reason,omitempty"`
	// Conditions are the standard Kubernetes conditions.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// History keeps the last diagnoses the model went through, oldest first.
	History []DiagnosisRecord `json:"history,omitempty"`
	// LoadedAdapters are the wanted adapters every ready pod that answered lists on /v1/models.
	LoadedAdapters []string `json:"loadedAdapters,omitempty"`
	// Endpoint is the model's URL inside the cluster.
	Endpoint string `json:"endpoint,omitempty"`
	// ModelName is the name clients send as "model" for the base model (vLLM's served model name).
	ModelName string `json:"modelName,omitempty"`
	// RoutePath is the path prefix the gateway serves the model's OpenAI API under (clients call
	// <gateway>/<routePath>/v1/...), set only while the HTTPRoute is ours and a Gateway accepted it.
	RoutePath string `json:"routePath,omitempty"`
	// LastColdStart is the model's last start from zero as the activator measured it: when
	// the first held request arrived and how long until the first byte of its answer.
	LastColdStart *ColdStart `json:"lastColdStart,omitempty"`
	// Cache is the managed weights cache's state while the model uses one (spec.cache.size).
	Cache *CacheStatus `json:"cache,omitempty"`

	// LastStart is where the last pod start's time went, phase by phase, read from the pod's
	// conditions and its model server's own start log.
	LastStart *StartRecord `json:"lastStart,omitempty"`

	// Rollout is the last canary rollout's state (spec.rollout.strategy Canary).
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// StartRecord is one pod's start, creation to serving, and its phases.
type StartRecord struct {
	// Pod is the pod that started.
	Pod string `json:"pod"`
	// Started is the pod's creation (RFC 3339).
	Started string `json:"started"`
	// ServingAt is when its model server said it serves (RFC 3339).
	ServingAt string `json:"servingAt,omitempty"`
	// TotalSeconds is ServingAt less Started.
	TotalSeconds float64 `json:"totalSeconds"`
	// Phases are the parts of the start in order; their seconds add up to TotalSeconds.
	Phases []StartPhase `json:"phases,omitempty"`
	// Slowest is the longest phase's name.
	Slowest string `json:"slowest,omitempty"`
}

// StartPhase is one part of a start.
type StartPhase struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// ColdStart is one start from zero, request arrival to first byte.
type ColdStart struct {
	// Arrived is when the first request held for the model arrived (RFC 3339).
	Arrived string `json:"arrived"`
	// FirstByteSeconds is how long after that the first byte of its answer came.
	FirstByteSeconds float64 `json:"firstByteSeconds"`
}
