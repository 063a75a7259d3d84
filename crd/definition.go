package crd

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// CEL rules and their messages; tests create objects that break each one and expect its message.
const (
	RuleName                       = `self.metadata.name.size() <= 50 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')`
	RuleNameMessage                = "metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter) of at most 50 characters, so every child name derived from it (Deployment, Service, HPA, pods) is valid"
	RuleModel                      = `!self.startsWith('-')`
	RuleModelMessage               = "spec.model must not start with '-': it is passed to vllm serve as the model argument"
	RuleResourceKeys               = `self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'])`
	RuleResourceKeysMessage        = "only cpu, memory and ephemeral-storage may be set here; GPUs come from spec.gpusPerReplica and spec.resources.gpuResourceName"
	RuleLimitsCoverRequests        = `!has(self.requests) || !has(self.limits) || self.limits.all(k, !(k in self.requests) || quantity(string(self.limits[k])).compareTo(quantity(string(self.requests[k]))) >= 0)`
	RuleLimitsCoverRequestsMessage = "each limit in spec.resources.limits must be at least its request in spec.resources.requests"
)

// Definition returns the CustomResourceDefinition for InferenceService; manifests/crd is
// generated from it and a test fails when the two drift.
func Definition() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   Plural + "." + Group,
			Labels: map[string]string{"app.kubernetes.io/name": "inferenceservice-operator"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: Plural, Singular: Singular, Kind: Kind, ListKind: Kind + "List",
				ShortNames: []string{ShortName}, Categories: []string{"all", "ai"},
			},
			Scope:    apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{versionV1alpha1()},
		},
	}
}

func versionV1alpha1() apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{
		Name: Version, Served: true, Storage: true,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: openAPISchema()},
		Subresources: &apiextensionsv1.CustomResourceSubresources{
			Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
			Scale: &apiextensionsv1.CustomResourceSubresourceScale{
				SpecReplicasPath:   ".spec.replicas",
				StatusReplicasPath: ".status.replicas",
				LabelSelectorPath:  ptr.To(".status.selector"),
			},
		},
		AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Model", Type: "string", JSONPath: ".spec.model", Description: "The model served"},
			{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas", Description: "Desired replicas"},
			{Name: "Ready", Type: "integer", JSONPath: ".status.readyReplicas", Description: "Replicas ready to serve"},
			{Name: "Phase", Type: "string", JSONPath: ".status.phase", Description: "Progressing, Ready, Failed or Terminating"},
			{Name: "Reason", Type: "string", JSONPath: ".status.reason", Description: "Why the model is not Ready, if it is not"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	}
}

