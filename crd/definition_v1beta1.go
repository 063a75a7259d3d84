package crd

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// CEL rules of v1beta1 and their messages; tests break each one and expect its message.
const (
	RuleBaseModel                = `!self.startsWith('-')`
	RuleBaseModelMessage         = "spec.baseModel must not start with '-': it is passed to vLLM as the --model argument"
	RuleAdapterNamesUnique       = `self.all(a, self.exists_one(b, b.name == a.name))`
	RuleAdapterNamesUniqueMsg    = "spec.adapters: adapter names must be unique"
	RuleMinLEMax                 = `self.minReplicas <= self.maxReplicas`
	RuleMinLEMaxMessage          = "spec.autoscaling.minReplicas must be less than or equal to spec.autoscaling.maxReplicas"
	RuleReplicasXorAutoscaling   = `has(self.replicas) != has(self.autoscaling)`
	RuleReplicasXorAutoscalingMs = "exactly one of spec.replicas and spec.autoscaling must be set"
)

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
			{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas", Description: "Fixed replicas"},
			{Name: "Min", Type: "integer", JSONPath: ".spec.autoscaling.minReplicas", Description: "Autoscaling lower bound"},
			{Name: "Max", Type: "integer", JSONPath: ".spec.autoscaling.maxReplicas", Description: "Autoscaling upper bound"},
			{Name: "Ready", Type: "integer", JSONPath: ".status.readyReplicas", Description: "Replicas ready to serve"},
			{Name: "Phase", Type: "string", JSONPath: ".status.phase", Description: "Progressing, Ready, Failed or Terminating"},
			{Name: "Reason", Type: "string", JSONPath: ".status.reason", Description: "Why the model is not Ready, if it is not"},
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
	base.Description = "The base model vLLM serves, passed as its --model argument: a Hugging Face id such as Qwen/Qwen3-0.6B, or a path. Required."
	base.XValidations = apiextensionsv1.ValidationRules{{Rule: RuleBaseModel, Message: RuleBaseModelMessage}}
	delete(props, "model")
	props["baseModel"] = base

	replicas := props["replicas"]
	replicas.Description = fmt.Sprintf("Fixed model server pods, 0 to %d; the HPA scales between max(1, replicas/2) and 3 x replicas, 0 scales to zero. Exactly one of replicas and autoscaling.", MaxReplicas)
	props["replicas"] = replicas

	bound := func(desc string, lo float64) apiextensionsv1.JSONSchemaProps {
		hi := float64(MaxReplicas)
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Description: desc, Minimum: &lo, Maximum: &hi}
	}
	props["autoscaling"] = apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "HPA bounds on vLLM's num_requests_waiting, instead of deriving them from replicas. Exactly one of replicas and autoscaling.",
		Required:    []string{"minReplicas", "maxReplicas"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"minReplicas":       bound("Lower bound of the HPA.", 1),
			"maxReplicas":       bound("Upper bound of the HPA; at least minReplicas.", 1),
			"targetQueueLength": bound("Target average of num_requests_waiting per pod.", 1),
		},
		XValidations: apiextensionsv1.ValidationRules{{Rule: RuleMinLEMax, Message: RuleMinLEMaxMessage}},
	}

	adapterName := apiextensionsv1.JSONSchemaProps{
		Type: "string", Description: "The adapter's model name in the OpenAI API; unique in the list.",
		MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](63), Pattern: `^[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$`,
	}
	uri := apiextensionsv1.JSONSchemaProps{
		Type: "string", Description: "Where the adapter's weights are: a Hugging Face id (hf://), an s3:// URI or a path.",
		MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](int64(maxString)), Pattern: `^\S+$`,
	}
	props["adapters"] = apiextensionsv1.JSONSchemaProps{
		Type:        "array",
		Description: "LoRA adapters served on top of the base model.",
		MaxItems:    ptr.To[int64](MaxAdapters),
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Description: "A LoRA adapter.", Required: []string{"name", "storageURI"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": adapterName, "storageURI": uri},
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
		},
	}

	spec.Required = []string{"baseModel"}
	spec.XValidations = apiextensionsv1.ValidationRules{{Rule: RuleReplicasXorAutoscaling, Message: RuleReplicasXorAutoscalingMs}}
	s.Properties["spec"] = spec

	status := s.Properties["status"]
	status.Properties["loadedAdapters"] = apiextensionsv1.JSONSchemaProps{
		Type: "array", Description: "Adapters the model server has loaded.",
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}},
	}
	status.Properties["endpoint"] = apiextensionsv1.JSONSchemaProps{Type: "string", Description: "The model's OpenAI-compatible URL inside the cluster."}
	s.Properties["status"] = status
	return s
}

// In-cluster conversion webhook Service, as manifests/overlays/v1beta1 installs it.
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
