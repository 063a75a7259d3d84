package crd

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine/sglang"
)

// sglangImage is SGLang's image, for the schema's descriptions.
const sglangImage = sglang.Image

// WebhookPath is where the operator serves ConversionReviews.
const WebhookPath = "/convert"

// DefinitionWithV1beta1 returns the CRD serving v1alpha1 and v1beta1, the storage version,
// converted by the operator's webhook at clientConfig. The default install (Definition)
// serves v1alpha1 only and needs no webhook. Objects stored as v1alpha1 before are rewritten
// by the operator's storage migration (package crd/storage).
func DefinitionWithV1beta1(clientConfig apiextensionsv1.WebhookClientConfig) *apiextensionsv1.CustomResourceDefinition {
	d := Definition()
	d.Spec.Versions[0].Storage = false
	d.Spec.Versions = append(d.Spec.Versions, versionV1beta1())
	d.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &clientConfig,
			ConversionReviewVersions: []string{"v1"},
		},
	}
	return d
}

func versionV1beta1() apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{
		Name: VersionV1beta1, Served: true, Storage: true,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: openAPISchemaV1beta1()},
		Subresources: &apiextensionsv1.CustomResourceSubresources{
			Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
			// kubectl scale sets spec.replicas; on an autoscaled object the XOR rule refuses it.
			Scale: &apiextensionsv1.CustomResourceSubresourceScale{
				SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptr.To(".status.selector"),
			},
		},
		AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Base Model", Type: "string", JSONPath: ".spec.baseModel", Description: "The base model served"},
			{Name: "Engine", Type: "string", JSONPath: ".spec.engine", Description: "The model server: vllm or sglang"},
			{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas", Description: "Fixed replicas"},
			{Name: "Min", Type: "integer", JSONPath: ".spec.autoscaling.minReplicas", Description: "Autoscaling lower bound"},
			{Name: "Max", Type: "integer", JSONPath: ".spec.autoscaling.maxReplicas", Description: "Autoscaling upper bound"},
			{Name: "Ready", Type: "integer", JSONPath: ".status.readyReplicas", Description: "Replicas ready to serve"},
			{Name: "Phase", Type: "string", JSONPath: ".status.phase", Description: "Progressing, Ready, Failed or Terminating"},
			{Name: "Reason", Type: "string", JSONPath: ".status.reason", Description: "Why the model is not Ready, if it is not"},
			{Name: "Rollout", Type: "string", JSONPath: ".status.rollout.phase", Description: "The last canary rollout: Progressing, Promoted or RolledBack", Priority: 0},
			{Name: "Step", Type: "integer", JSONPath: ".status.rollout.step", Description: "The canary rollout's step (of status.rollout.steps)", Priority: 1},
			{Name: "Canary", Type: "integer", JSONPath: ".status.rollout.weight", Description: "Percent of the route's requests to the canary", Priority: 1},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	}
}

