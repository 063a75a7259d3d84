// Placement and identity of the model's pods: where they may run (node selector, tolerations,
// affinity, topology spread, runtime class), what they pull with (imagePullSecrets), who they
// run as (serviceAccountName) and the labels and annotations platforms key on. The fields are
// KServe's predictor spec's, flat under spec, with the shapes of k8s.io/api's PodSpec.

package crd

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// Placement is the pod template fields a platform sets on the model's pods. Each is the
// operator's where set (drift-corrected, removed when the spec drops it) and left to others
// (admission webhooks, a platform's mutations) where not.
type Placement struct {
	// NodeSelector is the pods' node selector: a GPU pool's label, such as
	// cloud.google.com/gke-accelerator: nvidia-l4.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the pods onto tainted nodes (a GPU pool's nvidia.com/gpu:NoSchedule).
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity is the pods' node and pod (anti-)affinity.
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// TopologySpreadConstraints spread the pods over zones or nodes.
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// ImagePullSecrets are Secrets in the model's namespace the kubelet pulls a private image with.
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// ServiceAccountName is the pods' ServiceAccount (a workload identity for object storage;
	// its imagePullSecrets apply too). The fill Job of spec.cache runs as
	// spec.cache.serviceAccountName when set, else as this.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// RuntimeClassName is the pods' RuntimeClass (nvidia, kata ...).
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`
	// PodMetadata are labels and annotations added to the pods; the operator's own are refused.
	PodMetadata *PodMetadata `json:"podMetadata,omitempty"`
}

// PodMetadata is the labels and annotations spec.podMetadata adds to the model's pods.
type PodMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Empty reports whether no placement field is set.
func (p *Placement) Empty() bool {
	return p == nil || (len(p.NodeSelector) == 0 && len(p.Tolerations) == 0 && p.Affinity == nil &&
		len(p.TopologySpreadConstraints) == 0 && len(p.ImagePullSecrets) == 0 && p.ServiceAccountName == "" &&
		p.RuntimeClassName == nil && p.PodMetadata == nil)
}

// DeepCopy copies every map, slice and pointer of p.
func (p Placement) DeepCopy() Placement {
	out := Placement{
		NodeSelector: maps.Clone(p.NodeSelector), ServiceAccountName: p.ServiceAccountName,
		RuntimeClassName: clonePtr(p.RuntimeClassName), ImagePullSecrets: slices.Clone(p.ImagePullSecrets),
	}
	if p.Tolerations != nil {
		out.Tolerations = make([]corev1.Toleration, len(p.Tolerations))
		for i := range p.Tolerations {
			p.Tolerations[i].DeepCopyInto(&out.Tolerations[i])
		}
	}
	if p.TopologySpreadConstraints != nil {
		out.TopologySpreadConstraints = make([]corev1.TopologySpreadConstraint, len(p.TopologySpreadConstraints))
		for i := range p.TopologySpreadConstraints {
			p.TopologySpreadConstraints[i].DeepCopyInto(&out.TopologySpreadConstraints[i])
		}
	}
	out.Affinity = p.Affinity.DeepCopy()
	if m := p.PodMetadata; m != nil {
		out.PodMetadata = &PodMetadata{Labels: maps.Clone(m.Labels), Annotations: maps.Clone(m.Annotations)}
	}
	return out
}

// Bounds of the placement lists, so the CEL rules on them stay within the cost budget.
const (
	MaxTolerations      = 64
	MaxPodMetadataItems = 64
	MaxSpreads          = 16
	MaxPullSecrets      = 16
)

// ReservedLabelPrefixes and ReservedLabels are the label keys the operator's selectors, the
// Kueue and LeaderWorkerSet integrations and the Deployment controller use: a pod carrying one
// of another model's values would join its Service, its NetworkPolicy's peers or its PDB.
var (
	ReservedLabelPrefixes = []string{Group + "/", "leaderworkerset.sigs.k8s.io/", "kueue.x-k8s.io/"}
	ReservedLabels        = []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "pod-template-hash"}
)

// reservedAnnotationDomain: any annotation in the operator's domain (ai.example.com/... and
// its subdomains, such as cache.ai.example.com/...) is the operator's.
const reservedAnnotationDomain = Group

// CEL rules of the placement fields and their messages.
const (
	RulePodLabelsReservedMsg = "spec.podMetadata.labels: keys under ai.example.com/, leaderworkerset.sigs.k8s.io/ and kueue.x-k8s.io/ and app.kubernetes.io/name, app.kubernetes.io/instance, app.kubernetes.io/managed-by and pod-template-hash are the operator's (its Service, NetworkPolicy and PodDisruptionBudget select pods by them; the Kueue queue is spec.queueName)"
	RulePodAnnotationsOwn    = `self.all(k, !k.startsWith('` + reservedAnnotationDomain + `/') && !k.split('/')[0].endsWith('.` + reservedAnnotationDomain + `'))`
	RulePodAnnotationsOwnMsg = "spec.podMetadata.annotations: keys in the ai.example.com domain are the operator's"
	// The API server's own checks on a toleration (ValidateTolerations), refused here rather
	// than when the Deployment controller creates the pods.
	RuleTolerationExists    = `!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''`
	RuleTolerationExistsMsg = "spec.tolerations: value must be empty when `operator` is 'Exists'"
	RuleTolerationKey       = `(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')`
	RuleTolerationKeyMsg    = "spec.tolerations: operator must be Exists when `key` is empty, which means \"match all values and all keys\""
	RuleTolerationSeconds   = `!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')`
	RuleTolerationSecsMsg   = "spec.tolerations: effect must be 'NoExecute' when `tolerationSeconds` is set"
)

// RulePodLabelsReserved refuses ReservedLabelPrefixes and ReservedLabels.
var RulePodLabelsReserved = `self.all(k, !(` + celAny("k.startsWith", ReservedLabelPrefixes) + `) && !(` + celAny("k ==", ReservedLabels) + `))`

// celAny is "f('a') || f('b')" for the values, or "k == 'a' || ..." for an operator.
func celAny(f string, values []string) string {
	parts := make([]string, len(values))
	for i, v := range values {
		if strings.HasSuffix(f, "==") {
			parts[i] = f + " '" + v + "'"
		} else {
			parts[i] = f + "('" + v + "')"
		}
	}
	return strings.Join(parts, " || ")
}

// ReservedLabel reports whether key is a label spec.podMetadata may not set.
func ReservedLabel(key string) bool {
	return slices.Contains(ReservedLabels, key) || slices.ContainsFunc(ReservedLabelPrefixes, func(p string) bool { return strings.HasPrefix(key, p) })
}

// ReservedAnnotation reports whether key is an annotation spec.podMetadata may not set.
func ReservedAnnotation(key string) bool {
	domain, _, _ := strings.Cut(key, "/")
	return strings.HasPrefix(key, reservedAnnotationDomain+"/") || strings.HasSuffix(domain, "."+reservedAnnotationDomain)
}

// placementErrors repeats the placement fields' schema and CEL rules, for an object read
// through v1alpha1 (whose annotation the CRD does not check).
func placementErrors(p *Placement) []string {
	var errs []string
	if len(p.Tolerations) > MaxTolerations {
		errs = append(errs, "spec.tolerations: too many")
	}
	for _, t := range p.Tolerations {
		if t.Operator == corev1.TolerationOpExists && t.Value != "" {
			errs = append(errs, RuleTolerationExistsMsg)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, RuleTolerationKeyMsg)
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, RuleTolerationSecsMsg)
		}
	}
	if m := p.PodMetadata; m != nil {
		for k := range m.Labels {
			if ReservedLabel(k) {
				errs = append(errs, RulePodLabelsReservedMsg)
				break
			}
		}
		for k := range m.Annotations {
			if ReservedAnnotation(k) {
				errs = append(errs, RulePodAnnotationsOwnMsg)
				break
			}
		}
	}
	return errs
}

