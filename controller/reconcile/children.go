// The desired children as a whole: what every child of one isvc carries (names, labels, its
// owner) and DesiredChildren, which builds the set from each kind's builder in its own file.

package reconcile

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// Names and values the operator puts on its children.
const (
	// ReplicasAnnotation records the spec.replicas last applied to the Deployment, so the
	// operator sets the count only when the user changes it and otherwise leaves it to the HPA.
	ReplicasAnnotation = "ai.example.com/replicas"
	// EnvAnnotation lists the names of the model server's environment variables the operator
	// set, so it owns those by name (reverting hand edits, removing the ones a spec drops)
	// and leaves variables others add (admission webhooks, a platform's defaults) alone:
	// owning the whole list would fight a webhook that injects one on every update.
	EnvAnnotation = "ai.example.com/env"
	// PortName and Port are the model's Service port, the engine's HTTP endpoint
	// (engine.Server's, TestServicePortIsTheServers).
	PortName = "http"
	Port     = 8000
	// QueueLabel hands the pods to a Kueue LocalQueue.
	QueueLabel = "kueue.x-k8s.io/queue-name"
	// TargetQueueLength is the average queue length per pod the HPA aims for by default.
	TargetQueueLength = 5
	// AdaptersVolume is the ConfigMap volume an earlier version mounted at AdaptersPath; vLLM
	// never read it. It is removed from a Deployment that still has it.
	AdaptersVolume = "adapters"
	AdaptersPath   = "/etc/vllm/adapters"
	// CacheVolume is spec.cache's PersistentVolumeClaim, mounted at crd.CachePath.
	CacheVolume = "model-cache"
	// ModulesVolume is the writable emptyDir transformers imports a --trust-remote-code model's
	// code from (HF_MODULES_CACHE) when the cache is mounted read-only.
	ModulesVolume = "hf-modules"
	// HFHomeEnv points Hugging Face downloads at the cache.
	HFHomeEnv = "HF_HOME"
	// ShmVolume is /dev/shm.
	ShmVolume = "shm"
)

// childLabels are set on every child and on the pod template.
func childLabels(name string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     "vllm",
		"app.kubernetes.io/instance": name,
		kinds.ManagedByLabel:         kinds.ManagedByValue,
		kinds.InstanceLabel:          name,
	}
}

func selectorLabels(name string) map[string]string {
	return map[string]string{kinds.InstanceLabel: name}
}

// selectorString is selectorLabels(name) as a label selector: names are DNS labels, so
// nothing needs escaping.
func selectorString(name string) string { return kinds.InstanceLabel + "=" + name }

// apiVersion is the owners' apiVersion, formatted once.
var apiVersion = crd.GroupVersion.String()

// ownerRef makes the isvc the controller of a child, so deletion cascades and events map back.
func ownerRef(isvc *crd.InferenceService) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: apiVersion, Kind: crd.Kind, Name: isvc.Name, UID: isvc.UID,
		Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

// shared is what every child of one isvc carries. DesiredChildren builds it once and the
// children share its maps and slices: desired objects are only read (updates copy from them).
type shared struct {
	meta     metav1.ObjectMeta
	selector map[string]string
}

func sharedOf(isvc *crd.InferenceService) shared {
	return shared{
		meta: metav1.ObjectMeta{
			Name: isvc.Name, Namespace: isvc.Namespace, Labels: childLabels(isvc.Name),
			OwnerReferences: []metav1.OwnerReference{ownerRef(isvc)},
		},
		selector: selectorLabels(isvc.Name),
	}
}

// childMeta is fresh shared metadata, for a caller that changes its maps.
func childMeta(isvc *crd.InferenceService) metav1.ObjectMeta { return sharedOf(isvc).meta }

// Desired is what the spec asks for. It depends only on the object's identity and spec; it is
// rebuilt on every reconcile (microseconds) rather than kept per isvc (kilobytes each, for good).
type Desired struct {
	Deployment *appsv1.Deployment // nil for a multi-node model
	// LeaderWorkerSet runs a multi-node model (spec.multiNode) in the Deployment's place.
	LeaderWorkerSet *unstructured.Unstructured
	Service         *corev1.Service
	HPA             *autoscalingv2.HorizontalPodAutoscaler // nil when scaled to zero, or when KEDA scales
	PDB             *policyv1.PodDisruptionBudget          // nil below two pods
	// Optional children: nil when the feature is off or the spec does not ask for them.
	ServiceMonitor *unstructured.Unstructured
	HTTPRoute      *unstructured.Unstructured
	ScaledObject   *unstructured.Unstructured // in the HPA's place, with Features.ScaledObjects
	// NetworkPolicy fences the model's pods, PickerNetworkPolicy its picker's, with
	// Features.NetworkPolicies (the picker's only while the pool route wants a picker).
	NetworkPolicy       *unstructured.Unstructured
	PickerNetworkPolicy *unstructured.Unstructured
	// Pool is the pool route's InferencePool and endpoint picker, with Features.InferencePools.
	Pool poolChildren
	// GatewayPolicies are the pool's per-gateway objects, where their kinds are served.
	GatewayPolicies gatewayPolicies
	Scale           Scale
	Selector        string
}

// DesiredChildren builds the children the spec asks for.
func DesiredChildren(isvc *crd.InferenceService, ext *crd.SpecExtensions, f Features) *Desired {
	d := desiredChildren(isvc, ext, f)
	return &d
}

func desiredChildren(isvc *crd.InferenceService, ext *crd.SpecExtensions, f Features) Desired {
	sc, b := scaleOf(isvc, ext), sharedOf(isvc)
	d := Desired{
		Service:  desiredService(b, isMultiNode(ext)),
		HPA:      desiredHPA(isvc, ext, sc, b),
		PDB:      desiredPDB(isvc, sc, b),
		Scale:    sc,
		Selector: selectorString(isvc.Name),
	}
	if isMultiNode(ext) {
		d.LeaderWorkerSet = desiredLWS(isvc, ext, b)
	} else {
		d.Deployment = desiredDeployment(isvc, ext, b)
	}
	if f.ServiceMonitors {
		d.ServiceMonitor = desiredServiceMonitor(isvc)
	}
	if f.HTTPRoutes {
		d.HTTPRoute = desiredHTTPRoute(isvc, ext, f.GatewayParent)
	}
	if f.ScaledObjects {
		d.ScaledObject, d.HPA = desiredScaledObject(isvc, d.HPA, f.KEDAPrometheus), nil
	}
	if d.HTTPRoute != nil {
		d.Pool = desiredPool(isvc, ext, f)
		d.GatewayPolicies = desiredGatewayPolicies(isvc, d.Pool, f)
	}
	if f.NetworkPolicies && f.NetworkPolicy != nil {
		d.NetworkPolicy = desiredNetworkPolicy(isvc, ext, *f.NetworkPolicy)
		if d.Pool.Picker != nil {
			d.PickerNetworkPolicy = desiredPickerNetworkPolicy(isvc, *f.NetworkPolicy)
		}
	}
	return d
}
