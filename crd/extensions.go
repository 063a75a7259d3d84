// The v1beta1 fields a v1alpha1 object carries in its annotations (SpecExtensions,
// StatusExtensions): what the controller reads beside v1alpha1, and what conversion keeps.

package crd

import (
	corev1 "k8s.io/api/core/v1"
)

// Annotations that carry, on a v1alpha1 object, the v1beta1 fields v1alpha1 cannot hold, so
// v1beta1 -> v1alpha1 -> v1beta1 loses nothing (v1beta1 is the storage version since the v1beta1 install; v1alpha1 objects read through it keep everything).
const (
	AnnotationV1beta1Spec   = Group + "/v1beta1-spec"
	AnnotationV1beta1Status = Group + "/v1beta1-status"
)

// SpecExtensions are the v1beta1 spec fields without a v1alpha1 counterpart. The controller
// works on v1alpha1 plus these, read from the annotation AnnotationV1beta1Spec.
type SpecExtensions struct {
	// Engine is spec.engine as given ("" for a model that names none: vLLM; EngineName).
	Engine      string          `json:"engine,omitempty"`
	Adapters    []Adapter       `json:"adapters,omitempty"`
	Autoscaling *Autoscaling    `json:"autoscaling,omitempty"`
	Gateway     *Gateway        `json:"gateway,omitempty"`
	EngineArgs  []string        `json:"engineArgs,omitempty"`
	Env         []corev1.EnvVar `json:"env,omitempty"`
	Cache       *Cache          `json:"cache,omitempty"`
	// StartupTimeoutSeconds: nil is the default.
	StartupTimeoutSeconds *int32       `json:"startupTimeoutSeconds,omitempty"`
	MultiNode             *MultiNode   `json:"multiNode,omitempty"`
	Parallelism           *Parallelism `json:"parallelism,omitempty"`
	// ReplicasUnset: v1beta1 had no spec.replicas; v1alpha1's required replicas was derived
	// (autoscaling.minReplicas, else 0) and is not the user's.
	ReplicasUnset bool `json:"replicasUnset,omitempty"`
	// Rollout is spec.rollout.
	Rollout *Rollout `json:"rollout,omitempty"`
	// Placement is the pods' placement and identity fields (spec.nodeSelector ...).
	Placement `json:",inline"`
}

func (e *SpecExtensions) empty() bool {
	return e.Engine == "" && len(e.Adapters) == 0 && e.Autoscaling == nil && e.Gateway == nil && !e.ReplicasUnset &&
		e.EngineArgs == nil && e.Env == nil && e.Cache == nil && e.StartupTimeoutSeconds == nil && e.MultiNode == nil &&
		e.Parallelism == nil && e.Rollout == nil && e.Placement.Empty()
}

// EngineName is the engine the model runs on: spec.engine, vLLM when it names none.
func (e *SpecExtensions) EngineName() string {
	if e.Engine == "" {
		return EngineVLLM
	}
	return e.Engine
}

// Nodes is how many nodes (pods) one replica spans: 1 without spec.multiNode.
func (e *SpecExtensions) Nodes() int32 {
	if e.MultiNode == nil {
		return 1
	}
	return max(e.MultiNode.Nodes, 1)
}

// ParallelSizes is vLLM's tensor and pipeline parallel sizes for a replica of gpus GPUs:
// spec.parallelism, else spec.multiNode's (defaults applied), else all of them tensor parallel.
func (e *SpecExtensions) ParallelSizes(gpus int32) (tensor, pipeline int32) {
	switch {
	case e.Parallelism != nil:
		return e.Parallelism.TensorParallelSize, e.Parallelism.PipelineParallelSize
	case e.MultiNode != nil:
		return e.MultiNode.Parallelism(gpus)
	}
	return gpus, 1
}

// derivedReplicas is the v1alpha1 replicas written for a v1beta1 spec without replicas.
func (e *SpecExtensions) derivedReplicas() int32 {
	if e.Autoscaling != nil {
		return e.Autoscaling.MinReplicas
	}
	return 0
}

// StatusExtensions are the v1beta1 status fields without a v1alpha1 counterpart.
type StatusExtensions struct {
	LoadedAdapters []string   `json:"loadedAdapters,omitempty"`
	Endpoint       string     `json:"endpoint,omitempty"`
	ModelName      string     `json:"modelName,omitempty"`
	RoutePath      string     `json:"routePath,omitempty"`
	LastColdStart  *ColdStart `json:"lastColdStart,omitempty"`
	// Cache is a managed weights cache's state (status.cache).
	Cache     *CacheStatus `json:"cache,omitempty"`
	LastStart *StartRecord `json:"lastStart,omitempty"`
	// Rollout is status.rollout.
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

func (e *StatusExtensions) empty() bool {
	return len(e.LoadedAdapters) == 0 && e.Endpoint == "" && e.ModelName == "" && e.RoutePath == "" && e.LastColdStart == nil &&
		e.Cache == nil && e.LastStart == nil && e.Rollout == nil
}
