package reconcile

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
)

// Children whose CRDs may not be installed: a Prometheus Operator ServiceMonitor per model, a
// Gateway API HTTPRoute per model with spec.gateway, and with --autoscaler=keda a KEDA
// ScaledObject per model instead of its HPA. They are unstructured, so the operator needs
// none of these projects' Go modules.
var (
	ServiceMonitorGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	HTTPRouteGVR      = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	ScaledObjectGVR   = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
	// ReferenceGrantGVR at v1beta1, which every Gateway API release since v0.6 serves (v1
	// only since v1.5).
	ReferenceGrantGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1beta1", Resource: "referencegrants"}
)

// Kinds of the optional children, and their resources.
const (
	KindServiceMonitor = "ServiceMonitor"
	KindHTTPRoute      = "HTTPRoute"
	KindScaledObject   = "ScaledObject"
	KindReferenceGrant = "ReferenceGrant"
)

// GVROfKind is the resource of an optional child's kind.
func GVROfKind(kind string) (schema.GroupVersionResource, bool) {
	switch kind {
	case KindServiceMonitor:
		return ServiceMonitorGVR, true
	case KindHTTPRoute:
		return HTTPRouteGVR, true
	case KindScaledObject:
		return ScaledObjectGVR, true
	case KindReferenceGrant:
		return ReferenceGrantGVR, true
	case KindLeaderWorkerSet:
		return LeaderWorkerSetGVR, true
	case KindInferencePool:
		return InferencePoolGVR, true
	case KindPickerServiceAccess:
		return ServiceAccountGVR, true
	case KindPickerRoleBinding:
		return RoleBindingGVR, true
	case KindNetworkPolicy, KindPickerNetworkPolicy:
		return NetworkPolicyGVR, true
	case KindDestinationRule:
		return DestinationRuleGVR, true
	case KindHealthCheckPolicy:
		return HealthCheckPolicyGVR, true
	}
	return schema.GroupVersionResource{}, false
}

// Features are the optional children this cluster can hold, found by discovery at start.
type Features struct {
	// ServiceMonitors: monitoring.coreos.com/v1 is served.
	ServiceMonitors bool
	// HTTPRoutes: gateway.networking.k8s.io/v1 is served and GatewayParent names the Gateway
	// routes attach to.
	HTTPRoutes    bool
	GatewayParent types.NamespacedName
	// InferencePools: HTTPRoutes, inference.networking.k8s.io/v1 InferencePools served and
	// --inference-pool=auto: a model with spec.gateway gets a pool and an endpoint picker
	// (pool.go), and its route goes to the pool once the picker serves. PoolServed says the API
	// is served, whatever the flag.
	InferencePools bool
	PoolServed     bool
	// PickerImage and PickerClusterRole are the picker's image and the ClusterRole its
	// ServiceAccount is bound to; empty means the defaults (DefaultPickerImage, DefaultPickerClusterRole).
	PickerImage       string
	PickerClusterRole string
	// PickerRefreshMetricsInterval is how often each picker reads its pods' metrics
	// (--endpoint-picker-refresh-metrics-interval); zero means DefaultPickerRefreshMetricsInterval.
	PickerRefreshMetricsInterval time.Duration
	// DestinationRules and HealthCheckPolicies: with HTTPRoutes, Istio's DestinationRule and
	// GKE's HealthCheckPolicy are served, so each pool gets what that gateway needs to use it
	// (gatewaypolicy.go).
	DestinationRules    bool
	HealthCheckPolicies bool
	// ScaledObjects: --autoscaler=keda and keda.sh/v1alpha1 is served: each model gets a
	// ScaledObject whose Prometheus trigger asks KEDAPrometheus, instead of an HPA.
	ScaledObjects  bool
	KEDAPrometheus string
	// KEDAUnserved: --autoscaler=keda but KEDA's CRD is not served. The models keep their
	// HPAs, and their AutoscalingActive condition says why.
	KEDAUnserved bool
	// LeaderWorkerSets: leaderworkerset.x-k8s.io/v1 is served, so multi-node models
	// (spec.multiNode) can run; without it they are refused (MultiNodeUnsupported).
	LeaderWorkerSets bool
	// KueueWorkloads: kueue.x-k8s.io/v1beta2 Workloads are served and watched, so a gated
	// pod's wait is told in Kueue's words.
	KueueWorkloads bool
	// KueueVisibility: Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta2) is served,
	// so a queued pod's position is read (WantsQueuePositions).
	KueueVisibility bool
	// KueueClusterQueues: Kueue's ClusterQueues are watched, so an admitted model says what
	// its ClusterQueue borrows from its cohort.
	KueueClusterQueues bool
	// Activator is the Service of the activator that holds requests for models at zero, and
	// ActivatorPort its port: a model with minReplicas 0 is routed through it. Empty: no
	// activator is installed, and such a model wakes only on a change of spec.
	Activator     types.NamespacedName
	ActivatorPort int32
	// ReferenceGrants: Gateway API ReferenceGrants are served and watched in the activator's
	// namespace, so the operator grants the HTTPRoutes of a namespace with models routed
	// through the activator the reference to its Service (gateways refuse a cross-namespace
	// backendRef without one: ResolvedRefs False, RefNotPermitted).
	ReferenceGrants bool
	// NetworkPolicies: each model gets a NetworkPolicy (networkpolicy.go), and its picker one,
	// admitting the callers NetworkPolicy names (--network-policies); a pointer keeps
	// Features comparable.
	NetworkPolicies bool
	NetworkPolicy   *NetworkPolicyOptions
	// CreatingEvidenceAfter: a pod whose container is still being created this long after it
	// was scheduled has its Events read (CreatingPods); 0 reads none.
	CreatingEvidenceAfter time.Duration
}

func newChildUnstructured(isvc *crd.InferenceService, apiVersion, kind string) *unstructured.Unstructured {
	return unstructuredWith(childMeta(isvc), apiVersion, kind)
}

// unstructuredWith is an unstructured child carrying meta's name, namespace, labels and
// controller reference.
func unstructuredWith(meta metav1.ObjectMeta, apiVersion, kind string) *unstructured.Unstructured {
	labels := map[string]interface{}{}
	for k, v := range meta.Labels {
		labels[k] = v
	}
	ref := meta.OwnerReferences[0]
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]interface{}{
			"name": meta.Name, "namespace": meta.Namespace, "labels": labels,
			"ownerReferences": []interface{}{map[string]interface{}{
				"apiVersion": ref.APIVersion, "kind": ref.Kind, "name": ref.Name, "uid": string(ref.UID),
				"controller": true, "blockOwnerDeletion": true,
			}},
		},
	}}
}

// unstructuredDrifted compares labels and the whole spec: the operator owns every field it
// writes there, and writes out what the CRDs default.
func unstructuredDrifted(live, want *unstructured.Unstructured) bool {
	return !hasLabels(live.GetLabels(), want.GetLabels()) || !equality.Semantic.DeepEqual(live.Object["spec"], want.Object["spec"])
}

func setUnstructured(out, want *unstructured.Unstructured) {
	out.SetLabels(mergeLabels(out.GetLabels(), want.GetLabels()))
	out.Object["spec"] = runtimeDeepCopy(want.Object["spec"])
}

func runtimeDeepCopy(v interface{}) interface{} {
	return (&unstructured.Unstructured{Object: map[string]interface{}{"v": v}}).DeepCopy().Object["v"]
}