// openAPISchemaV1beta1 is the v1alpha1 schema with model renamed baseModel and the v1beta1
// additions; shared fields keep one definition.
func openAPISchemaV1beta1() *apiextensionsv1.JSONSchemaProps {
	s := openAPISchema()
	spec := s.Properties["spec"]
	props := spec.Properties

	base := props["model"]
	base.Description = "The base model vLLM serves, passed to vllm serve as its model argument: a Hugging Face id such as Qwen/Qwen3-0.6B, or a path. Required."
	base.XValidations = apiextensionsv1.ValidationRules{{Rule: RuleBaseModel, Message: RuleBaseModelMessage}}
	delete(props, "model")
	props["baseModel"] = base

	props["engine"] = apiextensionsv1.JSONSchemaProps{
		Type: "string", Enum: enumOf(Engines...), Default: &apiextensionsv1.JSON{Raw: []byte(`"` + EngineVLLM + `"`)},
		Description:  "The model server: vllm (vLLM v0.11, the default) or sglang (SGLang v0.5.3, python3 -m sglang.launch_server). It chooses the container's command line, its image when spec.image is unset, the flags spec.engineArgs may not carry, the autoscaler's queue metric and the readers of its logs. Fixed at creation. With sglang, an s3:// spec.cache.source is refused (see the README's engine table).",
		XValidations: apiextensionsv1.ValidationRules{{Rule: RuleEngineFixed, Message: RuleEngineFixedMsg}},
	}
	image := props["image"]
	image.Description = "The model server container image; unset, the engine's: " + DefaultImage + " for vllm, " + sglangImage + " for sglang. An unset image follows the operator's pin, so an operator that pins a newer release rolls the model's pods; set it to hold a version."
	props["image"] = image

	replicas := props["replicas"]
	replicas.Description = fmt.Sprintf("Fixed model server pods, 0 to %d; the HPA scales between max(1, replicas/2) and 3 x replicas, 0 scales to zero. Exactly one of replicas and autoscaling.", MaxReplicas)
	props["replicas"] = replicas

	bound := func(desc string, lo float64) apiextensionsv1.JSONSchemaProps {
		hi := float64(MaxReplicas)
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Description: desc, Minimum: &lo, Maximum: &hi}
	}
	props["autoscaling"] = apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "HPA bounds and signal (by default the engine's queue: vLLM's num_requests_waiting, SGLang's num_queue_reqs), instead of deriving them from replicas. Exactly one of replicas and autoscaling.",
		Required:    []string{"minReplicas", "maxReplicas"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"minReplicas":       bound("Lower bound of the HPA; 0 scales the model to zero after idleSeconds without a request, and back up on the next request, which the activator holds meanwhile.", 0),
			"maxReplicas":       bound("Upper bound of the HPA; at least minReplicas.", 1),
			"targetQueueLength": bound("Target average of the engine's queue per pod (num_requests_waiting, num_queue_reqs), with metric queue; default 3.", 1),
			"metric": {
				Type: "string", MaxLength: ptr.To[int64](16),
				Description:  "The signal the HPA scales on, read from each pod's /metrics by the operator's metrics adapter: queue (the default) is the engine's waiting requests per pod (target: targetQueueLength); kvCache is the engine's KV-cache use per pod, which rises with the requests running and their lengths before a queue forms (vLLM's kv_cache_usage_perc, SGLang's token_usage; target: targetKVCacheUsagePercent).",
				XValidations: apiextensionsv1.ValidationRules{{Rule: RuleAutoscalingMetric, Message: RuleAutoscalingMetricMsg}},
			},
			"targetKVCacheUsagePercent": {
				Type: "integer", Format: "int32",
				Description:  fmt.Sprintf("With metric kvCache: the target average share of each pod's KV cache in use, in percent, %d to %d; default %d. The HPA adds pods when the average passes it by the HPA's tolerance (10%%).", MinTargetKVCacheUsagePercent, MaxTargetKVCacheUsagePercent, DefaultTargetKVCacheUsagePercent),
				XValidations: apiextensionsv1.ValidationRules{{Rule: RuleKVTarget, Message: RuleKVTargetMsg}},
			},
			// A CEL rule rather than minimum/maximum: one error that says what the bound is for.
			"scaleDownDelaySeconds": {
				Type: "integer", Format: "int32",
				Description:  fmt.Sprintf("Seconds the HPA waits before removing a pod, 0 to %d: its scale-down stabilization window (spec.behavior.scaleDown.stabilizationWindowSeconds), so a burst that ends does not drop loaded replicas at once. Unset: the HPA controller's default, 300 unless the cluster changed it. Scaling up has no window (the HPA's default).", MaxScaleDownDelaySeconds),
				XValidations: apiextensionsv1.ValidationRules{{Rule: RuleScaleDownDelay, Message: RuleScaleDownDelayMessage}},
			},
			"idleSeconds": {
				Type: "integer", Format: "int32",
				Description:  fmt.Sprintf("With minReplicas 0: seconds without a request before the model is scaled to zero, %d to %d; default %d. Requests must come through the activator (the model's gateway route, or the activator's /NAMESPACE/NAME/ path) for the operator to see them.", MinIdleSeconds, MaxIdleSeconds, DefaultIdleSeconds),
				XValidations: apiextensionsv1.ValidationRules{{Rule: RuleIdleSeconds, Message: RuleIdleSecondsMessage}},
			},
		},
		XValidations: apiextensionsv1.ValidationRules{{Rule: RuleMinLEMax, Message: RuleMinLEMaxMessage}, {Rule: RuleIdleNeedsZero, Message: RuleIdleNeedsZeroMessage},
			{Rule: RuleQueueTargetMetric, Message: RuleQueueTargetMetricMsg}, {Rule: RuleKVTargetMetric, Message: RuleKVTargetMetricMsg}},
	}

	adapterName := apiextensionsv1.JSONSchemaProps{
		Type: "string", Description: "The adapter's model name in the OpenAI API; unique in the list.",
		MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](63), Pattern: `^[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$`,
	}
	uri := apiextensionsv1.JSONSchemaProps{
		Type: "string", Description: "Where the adapter's weights are: a Hugging Face repository (hf://org/name) or a path inside the pod (/path, file:///path), which vLLM loads itself. Other schemes (s3://, gs://, http(s)://) are reported in the AdaptersReady condition (AdapterSourceUnsupported) and not loaded.",
		MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](int64(maxString)), Pattern: `^\S+$`,
	}
	props["adapters"] = apiextensionsv1.JSONSchemaProps{
		Type:        "array",
		Description: "LoRA adapters served on top of the base model.",
		MaxItems:    ptr.To[int64](MaxAdapters),
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Description: "A LoRA adapter.", Required: []string{"name", "storageURI"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": adapterName, "storageURI": uri, "rank": {
				Type: "integer", Format: "int32", Minimum: ptr.To[float64](1), Maximum: ptr.To[float64](MaxAdapterRank),
				Description: fmt.Sprintf("The adapter's LoRA rank (r in its adapter_config.json), 1 to %d. vLLM refuses an adapter of a larger rank than its --max-lora-rank (16 by default); the operator starts the server with the smallest rank vLLM offers that fits every listed adapter, so raising the largest above 16 restarts the pods once. Unset: 16 at most.", MaxAdapterRank),
			}},
		}},
		XValidations: apiextensionsv1.ValidationRules{{Rule: RuleAdapterNamesUnique, Message: RuleAdapterNamesUniqueMsg}},
	}

	route := apiextensionsv1.JSONSchemaProps{
		Type: "string", Description: "Path prefix of the model's route; default /{namespace}/{name}.",
		MaxLength: ptr.To[int64](253), Pattern: `^/\S*$`,
	}
	lo, hi := 0.0, 1000.0
	props["gateway"] = apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "The model's route on the gateway.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"route":    route,
			"priority": {Type: "integer", Format: "int32", Description: "Order of overlapping routes, 0 to 1000; higher wins.", Minimum: &lo, Maximum: &hi},
			"timeouts": routeTimeoutsSchema(),
		},
	}

	gpus := props["gpusPerReplica"]
	gpus.Description = fmt.Sprintf("GPUs each replica requests, default %d: at most %d on one node, up to %d with spec.multiNode (split evenly over its nodes). vLLM splits the model over them tensor parallel, unless spec.parallelism says otherwise.", DefaultGPUsPerReplica, MaxGPUsPerReplica, MaxGPUsPerReplica*MaxNodesPerReplica)
	gpus.Maximum = ptr.To(float64(MaxGPUsPerReplica * MaxNodesPerReplica))
	props["gpusPerReplica"] = gpus
	nodesLo, nodesHi, parHi := 2.0, float64(MaxNodesPerReplica), float64(MaxParallelSize)
	props["parallelism"] = apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "How vLLM splits a replica's GPUs: tensorParallelSize x pipelineParallelSize must equal gpusPerReplica. Unset, every GPU is tensor parallel (or spec.multiNode's defaults). Tensor parallel must divide the model's attention heads, so most models crash on 3 or 6 GPUs that way; pipeline parallel splits the layers into stages, which need not divide evenly, as vLLM advises for uneven splits: {tensorParallelSize: 2, pipelineParallelSize: 3} for 6 GPUs, {tensorParallelSize: 1, pipelineParallelSize: 3} for 3. On one node the stages run in the same pod (vLLM's multiprocessing executor). The model must support pipeline parallel in vLLM (SupportsPP), and --async-scheduling does not work with it.",
		Required:    []string{"tensorParallelSize", "pipelineParallelSize"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"tensorParallelSize":   {Type: "integer", Format: "int32", Minimum: ptr.To(1.0), Maximum: &parHi, Description: "vLLM's --tensor-parallel-size: the GPUs each layer is split over; it must divide the model's attention heads."},
			"pipelineParallelSize": {Type: "integer", Format: "int32", Minimum: ptr.To(1.0), Maximum: &parHi, Description: "vLLM's --pipeline-parallel-size: the stages the model's layers are divided into, one after the other."},
		},
	}
	props["multiNode"] = apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "Spread each replica over several nodes, for a model larger than one node: the replica becomes a LeaderWorkerSet group of one pod per node (the leader serves the API on 8000, the workers join it through Ray), which needs LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) installed. spec.gpusPerReplica is split evenly over the nodes.",
		Required:    []string{"nodes"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"nodes":                {Type: "integer", Format: "int32", Minimum: &nodesLo, Maximum: &nodesHi, Description: fmt.Sprintf("Nodes (pods) one replica spans, 2 to %d.", MaxNodesPerReplica)},
			"tensorParallelSize":   {Type: "integer", Format: "int32", Minimum: ptr.To(1.0), Maximum: &parHi, Description: "vLLM's --tensor-parallel-size; default the GPUs of one node (gpusPerReplica / nodes)."},
			"pipelineParallelSize": {Type: "integer", Format: "int32", Minimum: ptr.To(1.0), Maximum: &parHi, Description: "vLLM's --pipeline-parallel-size; default nodes. tensorParallelSize x pipelineParallelSize must equal gpusPerReplica."},
		},
	}

	props["engineArgs"] = engineArgsSchema()
	props["env"] = envSchema()
	props["cache"] = cacheSchema()
	placementSchema(props)
	lo32, hi32 := float64(MinStartupTimeoutSeconds), float64(MaxStartupTimeoutSeconds)
	props["startupTimeoutSeconds"] = apiextensionsv1.JSONSchemaProps{
		Type: "integer", Format: "int32", Minimum: &lo32, Maximum: &hi32,
		Description: fmt.Sprintf("Seconds a pod may take to download and load the weights before its port opens (the startup probe's budget); default %d. Size it to the model and the link: with spec.cache only the first start downloads.", DefaultStartupTimeoutSeconds),
	}

	spec.Required = []string{"baseModel"}
	spec.XValidations = apiextensionsv1.ValidationRules{
		{Rule: RuleReplicasXorAutoscaling, Message: RuleReplicasXorAutoscalingMs},
		{Rule: RuleEnvHFHomeWithCache, Message: RuleEnvHFHomeWithCacheMsg},
		{Rule: RuleCacheS3HubAdapters, Message: RuleCacheS3HubAdaptersMsg},
		{Rule: RuleOneNodeGPUs, Message: RuleOneNodeGPUsMsg},
		{Rule: RuleMultiNodeGPUs, Message: RuleMultiNodeGPUsMsg},
		{Rule: RuleMultiNodePerNode, Message: RuleMultiNodePerNodeMsg},
		{Rule: RuleMultiNodeParallel, Message: RuleMultiNodeParallelMsg},
		{Rule: RuleParallelismGPUs, Message: RuleParallelismGPUsMsg},
		{Rule: RuleParallelismOnce, Message: RuleParallelismOnceMsg},
		{Rule: RuleZeroNotMultiNode, Message: RuleZeroNotMultiNodeMsg},
		{Rule: RuleTimeoutHoldsColdStart, Message: RuleTimeoutHoldsColdStartMs},
	}
	spec.XValidations = append(spec.XValidations, engineRules()...)
	props["rollout"] = rolloutSchema()
	spec.XValidations = append(spec.XValidations, rolloutSpecRules()...)
	s.Properties["spec"] = spec

	status := s.Properties["status"]
	status.Properties["loadedAdapters"] = apiextensionsv1.JSONSchemaProps{
		Type: "array", Description: "Adapters the model server has loaded.",
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}},
	}
	status.Properties["endpoint"] = apiextensionsv1.JSONSchemaProps{Type: "string", Description: "The model's OpenAI-compatible URL inside the cluster."}
	status.Properties["modelName"] = apiextensionsv1.JSONSchemaProps{Type: "string", Description: "The name clients send as \"model\" for the base model (vLLM's served model name); adapters are called by their names."}
	status.Properties["routePath"] = apiextensionsv1.JSONSchemaProps{Type: "string", Description: "Path prefix the gateway serves the model's OpenAI API under (clients call <gateway address><routePath>/v1/...); set only while the HTTPRoute is the operator's and a Gateway accepted it."}
	status.Properties["lastColdStart"] = apiextensionsv1.JSONSchemaProps{
		Type: "object", Description: "The last start from zero (spec.autoscaling.minReplicas 0) as the activator measured it.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"arrived":          {Type: "string", Description: "When the first request held for the model arrived (RFC 3339)."},
			"firstByteSeconds": {Type: "number", Description: "Seconds from that arrival to the first byte of its answer."},
		},
	}
	status.Properties["cache"] = apiextensionsv1.JSONSchemaProps{
		Type: "object", Description: "The managed weights cache (spec.cache.size): its claim, its phase (Filling, Filled, Failed) and, while it fills, the bytes downloaded of the total and the rate, read from the fill's log.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"claim":          {Type: "string"},
			"phase":          {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"Filling"`)}, {Raw: []byte(`"Filled"`)}, {Raw: []byte(`"Failed"`)}}},
			"bytes":          {Type: "integer", Format: "int64"},
			"totalBytes":     {Type: "integer", Format: "int64"},
			"bytesPerSecond": {Type: "integer", Format: "int64"},
		},
	}
	status.Properties["lastStart"] = lastStartSchema()
	status.Properties["rollout"] = rolloutStatusSchema()
	s.Properties["status"] = status
	return s
}

// lastStartSchema is status.lastStart's: where the last pod start's time went.
func lastStartSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Type: "object", Description: "Where the last pod start's time went, creation to serving, phase by phase (the pod's conditions and its model server's own start log).",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"pod":          {Type: "string", Description: "The pod that started."},
			"started":      {Type: "string", Description: "The pod's creation (RFC 3339)."},
			"servingAt":    {Type: "string", Description: "When its model server said it serves (RFC 3339)."},
			"totalSeconds": {Type: "number", Description: "Seconds from creation to serving."},
			"phases": {Type: "array", Description: "The parts of the start in order; their seconds add up to totalSeconds.", MaxItems: ptr.To[int64](16),
				Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Required: []string{"name", "seconds"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"name":    {Type: "string", Description: "The phase: scheduled, image pulled, container started, process start, weights download, weights load, model load, torch.compile, CUDA graph capture, engine init, API server start."},
						"seconds": {Type: "number", Description: "The phase's own seconds."},
					},
				}}},
			"slowest": {Type: "string", Description: "The longest phase's name."},
		},
	}
}

// engineArgsSchema is spec.engineArgs'; the flags each engine refuses are spec-level rules
// (engineRules), which see spec.engine.
func engineArgsSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Type:        "array",
		Description: "Extra arguments of spec.engine's server, one list item per token, passed after the operator's: for example [--max-model-len, \"8192\", --gpu-memory-utilization, \"0.9\", --trust-remote-code] for vllm, [--context-length, \"8192\", --mem-fraction-static, \"0.85\"] for sglang. The flags the operator passes are refused, each engine's own: for vllm the model, --port, --host, --tensor-parallel-size, --pipeline-parallel-size, --served-model-name, the LoRA arguments and --distributed-executor-backend, --disable-log-stats (the autoscaler reads vLLM's stats), --data-parallel-size (replicas are spec.replicas) and, with spec.adapters, --api-key, also in the abbreviated and underscored spellings vLLM accepts; for sglang --model-path, --host, --port, --tp-size, --pp-size, --dp-size, --served-model-name, --nnodes, --node-rank, --dist-init-addr and the LoRA arguments, also abbreviated.",
		MaxItems:    ptr.To[int64](MaxEngineArgs),
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "string", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](int64(maxString)),
		}},
	}
}

func envSchema() apiextensionsv1.JSONSchemaProps {
	str := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc, MaxLength: ptr.To[int64](int64(maxString))}
	}
	keyRef := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{
			Type: "object", Description: desc, Required: []string{"key"},
			XMapType: ptr.To("atomic"),
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"name": str("Name of the object in the model's namespace."), "key": str("The key to read."),
				"optional": {Type: "boolean", Description: "Whether the object or key may be missing."},
			},
		}
	}
	return apiextensionsv1.JSONSchemaProps{
		Type:         "array",
		Description:  "Extra environment variables of the model server, as a container's env: HF_TOKEN from a Secret for a gated model, for example. With spec.cache, HF_HOME is the operator's and refused; for vllm so are VLLM_PORT and VLLM_ALLOW_RUNTIME_LORA_UPDATING, and VLLM_API_KEY with spec.adapters.",
		MaxItems:     ptr.To[int64](MaxEnv),
		XListType:    ptr.To("map"),
		XListMapKeys: []string{"name"},
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Description: "An environment variable.", Required: []string{"name"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"name":  {Type: "string", Description: "The variable's name.", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](253), Pattern: `^[-._a-zA-Z][-._a-zA-Z0-9]*$`},
				"value": str("The value; or valueFrom."),
				"valueFrom": {
					Type: "object", Description: "Where the value comes from: a Secret's or ConfigMap's key, or a field of the pod.",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"secretKeyRef":    keyRef("A key of a Secret, such as an HF_TOKEN."),
						"configMapKeyRef": keyRef("A key of a ConfigMap."),
						"fieldRef": {
							Type: "object", Description: "A field of the pod, such as metadata.name.", Required: []string{"fieldPath"},
							XMapType: ptr.To("atomic"),
							Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"apiVersion": str("Version of the fieldPath's schema; default v1."), "fieldPath": str("The field's path."),
							},
						},
					},
				},
			},
		}},
	}
}

// In-cluster conversion webhook Service, as the default install (manifests/components/v1beta1) has it.
const (
	WebhookServiceName      = "inferenceservice-operator-webhook"
	WebhookServiceNamespace = "inferenceservice-system"
)

// InClusterWebhook is the CRD's clientConfig for the operator's webhook Service; the operator
// fills in caBundle.
func InClusterWebhook() apiextensionsv1.WebhookClientConfig {
	return apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
		Namespace: WebhookServiceNamespace, Name: WebhookServiceName, Path: ptr.To(WebhookPath), Port: ptr.To[int32](443),
	}}
}

// cacheSchema is spec.cache: the user's claim (claimName) or a managed one (size and its options).
func cacheSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Description: "A PersistentVolumeClaim keeping Hugging Face downloads, mounted at " + CachePath + " with HF_HOME pointing there, so a restart or a new replica does not download the weights again. " +
			"claimName mounts a claim of yours as it is; size makes it managed: the operator creates (or adopts) a claim named after the weights, shared by the namespace's models on the same weights, fills it once with a Job (huggingface_hub's snapshot_download in the model's image, the files vLLM would fetch), and starts the model's pods only on the filled cache, read-only and offline.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"claimName":        {Type: "string", Description: "Name of a PersistentVolumeClaim in the model's namespace, already holding the weights or filled by the pods.", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](253), Pattern: `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`},
			"size":             {Type: "string", MaxLength: ptr.To[int64](32), Description: "The managed claim's size, a quantity such as 100Gi: the weights and some room."},
			"storageClassName": {Type: "string", MaxLength: ptr.To[int64](253), Description: "The managed claim's StorageClass; the cluster's default when unset."},
			"accessModes": {Type: "array", MaxItems: ptr.To[int64](4), Description: "The managed claim's access modes; default [ReadWriteMany], so replicas on several nodes share it.",
				Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string",
					Enum: []apiextensionsv1.JSON{{Raw: []byte(`"ReadWriteOnce"`)}, {Raw: []byte(`"ReadOnlyMany"`)}, {Raw: []byte(`"ReadWriteMany"`)}, {Raw: []byte(`"ReadWriteOncePod"`)}}}}},
			"source": {Type: "string", MaxLength: ptr.To[int64](1024), Pattern: CacheSourcePattern,
				Description: "Where the weights come from when not the Hugging Face Hub. s3://BUCKET/PREFIX (with size): the fill Job copies the objects under PREFIX with boto3 onto the managed claim, and vLLM serves the directory (" + CachePath + "/s3/BUCKET/PREFIX). pvc://CLAIM/PATH (without claimName or size): the claim of yours is mounted as claimName's is, and vLLM serves the directory PATH in it."},
			"credentialsSecret": {Type: "object", Description: "A Secret in the model's namespace given whole to the s3:// fill as its environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, and for an S3-compatible store AWS_ENDPOINT_URL and AWS_DEFAULT_REGION. Unset: boto3's own chain (workload identity through serviceAccountName).",
				Required: []string{"name"},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"name": {Type: "string", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](253)},
				}},
			"serviceAccountName": {Type: "string", MaxLength: ptr.To[int64](253), Pattern: `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`,
				Description: "The s3:// fill pod's ServiceAccount, for workload identity (IRSA, EKS Pod Identity, GKE): its webhook mounts the token and boto3 reads it. The operator neither creates nor annotates it."},
			"tokenSecret": {Type: "object", Description: "The Secret key holding the Hugging Face token (HF_TOKEN) the fill Job downloads a gated model with.",
				Required: []string{"name", "key"},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"name": {Type: "string", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](253)},
					"key":  {Type: "string", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](253)},
				}},
		},
		XValidations: apiextensionsv1.ValidationRules{
			{Rule: RuleCacheClaimXorSize, Message: RuleCacheClaimXorSizeMsg},
			{Rule: RuleCacheManagedFields, Message: RuleCacheManagedFieldsMsg},
			{Rule: RuleCacheSize, Message: RuleCacheSizeMsg},
			{Rule: RuleCacheS3Fields, Message: RuleCacheS3FieldsMsg},
			{Rule: RuleCacheS3Size, Message: RuleCacheS3SizeMsg},
			{Rule: RuleCacheS3NoToken, Message: RuleCacheS3NoTokenMsg},
			{Rule: RuleCacheSourcePath, Message: RuleCacheSourcePathMsg},
		},
	}
}
