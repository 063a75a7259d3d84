// v1beta1's CEL rules and their messages, in one place: the schema (definition_v1beta1.go)
// attaches them, the decoder (decode.go) refuses the same in the same words, and the tests
// break each one and expect its message.

package crd

import apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

// CEL rules of v1beta1 and their messages; tests break each one and expect its message.
const (
	RuleBaseModel                = `!self.startsWith('-')`
	RuleBaseModelMessage         = "spec.baseModel must not start with '-': it is passed to vllm serve as the model argument"
	RuleAdapterNamesUnique       = `self.all(a, self.exists_one(b, b.name == a.name))`
	RuleAdapterNamesUniqueMsg    = "spec.adapters: adapter names must be unique"
	RuleMinLEMax                 = `self.minReplicas <= self.maxReplicas`
	RuleMinLEMaxMessage          = "spec.autoscaling.minReplicas must be less than or equal to spec.autoscaling.maxReplicas"
	RuleReplicasXorAutoscaling   = `has(self.replicas) != has(self.autoscaling)`
	RuleReplicasXorAutoscalingMs = "exactly one of spec.replicas and spec.autoscaling must be set"
	RuleEnvHFHomeWithCache       = `!has(self.cache) || !has(self.env) || self.env.all(e, e.name != 'HF_HOME')`
	RuleEnvHFHomeWithCacheMsg    = "spec.env: HF_HOME is set by the operator to " + CachePath + " when spec.cache is set; remove it from spec.env"
	// spec.cache: the user's filled claim or a managed one, and the managed one's fields only with it.
	RuleCacheClaimXorSize     = `[has(self.claimName), has(self.size), has(self.source) && self.source.startsWith('pvc://')].filter(x, x).size() == 1`
	RuleCacheClaimXorSizeMsg  = "spec.cache: set exactly one of claimName (a filled claim of your own), size (a claim the operator makes and fills) and a pvc:// source (weights at a path on a claim of yours)"
	RuleCacheManagedFields    = `has(self.size) || !(has(self.storageClassName) || has(self.accessModes) || has(self.tokenSecret) || has(self.credentialsSecret) || has(self.serviceAccountName))`
	RuleCacheManagedFieldsMsg = "spec.cache: storageClassName, accessModes, tokenSecret, credentialsSecret and serviceAccountName are for a managed cache (size); a claim of yours is mounted as it is"
	RuleCacheS3Fields         = `(has(self.source) && self.source.startsWith('s3://')) || !(has(self.credentialsSecret) || has(self.serviceAccountName))`
	RuleCacheS3FieldsMsg      = "spec.cache: credentialsSecret and serviceAccountName are the s3:// fill's; a Hugging Face fill takes tokenSecret"
	RuleCacheS3Size           = `!(has(self.source) && self.source.startsWith('s3://')) || has(self.size)`
	RuleCacheS3SizeMsg        = "spec.cache: an s3:// source fills a managed cache: set size"
	RuleCacheS3NoToken        = `!(has(self.source) && self.source.startsWith('s3://') && has(self.tokenSecret))`
	RuleCacheS3NoTokenMsg     = "spec.cache: tokenSecret is the Hugging Face token; an s3:// source takes credentialsSecret"
	// CacheSourcePattern is s3://BUCKET[/PREFIX] (S3's bucket naming rules) or
	// pvc://CLAIM/PATH (a claim name, then a relative path without ..).
	CacheSourcePattern = `^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?|pvc://[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[^\s]*)?)$`
	// The pods of an s3:// source read the cache offline, and its fill copies the bucket only.
	RuleCacheS3HubAdapters    = `!(has(self.cache) && has(self.cache.source) && self.cache.source.startsWith('s3://') && has(self.adapters) && self.adapters.exists(a, a.storageURI.startsWith('hf://')))`
	RuleCacheS3HubAdaptersMsg = "spec.adapters: an hf:// adapter is not fetched for an s3:// spec.cache.source (its fill copies the bucket, and the pods read the cache offline): put the adapter under the source's prefix and name it by its path in the pod (" + CachePath + "/s3/BUCKET/PREFIX/...), or fill the cache from the Hub"
	RuleCacheSourcePath       = `!has(self.source) || !self.source.contains('/../') && !self.source.endsWith('/..')`
	RuleCacheSourcePathMsg    = "spec.cache.source: a path with .. is refused"
	RuleCacheSize             = `!has(self.size) || (isQuantity(self.size) && quantity(self.size).isGreaterThan(quantity('0')))`
	RuleCacheSizeMsg          = "spec.cache.size must be a positive quantity such as 100Gi"
	// G is spec.gpusPerReplica with its default, inside the spec-level rules below.
	ruleG                     = `(has(self.gpusPerReplica) ? self.gpusPerReplica : 1)`
	RuleMultiNodeGPUs         = `!has(self.multiNode) || (` + ruleG + ` >= self.multiNode.nodes && ` + ruleG + ` % self.multiNode.nodes == 0)`
	RuleMultiNodeGPUsMsg      = "spec.gpusPerReplica must be a multiple of spec.multiNode.nodes: each node of a replica runs one pod with gpusPerReplica / nodes GPUs"
	RuleMultiNodeParallel     = `!has(self.multiNode) || (has(self.multiNode.tensorParallelSize) ? self.multiNode.tensorParallelSize : ` + ruleG + ` / self.multiNode.nodes) * (has(self.multiNode.pipelineParallelSize) ? self.multiNode.pipelineParallelSize : self.multiNode.nodes) == ` + ruleG
	RuleMultiNodeParallelMsg  = "spec.multiNode: tensorParallelSize x pipelineParallelSize must equal spec.gpusPerReplica (vLLM places one model shard per GPU; the defaults are the GPUs of one node x nodes)"
	RuleOneNodeGPUs           = `has(self.multiNode) || ` + ruleG + ` <= 16`
	RuleOneNodeGPUsMsg        = "spec.gpusPerReplica above 16 needs spec.multiNode: one pod cannot hold more GPUs than a node; set spec.multiNode.nodes to spread the replica over several"
	RuleMultiNodePerNode      = `!has(self.multiNode) || ` + ruleG + ` / self.multiNode.nodes <= 16`
	RuleMultiNodePerNodeMsg   = "spec.gpusPerReplica / spec.multiNode.nodes must be at most 16: the GPUs of one node; raise spec.multiNode.nodes"
	RuleIdleSeconds           = `self >= 60 && self <= 86400`
	RuleIdleSecondsMessage    = "spec.autoscaling.idleSeconds must be between 60 and 86400: how long the model may go without a request before it is scaled to zero (the activator reports requests every 20s by default, so a shorter window would sleep a model that is in use)"
	RuleIdleNeedsZero         = `!has(self.idleSeconds) || self.minReplicas == 0`
	RuleIdleNeedsZeroMessage  = "spec.autoscaling.idleSeconds applies only with minReplicas 0 (scale to zero when idle)"
	RuleZeroNotMultiNode      = `!has(self.multiNode) || !has(self.autoscaling) || self.autoscaling.minReplicas >= 1`
	RuleZeroNotMultiNodeMsg   = "spec.autoscaling.minReplicas 0 (scale to zero) is not supported with spec.multiNode yet: set minReplicas to 1"
	RuleAutoscalingMetric     = `self == 'queue' || self == 'kvCache' || self == 'ttft'`
	RuleAutoscalingMetricMsg  = "spec.autoscaling.metric must be queue (the engine's waiting requests per pod, the default), kvCache (the engine's KV-cache use per pod) or ttft (each pod's p95 time to first token over a window)"
	RuleQueueTargetMetric     = `!has(self.targetQueueLength) || !has(self.metric) || self.metric == 'queue'`
	RuleQueueTargetMetricMsg  = "spec.autoscaling.targetQueueLength is the target of metric queue; with metric kvCache set targetKVCacheUsagePercent, with metric ttft targetTTFTMilliseconds"
	RuleKVTargetMetric        = `!has(self.targetKVCacheUsagePercent) || (has(self.metric) && self.metric == 'kvCache')`
	RuleKVTargetMetricMsg     = "spec.autoscaling.targetKVCacheUsagePercent is the target of metric kvCache: set metric: kvCache, or targetQueueLength for the queue"
	RuleKVTarget              = `self >= 1 && self <= 90`
	RuleKVTargetMsg           = "spec.autoscaling.targetKVCacheUsagePercent must be between 1 and 90: the HPA scales up only when the reading passes the target by its tolerance (10%), and KV-cache use cannot pass 100%"
	RuleTTFTTargetMetric      = `!has(self.targetTTFTMilliseconds) || (has(self.metric) && self.metric == 'ttft')`
	RuleTTFTTargetMetricMsg   = "spec.autoscaling.targetTTFTMilliseconds is the objective of metric ttft: set metric: ttft, or the target of your metric (targetQueueLength, targetKVCacheUsagePercent)"
	RuleTTFTWindowMetric      = `!has(self.ttftWindowSeconds) || (has(self.metric) && self.metric == 'ttft')`
	RuleTTFTWindowMetricMsg   = "spec.autoscaling.ttftWindowSeconds is the window of metric ttft's p95: set metric: ttft, or drop it"
	RuleTTFTTarget            = `self >= 10 && self <= 60000`
	RuleTTFTTargetMsg         = "spec.autoscaling.targetTTFTMilliseconds must be between 10 and 60000: under 10 ms no replica count meets it (a prefill takes longer), over a minute is no interactive objective"
	RuleTTFTWindow            = `self >= 15 && self <= 600`
	RuleTTFTWindowMsg         = "spec.autoscaling.ttftWindowSeconds must be between 15 and 600: a shorter window holds too few requests and HPA syncs (every 15 s) to be a p95, a longer one sees a ramp too late"
	RuleScaleDownDelay        = `self >= 0 && self <= 3600`
	RuleScaleDownDelayMessage = "spec.autoscaling.scaleDownDelaySeconds must be between 0 and 3600: it is the HPA's scale-down stabilization window, which the HPA API bounds to one hour"
)

