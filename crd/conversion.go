package crd

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConvertToV1beta1 converts a v1alpha1 object into the hub version, v1beta1, restoring the
// fields a previous conversion kept in annotations. The input is not modified.
func ConvertToV1beta1(in *InferenceService) (*InferenceServiceV1beta1, error) {
	out := &InferenceServiceV1beta1{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersionV1beta1.String(), Kind: Kind},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
	}
	var spec SpecExtensions
	var status StatusExtensions
	if err := takeAnnotation(&out.ObjectMeta, AnnotationV1beta1Spec, &spec); err != nil {
		return nil, err
	}
	if err := takeAnnotation(&out.ObjectMeta, AnnotationV1beta1Status, &status); err != nil {
		return nil, err
	}

	s := &in.Spec
	out.Spec = InferenceServiceSpecV1beta1{
		BaseModel:             s.Model,
		Engine:                engineOrDefault(spec.Engine),
		Adapters:              cloneAdapters(spec.Adapters),
		Replicas:              ptrTo(s.Replicas),
		Autoscaling:           spec.Autoscaling,
		GPUsPerReplica:        clonePtr(s.GPUsPerReplica),
		Image:                 s.Image,
		Resources:             cloneResources(s.Resources),
		PriorityClassName:     s.PriorityClassName,
		QueueName:             s.QueueName,
		Gateway:               spec.Gateway,
		EngineArgs:            spec.EngineArgs,
		Env:                   spec.Env,
		Cache:                 cloneCache(spec.Cache),
		StartupTimeoutSeconds: spec.StartupTimeoutSeconds,
		MultiNode:             spec.MultiNode,
		Parallelism:           spec.Parallelism,
		Rollout:               spec.Rollout,
		Placement:             spec.Placement,
	}
	if spec.ReplicasUnset {
		if s.Replicas == spec.derivedReplicas() {
			out.Spec.Replicas = nil
		} else {
			// Changed through v1alpha1 (kubectl scale): the user's fixed count wins.
			out.Spec.Autoscaling = nil
		}
	}

	st := in.Status.DeepCopy()
	out.Status = InferenceServiceStatusV1beta1{
		ObservedGeneration: st.ObservedGeneration, Replicas: st.Replicas, ReadyReplicas: st.ReadyReplicas,
		Selector: st.Selector, Phase: st.Phase, Reason: st.Reason, Conditions: st.Conditions, History: st.History,
		LoadedAdapters: status.LoadedAdapters, Endpoint: status.Endpoint,
		ModelName: status.ModelName, RoutePath: status.RoutePath, LastColdStart: clonePtr(status.LastColdStart),
		Cache:     clonePtr(status.Cache),
		LastStart: status.LastStart.clone(),
		Rollout:   clonePtr(status.Rollout),
	}
	return out, nil
}

// ConvertFromV1beta1 converts a hub object into v1alpha1; what v1alpha1 cannot hold goes into
// the annotations AnnotationV1beta1Spec and AnnotationV1beta1Status. The input is not modified.
func ConvertFromV1beta1(in *InferenceServiceV1beta1) (*InferenceService, error) {
	out := &InferenceService{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: Kind},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
	}
	s := &in.Spec
	spec := SpecExtensions{
		Engine:                nonDefaultEngine(s.Engine),
		Adapters:              cloneAdapters(s.Adapters),
		Autoscaling:           cloneAutoscaling(s.Autoscaling),
		Gateway:               cloneGateway(s.Gateway),
		ReplicasUnset:         s.Replicas == nil,
		EngineArgs:            cloneStrings(s.EngineArgs),
		Env:                   cloneEnv(s.Env),
		Cache:                 cloneCache(s.Cache),
		StartupTimeoutSeconds: clonePtr(s.StartupTimeoutSeconds),
		MultiNode:             cloneMultiNode(s.MultiNode),
		Parallelism:           clonePtr(s.Parallelism),
		Rollout:               s.Rollout.DeepCopy(),
		Placement:             s.Placement.DeepCopy(),
	}
	replicas := spec.derivedReplicas()
	if s.Replicas != nil {
		replicas = *s.Replicas
	}
	out.Spec = InferenceServiceSpec{
		Model:             s.BaseModel,
		Replicas:          replicas,
		GPUsPerReplica:    clonePtr(s.GPUsPerReplica),
		Image:             s.Image,
		PriorityClassName: s.PriorityClassName,
		QueueName:         s.QueueName,
		Resources:         cloneResources(s.Resources),
	}
	st := in.Status
	out.Status = InferenceServiceStatus{
		ObservedGeneration: st.ObservedGeneration, Replicas: st.Replicas, ReadyReplicas: st.ReadyReplicas,
		Selector: st.Selector, Phase: st.Phase, Reason: st.Reason,
		Conditions: append([]metav1.Condition(nil), st.Conditions...),
		History:    append([]DiagnosisRecord(nil), st.History...),
	}
	status := StatusExtensions{LoadedAdapters: append([]string(nil), st.LoadedAdapters...), Endpoint: st.Endpoint,
		ModelName: st.ModelName, RoutePath: st.RoutePath, LastColdStart: clonePtr(st.LastColdStart),
		Cache: clonePtr(st.Cache), LastStart: st.LastStart.clone(), Rollout: clonePtr(st.Rollout)}
	if err := putAnnotation(&out.ObjectMeta, AnnotationV1beta1Spec, &spec, spec.empty()); err != nil {
		return nil, err
	}
	if err := putAnnotation(&out.ObjectMeta, AnnotationV1beta1Status, &status, status.empty()); err != nil {
		return nil, err
	}
	return out, nil
}

