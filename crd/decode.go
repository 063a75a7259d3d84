package crd

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromUnstructured converts an object from the dynamic informer's cache, in either served
// version, into a new typed v1alpha1 InferenceService; what only v1beta1 holds is kept in the
// annotations ExtensionsOf reads. The cache object is only read, never modified.
func FromUnstructured(u *unstructured.Unstructured) (*InferenceService, error) {
	if u.GetAPIVersion() == GroupVersionV1beta1.String() {
		var hub InferenceServiceV1beta1
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &hub); err != nil {
			return nil, fmt.Errorf("decoding %s %s/%s: %w", Kind, u.GetNamespace(), u.GetName(), err)
		}
		return ConvertFromV1beta1(&hub)
	}
	var isvc InferenceService
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &isvc); err != nil {
		return nil, fmt.Errorf("decoding %s %s/%s: %w", Kind, u.GetNamespace(), u.GetName(), err)
	}
	return &isvc, nil
}

// ExtensionsOf reads the v1beta1-only spec and status fields an InferenceService carries in
// its annotations (set by conversion), as ConvertToV1beta1 would read them; none is no error.
func ExtensionsOf(isvc *InferenceService) (SpecExtensions, StatusExtensions, error) {
	var spec SpecExtensions
	var status StatusExtensions
	m := isvc.ObjectMeta
	if v, ok := m.Annotations[AnnotationV1beta1Spec]; ok {
		if err := json.Unmarshal([]byte(v), &spec); err != nil {
			return spec, status, fmt.Errorf("annotation %s: %w", AnnotationV1beta1Spec, err)
		}
	}
	if spec.ReplicasUnset && isvc.Spec.Replicas != spec.derivedReplicas() {
		spec.Autoscaling = nil // changed through v1alpha1 (kubectl scale): the fixed count wins, as in conversion
	}
	if v, ok := m.Annotations[AnnotationV1beta1Status]; ok {
		if err := json.Unmarshal([]byte(v), &status); err != nil {
			return spec, status, fmt.Errorf("annotation %s: %w", AnnotationV1beta1Status, err)
		}
	}
	return spec, status, nil
}

// EngineOf is the engine isvc runs on (spec.engine, vLLM when it names none), read from the
// annotation alone, for a caller that has not read the extensions; an unreadable annotation
// (which Validate reports) reads as vLLM.
func EngineOf(isvc *InferenceService) string {
	if isvc == nil {
		return EngineVLLM
	}
	v, ok := isvc.Annotations[AnnotationV1beta1Spec]
	if !ok {
		return EngineVLLM
	}
	var e struct {
		Engine string `json:"engine"`
	}
	if json.Unmarshal([]byte(v), &e) != nil || e.Engine == "" {
		return EngineVLLM
	}
	return e.Engine
}