// spec.parallelism's rules: the split of the replica's GPUs, on one node or over spec.multiNode's.
const (
	RuleParallelismGPUs    = `!has(self.parallelism) || self.parallelism.tensorParallelSize * self.parallelism.pipelineParallelSize == ` + ruleG
	RuleParallelismGPUsMsg = "spec.parallelism: tensorParallelSize x pipelineParallelSize must equal spec.gpusPerReplica (vLLM places one model shard per GPU): for 6 GPUs, 2 x 3 or 1 x 6"
	RuleParallelismOnce    = `!has(self.parallelism) || !has(self.multiNode) || !(has(self.multiNode.tensorParallelSize) || has(self.multiNode.pipelineParallelSize))`
	RuleParallelismOnceMsg = "spec.parallelism and spec.multiNode.tensorParallelSize/pipelineParallelSize split the same GPUs: set one of them (spec.parallelism applies across spec.multiNode's nodes too)"
)

// spec.engine's rules: fixed once set, and what SGLang does not support here refused in its
// words. ruleEngine is spec.engine with its default, inside the spec-level rules (the schema
// defaults it, but an object read back from before the field has none).
const (
	ruleEngine         = `(has(self.engine) ? self.engine : '` + EngineVLLM + `')`
	RuleEngineFixed    = `self == oldSelf`
	RuleEngineFixedMsg = "spec.engine cannot be changed: a model's pods, metrics and adapters are its engine's; create another InferenceService on the other engine (and move the route to it), then delete this one"
	RuleSGLangS3       = `!(` + ruleEngine + ` == '` + EngineSGLang + `' && has(self.cache) && has(self.cache.source) && self.cache.source.startsWith('s3://'))`
	RuleSGLangS3Msg    = "spec.cache.source: an s3:// source is not supported with spec.engine sglang: its fill Job copies the bucket with boto3 in the model's image, and SGLang's image ships no boto3 (none of sglang's runtime dependencies needs it); fill the cache from the Hugging Face Hub (no source), or serve weights from a claim of yours (pvc://)"
)