// placementSchema adds the placement fields to v1beta1's spec properties. The core types'
// shapes are read from k8s.io/api's Go types, so they are the PodSpec's own.
func placementSchema(props map[string]apiextensionsv1.JSONSchemaProps) {
	strMap := func(desc string, maxProps int64) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Description: desc, MaxProperties: ptr.To(maxProps),
			AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To[int64](63)}}}
	}
	ns := strMap("The pods' node selector (a PodSpec's nodeSelector): the labels of the nodes they may run on, such as a GPU pool's cloud.google.com/gke-accelerator: nvidia-l4. Owned where set; removed from the pod template when removed here.", MaxPodMetadataItems)
	props["nodeSelector"] = ns

	tol := schemaOf(reflect.TypeFor[corev1.Toleration]())
	tol.Properties["operator"] = enumProp(tol.Properties["operator"], "Exists", "Equal", "Lt", "Gt")
	tol.Properties["effect"] = enumProp(tol.Properties["effect"], "NoSchedule", "PreferNoSchedule", "NoExecute")
	tol.XValidations = apiextensionsv1.ValidationRules{
		{Rule: RuleTolerationExists, Message: RuleTolerationExistsMsg},
		{Rule: RuleTolerationKey, Message: RuleTolerationKeyMsg},
		{Rule: RuleTolerationSeconds, Message: RuleTolerationSecsMsg},
	}
	props["tolerations"] = apiextensionsv1.JSONSchemaProps{
		Type: "array", MaxItems: ptr.To[int64](MaxTolerations), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &tol},
		Description: "The pods' tolerations (a PodSpec's): a GPU pool's taint, such as {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}. A pod Pending on an untolerated taint is reported on the isvc with the taint to tolerate here.",
	}

	aff := schemaOf(reflect.TypeFor[corev1.Affinity]())
	aff.Description = "The pods' node affinity and pod (anti-)affinity, as a PodSpec's affinity."
	props["affinity"] = aff

	tsc := schemaOf(reflect.TypeFor[corev1.TopologySpreadConstraint]())
	tsc.Required = []string{"maxSkew", "topologyKey", "whenUnsatisfiable"}
	skew := tsc.Properties["maxSkew"]
	skew.Minimum = ptr.To[float64](1)
	tsc.Properties["maxSkew"] = skew
	tsc.Properties["whenUnsatisfiable"] = enumProp(tsc.Properties["whenUnsatisfiable"], "DoNotSchedule", "ScheduleAnyway")
	props["topologySpreadConstraints"] = apiextensionsv1.JSONSchemaProps{
		Type: "array", MaxItems: ptr.To[int64](MaxSpreads), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &tsc},
		Description: "How the pods spread over zones or nodes, as a PodSpec's topologySpreadConstraints (their labelSelector should select the model's pods: ai.example.com/inferenceservice: NAME).",
	}

	name := apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](253), Pattern: `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`}
	props["imagePullSecrets"] = apiextensionsv1.JSONSchemaProps{
		Type: "array", MaxItems: ptr.To[int64](MaxPullSecrets),
		Description: "Secrets (kubernetes.io/dockerconfigjson) in the model's namespace the kubelet pulls a private spec.image with. The ServiceAccount's imagePullSecrets apply as well.",
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Required: []string{"name"}, XMapType: ptr.To("atomic"),
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": name},
		}},
	}
	sa := name
	sa.Description = "The pods' ServiceAccount in the model's namespace: a workload identity (IRSA, EKS Pod Identity, GKE) for object storage, and its imagePullSecrets. Its API token is not mounted (vLLM never calls the API server; the identity webhooks project their own tokens). The spec.cache fill Job runs as spec.cache.serviceAccountName when set, else as this one. The operator neither creates nor annotates it."
	props["serviceAccountName"] = sa
	rc := name
	rc.Description = "The pods' RuntimeClass (nvidia, kata ...), as a PodSpec's runtimeClassName."
	props["runtimeClassName"] = rc

	labels := strMap("Labels added to the pods.", MaxPodMetadataItems)
	labels.XValidations = apiextensionsv1.ValidationRules{{Rule: RulePodLabelsReserved, Message: RulePodLabelsReservedMsg}}
	annotations := apiextensionsv1.JSONSchemaProps{Type: "object", Description: "Annotations added to the pods.", MaxProperties: ptr.To[int64](MaxPodMetadataItems),
		AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To[int64](4096)}},
		XValidations:         apiextensionsv1.ValidationRules{{Rule: RulePodAnnotationsOwn, Message: RulePodAnnotationsOwnMsg}}}
	props["podMetadata"] = apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "Labels and annotations added to the model's pods (a platform's cost labels, a service mesh's or workload identity's annotations). The operator's own labels (its selectors') and annotations are refused; the ones set here are owned by key, others' stay.",
		Properties:  map[string]apiextensionsv1.JSONSchemaProps{"labels": labels, "annotations": annotations},
	}
}

func enumProp(p apiextensionsv1.JSONSchemaProps, values ...string) apiextensionsv1.JSONSchemaProps {
	p.Enum = nil
	for _, v := range values {
		p.Enum = append(p.Enum, apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)})
	}
	return p
}

// schemaOf is the structural schema of a k8s.io/api type, from its Go fields and JSON tags.
func schemaOf(t reflect.Type) apiextensionsv1.JSONSchemaProps {
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem())
	case reflect.String:
		return apiextensionsv1.JSONSchemaProps{Type: "string"}
	case reflect.Bool:
		return apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	case reflect.Int32:
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32"}
	case reflect.Int64, reflect.Int:
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64"}
	case reflect.Slice:
		item := schemaOf(t.Elem())
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
	case reflect.Map:
		v := schemaOf(t.Elem())
		return apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &v}}
	case reflect.Struct:
		s := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
		for i := range t.NumField() {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			if name == "" || name == "-" {
				continue
			}
			s.Properties[name] = schemaOf(f.Type)
		}
		return s
	}
	panic("crd: no schema for " + t.String())
}