// nonDefaultEngine is spec.engine as the v1alpha1 annotation keeps it: "" for the default. The
// API server defaults spec.engine on every v1beta1 object it reads, so keeping "vllm" would give
// every model's v1alpha1 view an annotation it was not written with (a v1alpha1 object would not
// read back as written); engineOrDefault restores it, as the API server's default would.
func nonDefaultEngine(e string) string {
	if e == EngineVLLM {
		return ""
	}
	return e
}

// engineOrDefault is spec.engine with the schema's default applied, as the API server serves
// every v1beta1 object: a v1beta1 read of an object the webhook converts is the same as one of
// an object stored in v1beta1.
func engineOrDefault(e string) string {
	if e == "" {
		return EngineVLLM
	}
	return e
}

// takeAnnotation decodes and removes annotation key, if present.
func takeAnnotation(m *metav1.ObjectMeta, key string, into any) error {
	v, ok := m.Annotations[key]
	if !ok {
		return nil
	}
	if err := json.Unmarshal([]byte(v), into); err != nil {
		return fmt.Errorf("annotation %s: %w", key, err)
	}
	delete(m.Annotations, key)
	if len(m.Annotations) == 0 {
		m.Annotations = nil
	}
	return nil
}

// putAnnotation stores v as JSON under key, or removes key when there is nothing to keep.
func putAnnotation(m *metav1.ObjectMeta, key string, v any, empty bool) error {
	if empty {
		delete(m.Annotations, key)
		if len(m.Annotations) == 0 {
			m.Annotations = nil
		}
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = string(b)
	return nil
}

func ptrTo[T any](v T) *T { return &v }

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneAdapters(a []Adapter) []Adapter {
	if a == nil {
		return nil
	}
	out := append([]Adapter{}, a...)
	for i := range out {
		out[i].Rank = clonePtr(out[i].Rank)
	}
	return out
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string{}, s...)
}

func cloneEnv(env []corev1.EnvVar) []corev1.EnvVar {
	if env == nil {
		return nil
	}
	out := make([]corev1.EnvVar, len(env))
	for i := range env {
		env[i].DeepCopyInto(&out[i])
	}
	return out
}

func cloneAutoscaling(a *Autoscaling) *Autoscaling {
	if a == nil {
		return nil
	}
	out := *a
	out.TargetQueueLength = clonePtr(a.TargetQueueLength)
	out.TargetKVCacheUsagePercent = clonePtr(a.TargetKVCacheUsagePercent)
	out.ScaleDownDelaySeconds = clonePtr(a.ScaleDownDelaySeconds)
	out.IdleSeconds = clonePtr(a.IdleSeconds)
	return &out
}

func cloneGateway(g *Gateway) *Gateway {
	if g == nil {
		return nil
	}
	out := *g
	out.Priority = clonePtr(g.Priority)
	out.Timeouts = clonePtr(g.Timeouts)
	return &out
}

func cloneResources(r *Resources) *Resources {
	if r == nil {
		return nil
	}
	return &Resources{Requests: r.Requests.DeepCopy(), Limits: r.Limits.DeepCopy(), GPUResourceName: r.GPUResourceName}
}

// Convert converts the JSON of an InferenceService in any served version to apiVersion
// toVersion (group/version), for the conversion webhook.
func Convert(raw []byte, toVersion string) ([]byte, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("decoding object: %w", err)
	}
	if tm.Kind != Kind {
		return nil, fmt.Errorf("unexpected kind %q", tm.Kind)
	}
	if tm.APIVersion == toVersion {
		return raw, nil
	}
	var hub *InferenceServiceV1beta1
	switch tm.APIVersion {
	case GroupVersion.String():
		var in InferenceService
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", tm.APIVersion, err)
		}
		var err error
		if hub, err = ConvertToV1beta1(&in); err != nil {
			return nil, fmt.Errorf("%s/%s to %s: %w", in.Namespace, in.Name, toVersion, err)
		}
	case GroupVersionV1beta1.String():
		hub = &InferenceServiceV1beta1{}
		if err := json.Unmarshal(raw, hub); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", tm.APIVersion, err)
		}
	default:
		return nil, fmt.Errorf("unsupported apiVersion %q", tm.APIVersion)
	}
	switch toVersion {
	case GroupVersionV1beta1.String():
		hub.TypeMeta = metav1.TypeMeta{APIVersion: toVersion, Kind: Kind}
		return json.Marshal(hub)
	case GroupVersion.String():
		out, err := ConvertFromV1beta1(hub)
		if err != nil {
			return nil, fmt.Errorf("%s/%s to %s: %w", hub.Namespace, hub.Name, toVersion, err)
		}
		return json.Marshal(out)
	}
	return nil, fmt.Errorf("unsupported target apiVersion %q", toVersion)
}

func cloneMultiNode(m *MultiNode) *MultiNode {
	if m == nil {
		return nil
	}
	return &MultiNode{Nodes: m.Nodes, TensorParallelSize: clonePtr(m.TensorParallelSize), PipelineParallelSize: clonePtr(m.PipelineParallelSize)}
}

// cloneCache copies spec.cache deeply: its class, modes and secret are shared otherwise.
func cloneCache(c *Cache) *Cache {
	if c == nil {
		return nil
	}
	out := *c
	out.StorageClassName = clonePtr(c.StorageClassName)
	out.AccessModes = slices.Clone(c.AccessModes)
	out.TokenSecret = clonePtr(c.TokenSecret)
	out.CredentialsSecret = clonePtr(c.CredentialsSecret)
	return &out
}

// clone is a deep copy of r; nil for nil.
func (r *StartRecord) clone() *StartRecord {
	if r == nil {
		return nil
	}
	c := *r
	c.Phases = append([]StartPhase(nil), r.Phases...)
	return &c
}