// notOneOf is the CEL condition that the list item a is none of o's flags.
func notOneOf(o OwnedArg) string { return "!a.matches('" + o.Pattern + "')" }

// engineRules are the spec-level rules of every engine's tables, each guarded by spec.engine so
// that only the chosen engine's apply: its refused flags and variables, and those refused only
// while spec.adapters is not empty. Each rule's error is reported at spec.engineArgs or
// spec.env.
func engineRules() apiextensionsv1.ValidationRules {
	const noAdapters = "!has(self.adapters) || size(self.adapters) == 0 || "
	var rules apiextensionsv1.ValidationRules
	for _, name := range Engines {
		r := Refused(name)
		other := ruleEngine + " != '" + name + "' || "
		for _, a := range r.Args {
			rules = append(rules, apiextensionsv1.ValidationRule{Rule: other + "!has(self.engineArgs) || self.engineArgs.all(a, " + notOneOf(a) + ")",
				Message: a.Message, FieldPath: ".engineArgs"})
		}
		for _, e := range r.Env {
			rules = append(rules, apiextensionsv1.ValidationRule{Rule: other + "!has(self.env) || self.env.all(e, e.name != '" + e.Name + "')",
				Message: e.Message, FieldPath: ".env"})
		}
		for _, a := range r.ArgsWithAdapters {
			rules = append(rules, apiextensionsv1.ValidationRule{Rule: other + noAdapters + "!has(self.engineArgs) || self.engineArgs.all(a, " + notOneOf(a) + ")",
				Message: a.Message, FieldPath: ".engineArgs"})
		}
		for _, e := range r.EnvWithAdapters {
			rules = append(rules, apiextensionsv1.ValidationRule{Rule: other + noAdapters + "!has(self.env) || self.env.all(e, e.name != '" + e.Name + "')",
				Message: e.Message, FieldPath: ".env"})
		}
	}
	return append(rules,
		apiextensionsv1.ValidationRule{Rule: RuleSGLangS3, Message: RuleSGLangS3Msg, FieldPath: ".cache"})
}

// engineFeatureErrors repeats the rules of what an engine does not support here.
func engineFeatureErrors(e *SpecExtensions) []string {
	if e.EngineName() != EngineSGLang {
		return nil
	}
	var errs []string
	if _, _, s3 := e.Cache.S3(); s3 {
		errs = append(errs, RuleSGLangS3Msg)
	}
	return errs
}