func openAPISchema() *apiextensionsv1.JSONSchemaProps {
	str := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
	}
	i32 := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Description: desc}
	}
	i64 := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64", Description: desc}
	}
	bounded := func(p apiextensionsv1.JSONSchemaProps, lo, hi float64) apiextensionsv1.JSONSchemaProps {
		p.Minimum, p.Maximum = &lo, &hi
		return p
	}
	text := func(p apiextensionsv1.JSONSchemaProps, max int64) apiextensionsv1.JSONSchemaProps {
		p.MinLength, p.MaxLength, p.Pattern = ptr.To[int64](1), &max, `^\S+$`
		return p
	}

	model := text(str("The model vLLM serves, passed to vllm serve as its model argument: a Hugging Face id such as Qwen/Qwen3-0.6B, or a path. Required."), int64(maxString))
	model.XValidations = apiextensionsv1.ValidationRules{{Rule: RuleModel, Message: RuleModelMessage}}

	gpus := bounded(i32(fmt.Sprintf("GPUs (nvidia.com/gpu) requested by each replica; 0 to %d, default %d.", MaxGPUsPerReplica, DefaultGPUsPerReplica)), 0, MaxGPUsPerReplica)
	gpus.Default = &apiextensionsv1.JSON{Raw: []byte(fmt.Sprint(DefaultGPUsPerReplica))}

	// No schema default: v1beta1's default follows spec.engine (InferenceServiceSpec.ImageFor),
	// and a default here would write vLLM's image into an SGLang model updated through v1alpha1.
	image := text(str("The model server container image; unset, "+DefaultImage+" (the operator's pinned vLLM). Models created before it was resolved by the operator carry it in their spec."), int64(maxString))

	condition := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "A standard Kubernetes condition.",
		Required:    []string{"type", "status", "lastTransitionTime", "reason", "message"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"type":               str("Type of the condition: Ready, Progressing, GatewayRegistered, AutoscalingActive, AdaptersReady."),
			"status":             {Type: "string", Description: "True, False or Unknown.", Enum: enumOf("True", "False", "Unknown")},
			"observedGeneration": i64("The spec generation the condition was set for."),
			"lastTransitionTime": {Type: "string", Format: "date-time", Description: "When the status last changed."},
			"reason":             str("A CamelCase reason for the condition's last transition."),
			"message":            str("A human-readable explanation: which layer and object, and why."),
		},
	}

	quantity := apiextensionsv1.JSONSchemaProps{
		AnyOf:        []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}},
		XIntOrString: true,
		Pattern:      `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`,
	}
	resourceList := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{
			Type: "object", Description: desc, MaxProperties: ptr.To[int64](3),
			AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &quantity},
			XValidations:         apiextensionsv1.ValidationRules{{Rule: RuleResourceKeys, Message: RuleResourceKeysMessage}},
		}
	}
	k8sName := func(desc string, max int64) apiextensionsv1.JSONSchemaProps {
		p := str(desc)
		p.MaxLength, p.Pattern = &max, `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
		return p
	}
	gpuName := str("Extended resource GPUs are requested as; default nvidia.com/gpu (for example amd.com/gpu).")
	gpuName.MaxLength, gpuName.Pattern = ptr.To[int64](253), `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$`

	return &apiextensionsv1.JSONSchemaProps{
		Type:         "object",
		Description:  "InferenceService serves an LLM with vLLM: the operator derives a Deployment, a Service on port 8000 and a HorizontalPodAutoscaler on num_requests_waiting, and reports in status why the model is or is not serving.",
		Required:     []string{"spec"},
		XValidations: apiextensionsv1.ValidationRules{{Rule: RuleName, Message: RuleNameMessage}},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": str("APIVersion defines the versioned schema of this representation of an object."),
			"kind":       str("Kind is a string value representing the REST resource this object represents."),
			"metadata":   {Type: "object"},
			"spec": {
				Type:        "object",
				Description: "What the user wants served. The operator never writes it.",
				Required:    []string{"model", "replicas"},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"model":             model,
					"replicas":          bounded(i32(fmt.Sprintf("Desired model server pods, 0 to %d. The HPA scales between max(1, replicas/2) and 3 x replicas; 0 scales the model to zero and removes the HPA. Required.", MaxReplicas)), 0, MaxReplicas),
					"gpusPerReplica":    gpus,
					"image":             image,
					"priorityClassName": k8sName("PriorityClass of the model's pods: a high one for online serving, with preemption, and a low one for offline work.", 253),
					"queueName":         k8sName("Kueue LocalQueue that admits the model's pods (sets the kueue.x-k8s.io/queue-name label), so online and offline work can share a quota.", 63),
					"resources": {
						Type:        "object",
						Description: "Overrides for the model server container's resources.",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"requests":        resourceList("CPU, memory and ephemeral-storage requests; default cpu 2 and memory 10Gi for one GPU plus 4Gi per further GPU (vLLM's processes while loading, and the 2Gi /dev/shm charged to the pod), so a namespace with a quota on them admits the pods."),
							"limits":          resourceList("CPU, memory and ephemeral-storage limits; none by default. Size memory for the load peak, not the steady state."),
							"gpuResourceName": gpuName,
						},
						XValidations: apiextensionsv1.ValidationRules{{Rule: RuleLimitsCoverRequests, Message: RuleLimitsCoverRequestsMessage}},
					},
				},
			},
			"status": {
				Type:        "object",
				Description: "What the operator observed. Written only by the operator, through the status subresource.",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"observedGeneration": i64("The metadata.generation this status was computed for."),
					"replicas":           i32("Pods the Deployment currently has."),
					"readyReplicas":      i32("Pods ready to serve."),
					"selector":           str("Label selector of the model's pods, for the scale subresource."),
					"phase":              {Type: "string", Description: "Progressing, Ready, Failed or Terminating.", Enum: enumOf(string(PhaseProgressing), string(PhaseReady), string(PhaseFailed), string(PhaseTerminating))},
					"reason":             str("The reason of the most blocking condition while not Ready."),
					"conditions": {
						Type:         "array",
						Description:  "Standard conditions: Ready, Progressing, GatewayRegistered, AutoscalingActive, AdaptersReady.",
						XListType:    ptr.To("map"),
						XListMapKeys: []string{"type"},
						Items:        &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &condition},
					},
					"history": {
						Type:        "array",
						Description: fmt.Sprintf("The last %d diagnoses (failures, queueing, and the recoveries after them), oldest first: kept after the Events expire.", MaxHistory),
						MaxItems:    ptr.To(int64(MaxHistory)),
						XListType:   ptr.To("atomic"),
						Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
							Type:     "object",
							Required: []string{"time", "phase", "reason"},
							Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"time":    {Type: "string", Format: "date-time", Description: "When the operator first saw the diagnosis."},
								"phase":   str("The phase then."),
								"reason":  str("The reason then (Available for a recovery)."),
								"message": {Type: "string", Description: "The condition's message then.", MaxLength: ptr.To(int64(MaxHistoryMessage))},
							},
						}},
					},
				},
			},
		},
	}
}

func enumOf(values ...string) []apiextensionsv1.JSON {
	out := make([]apiextensionsv1.JSON, len(values))
	for i, v := range values {
		out[i] = apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)}
	}
	return out
}