// StatusToUnstructuredV1beta1 renders a v1alpha1 status plus the v1beta1 additions for a write
// through the v1beta1 status subresource.
func StatusToUnstructuredV1beta1(s *InferenceServiceStatus, ext *StatusExtensions) (map[string]interface{}, error) {
	st := InferenceServiceStatusV1beta1{
		ObservedGeneration: s.ObservedGeneration, Replicas: s.Replicas, ReadyReplicas: s.ReadyReplicas,
		Selector: s.Selector, Phase: s.Phase, Reason: s.Reason, Conditions: s.Conditions, History: s.History,
		LoadedAdapters: ext.LoadedAdapters, Endpoint: ext.Endpoint, ModelName: ext.ModelName, RoutePath: ext.RoutePath,
		LastColdStart: ext.LastColdStart,
		Cache:         ext.Cache,
		LastStart:     ext.LastStart,
		Rollout:       ext.Rollout,
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
}

// StatusToUnstructured renders a status for a write through the status subresource.
func StatusToUnstructured(s *InferenceServiceStatus) (map[string]interface{}, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(s)
}

var (
	dns1035   = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	noSpaces  = regexp.MustCompile(`^\S+$`)
	maxString = 512
)

// Validate repeats, as pure code, the rules the API server enforces through the CRD's schema
// and CEL, so an object stored before a rule existed is reported instead of acted upon.
func Validate(isvc *InferenceService) error {
	ext, _, err := ExtensionsOf(isvc)
	return ValidateDecoded(isvc, &ext, err)
}

// ValidateDecoded is Validate for a caller that already read the extensions (and the error
// reading them), so the annotation is parsed once per reconcile.
func ValidateDecoded(isvc *InferenceService, ext *SpecExtensions, extErr error) error {
	var errs []string
	if n := isvc.Name; len(n) > MaxNameLength || !dns1035.MatchString(n) {
		errs = append(errs, fmt.Sprintf("metadata.name %q must be a DNS-1035 label of at most %d characters", n, MaxNameLength))
	}
	s := &isvc.Spec
	switch {
	case s.Model == "":
		errs = append(errs, "spec.model is required")
	case len(s.Model) > maxString || !noSpaces.MatchString(s.Model):
		errs = append(errs, fmt.Sprintf("spec.model must be 1-%d characters without whitespace", maxString))
	case strings.HasPrefix(s.Model, "-"):
		errs = append(errs, "spec.model must not start with '-'")
	}
	if s.Replicas < 0 || s.Replicas > MaxReplicas {
		errs = append(errs, fmt.Sprintf("spec.replicas %d must be between 0 and %d", s.Replicas, MaxReplicas))
	}
	if g := s.GPUs(); g < 0 || g > MaxGPUsPerReplica*ext.Nodes() {
		errs = append(errs, fmt.Sprintf("spec.gpusPerReplica %d must be between 0 and %d", g, MaxGPUsPerReplica*ext.Nodes()))
	}
	errs = append(errs, validateMultiNode(s.GPUs(), ext.MultiNode)...)
	errs = append(errs, validateParallelism(s.GPUs(), ext)...)
	if s.Image != "" && (len(s.Image) > maxString || !noSpaces.MatchString(s.Image)) {
		errs = append(errs, fmt.Sprintf("spec.image must be 1-%d characters without whitespace", maxString))
	}
	if extErr != nil {
		errs = append(errs, extErr.Error())
	}
	errs = append(errs, validateExtensions(ext)...)
	errs = append(errs, validateTimeouts(ext)...)
	errs = append(errs, rolloutErrors(isvc, ext)...)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid %s: %s", Kind, strings.Join(errs, "; "))
}

// validateMultiNode repeats spec.multiNode's schema and CEL rules.
func validateMultiNode(gpus int32, m *MultiNode) []string {
	if m == nil {
		return nil
	}
	if m.Nodes < 2 || m.Nodes > MaxNodesPerReplica {
		return []string{fmt.Sprintf("spec.multiNode.nodes %d must be between 2 and %d", m.Nodes, MaxNodesPerReplica)}
	}
	var errs []string
	if gpus < m.Nodes || gpus%m.Nodes != 0 {
		errs = append(errs, fmt.Sprintf("spec.gpusPerReplica (%d) must be a multiple of spec.multiNode.nodes (%d): each node of a replica runs one pod with gpusPerReplica / nodes GPUs", gpus, m.Nodes))
	}
	if t, p := m.Parallelism(gpus); t < 1 || p < 1 || t*p != gpus {
		errs = append(errs, RuleMultiNodeParallelMsg)
	}
	return errs
}

// validateParallelism repeats spec.parallelism's schema and CEL rules.
func validateParallelism(gpus int32, e *SpecExtensions) []string {
	p := e.Parallelism
	if p == nil {
		return nil
	}
	var errs []string
	if t, pp := p.TensorParallelSize, p.PipelineParallelSize; t < 1 || t > MaxParallelSize || pp < 1 || pp > MaxParallelSize {
		errs = append(errs, fmt.Sprintf("spec.parallelism: tensorParallelSize (%d) and pipelineParallelSize (%d) must be between 1 and %d", t, pp, MaxParallelSize))
	} else if t*pp != gpus {
		errs = append(errs, RuleParallelismGPUsMsg)
	}
	if m := e.MultiNode; m != nil && (m.TensorParallelSize != nil || m.PipelineParallelSize != nil) {
		errs = append(errs, RuleParallelismOnceMsg)
	}
	return errs
}

var adapterName = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$`)

// validateExtensions repeats v1beta1's schema and CEL rules for the fields v1alpha1 lacks.
func validateExtensions(e *SpecExtensions) []string {
	var errs []string
	if len(e.Adapters) > MaxAdapters {
		errs = append(errs, fmt.Sprintf("spec.adapters: at most %d adapters", MaxAdapters))
	}
	seen := map[string]bool{}
	for i, a := range e.Adapters {
		if len(a.Name) > 63 || !adapterName.MatchString(a.Name) {
			errs = append(errs, fmt.Sprintf("spec.adapters[%d].name %q must be 1-63 letters, digits, '-', '_' or '.'", i, a.Name))
		}
		if seen[a.Name] {
			errs = append(errs, RuleAdapterNamesUniqueMsg)
		}
		seen[a.Name] = true
		if a.StorageURI == "" || len(a.StorageURI) > maxString || !noSpaces.MatchString(a.StorageURI) {
			errs = append(errs, fmt.Sprintf("spec.adapters[%d].storageURI must be 1-%d characters without whitespace", i, maxString))
		}
	}
	if a := e.Autoscaling; a != nil {
		if a.MinReplicas < 0 || a.MaxReplicas < 1 || a.MaxReplicas > MaxReplicas {
			errs = append(errs, fmt.Sprintf("spec.autoscaling: minReplicas must be between 0 and %d, maxReplicas between 1 and %d", MaxReplicas, MaxReplicas))
		}
		if s := a.IdleSeconds; s != nil && (*s < MinIdleSeconds || *s > MaxIdleSeconds) {
			errs = append(errs, RuleIdleSecondsMessage)
		}
		if a.IdleSeconds != nil && a.MinReplicas != 0 {
			errs = append(errs, RuleIdleNeedsZeroMessage)
		}
		if a.MinReplicas == 0 && e.MultiNode != nil {
			errs = append(errs, RuleZeroNotMultiNodeMsg)
		}
		if a.MinReplicas > a.MaxReplicas {
			errs = append(errs, RuleMinLEMaxMessage)
		}
		if t := a.TargetQueueLength; t != nil && (*t < 1 || *t > MaxReplicas) {
			errs = append(errs, fmt.Sprintf("spec.autoscaling.targetQueueLength must be between 1 and %d", MaxReplicas))
		}
		if a.Metric != "" && a.Metric != AutoscalingMetricQueue && a.Metric != AutoscalingMetricKVCache {
			errs = append(errs, RuleAutoscalingMetricMsg)
		}
		if a.TargetQueueLength != nil && a.Metric != "" && a.Metric != AutoscalingMetricQueue {
			errs = append(errs, RuleQueueTargetMetricMsg)
		}
		if a.TargetKVCacheUsagePercent != nil && a.Metric != AutoscalingMetricKVCache {
			errs = append(errs, RuleKVTargetMetricMsg)
		}
		if t := a.TargetKVCacheUsagePercent; t != nil && (*t < MinTargetKVCacheUsagePercent || *t > MaxTargetKVCacheUsagePercent) {
			errs = append(errs, RuleKVTargetMsg)
		}
		if d := a.ScaleDownDelaySeconds; d != nil && (*d < 0 || *d > MaxScaleDownDelaySeconds) {
			errs = append(errs, RuleScaleDownDelayMessage)
		}
	}
	if g := e.Gateway; g != nil && g.Route != "" && (g.Route[0] != '/' || len(g.Route) > 253 || !noSpaces.MatchString(g.Route)) {
		errs = append(errs, "spec.gateway.route must be a path starting with '/' without whitespace")
	}
	// An adapter source vLLM cannot fetch is no spec error: the reconcile reports it
	// (AdapterSourceUnsupported) while the base model and the other adapters keep serving.
	errs = append(errs, placementErrors(&e.Placement)...)
	return append(errs, validateEngine(e)...)
}

// refusedArgs is the message of each of owned that one of args matches, as its CEL rule.
func refusedArgs(owned []OwnedArg, compiled []*regexp.Regexp, args []string) []string {
	var errs []string
	for i, re := range compiled {
		for _, a := range args {
			if re.MatchString(a) {
				errs = append(errs, owned[i].Message)
				break
			}
		}
	}
	return errs
}

// validateEngine repeats the rules on engine, engineArgs, env, cache and
// startupTimeoutSeconds, engineArgs and env against spec.engine's tables.
func validateEngine(e *SpecExtensions) []string {
	var errs []string
	r := Refused(e.Engine)
	if r == nil {
		errs = append(errs, fmt.Sprintf("spec.engine %q must be one of %s", e.Engine, strings.Join(Engines, ", ")))
		r = Refused(EngineVLLM)
	}
	if len(e.EngineArgs) > MaxEngineArgs {
		errs = append(errs, fmt.Sprintf("spec.engineArgs: at most %d items", MaxEngineArgs))
	}
	errs = append(errs, refusedArgs(r.Args, r.args, e.EngineArgs)...)
	withAdapters := len(e.Adapters) > 0
	if withAdapters {
		errs = append(errs, refusedArgs(r.ArgsWithAdapters, r.argsWithAdapters, e.EngineArgs)...)
	}
	for _, a := range e.EngineArgs {
		if a == "" || len(a) > maxString {
			errs = append(errs, fmt.Sprintf("spec.engineArgs: each item must be 1-%d characters", maxString))
			break
		}
	}
	if len(e.Env) > MaxEnv {
		errs = append(errs, fmt.Sprintf("spec.env: at most %d variables", MaxEnv))
	}
	seen := map[string]bool{}
	for _, v := range e.Env {
		for _, o := range r.Env {
			if v.Name == o.Name {
				errs = append(errs, o.Message)
			}
		}
		for _, o := range r.EnvWithAdapters {
			if withAdapters && v.Name == o.Name {
				errs = append(errs, o.Message)
			}
		}
		if v.Name == "HF_HOME" && e.Cache != nil {
			errs = append(errs, RuleEnvHFHomeWithCacheMsg)
		}
		if v.Name == "" || seen[v.Name] {
			errs = append(errs, fmt.Sprintf("spec.env: names must be set and unique (%q)", v.Name))
		}
		seen[v.Name] = true
	}
	errs = append(errs, cacheErrors(e.Cache)...)
	if _, _, s3 := e.Cache.S3(); s3 && slices.ContainsFunc(e.Adapters, func(a Adapter) bool { return strings.HasPrefix(a.StorageURI, "hf://") }) {
		errs = append(errs, RuleCacheS3HubAdaptersMsg)
	}
	errs = append(errs, engineFeatureErrors(e)...)
	if t := e.StartupTimeoutSeconds; t != nil && (*t < MinStartupTimeoutSeconds || *t > MaxStartupTimeoutSeconds) {
		errs = append(errs, fmt.Sprintf("spec.startupTimeoutSeconds must be between %d and %d", MinStartupTimeoutSeconds, MaxStartupTimeoutSeconds))
	}
	return errs
}

var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

var cacheSource = regexp.MustCompile(CacheSourcePattern)

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cacheErrors checks spec.cache as its schema and CEL rules do: a claim of the user's (by name
// or pvc:// source), or a managed size (from the Hub or an s3:// source), exactly one.
func cacheErrors(c *Cache) []string {
	if c == nil {
		return nil
	}
	_, _, s3 := c.S3()
	pvc := strings.HasPrefix(c.Source, "pvc://")
	if n := btoi(c.ClaimName != "") + btoi(c.Size != "") + btoi(pvc); n != 1 {
		return []string{RuleCacheClaimXorSizeMsg}
	}
	var errs []string
	if c.Source != "" && (len(c.Source) > 1024 || !cacheSource.MatchString(c.Source)) {
		errs = append(errs, fmt.Sprintf("spec.cache.source %q must be s3://BUCKET/PREFIX or pvc://CLAIM/PATH", c.Source))
	}
	if strings.Contains(c.Source, "/../") || strings.HasSuffix(c.Source, "/..") {
		errs = append(errs, RuleCacheSourcePathMsg)
	}
	if c.ClaimName != "" && (len(c.ClaimName) > 253 || !dns1123.MatchString(c.ClaimName)) {
		errs = append(errs, fmt.Sprintf("spec.cache.claimName %q must be a PersistentVolumeClaim name", c.ClaimName))
	}
	if c.Size != "" {
		if q, err := resource.ParseQuantity(c.Size); err != nil || q.Sign() <= 0 {
			errs = append(errs, RuleCacheSizeMsg+fmt.Sprintf(" (%q)", c.Size))
		}
	}
	if c.Size == "" && (c.StorageClassName != nil || len(c.AccessModes) > 0 || c.TokenSecret != nil || c.CredentialsSecret != nil || c.ServiceAccountName != "") {
		errs = append(errs, RuleCacheManagedFieldsMsg)
	}
	if !s3 && (c.CredentialsSecret != nil || c.ServiceAccountName != "") {
		errs = append(errs, RuleCacheS3FieldsMsg)
	}
	if s3 && c.Size == "" {
		errs = append(errs, RuleCacheS3SizeMsg)
	}
	if s3 && c.TokenSecret != nil {
		errs = append(errs, RuleCacheS3NoTokenMsg)
	}
	if s := c.TokenSecret; s != nil && (s.Name == "" || s.Key == "") {
		errs = append(errs, "spec.cache.tokenSecret needs name and key")
	}
	if s := c.CredentialsSecret; s != nil && s.Name == "" {
		errs = append(errs, "spec.cache.credentialsSecret needs name")
	}
	return errs
}
