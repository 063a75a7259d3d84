package controller

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// WatchedVersion resolves --api-version: auto picks v1beta1 when the API server serves it
// (the v1beta1 install, where it is the storage version and status has its additions).
func WatchedVersion(flagValue string, disco discovery.DiscoveryInterface) (string, error) {
	switch flagValue {
	case crd.Version, crd.VersionV1beta1:
		return flagValue, nil
	case "auto":
	default:
		return "", fmt.Errorf("--api-version=%q: want %s, %s or auto", flagValue, crd.Version, crd.VersionV1beta1)
	}
	ok, err := served(disco, crd.ResourceV1beta1)
	if err != nil || !ok {
		return crd.Version, err
	}
	return crd.VersionV1beta1, nil
}

// served reports whether the API server serves gvr.
func served(disco discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := disco.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", gvr.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// DiscoverFeatures turns on the optional children whose CRDs are served (ServiceMonitors
// when serviceMonitors, HTTPRoutes when gatewayParent, "namespace/name", is set, and
// LeaderWorkerSets for multi-node models) and returns the resources to watch for them; and
// Kueue's Workloads and ClusterQueues, watched apart (Options.Workloads, ClusterQueues)
// since Kueue, not the operator, makes them, and its visibility API. A CRD installed later needs a restart (the Deployment's rollout), as with other
// operators.
func DiscoverFeatures(disco discovery.DiscoveryInterface, serviceMonitors bool, gatewayParent string) (reconcile.Features, []schema.GroupVersionResource, error) {
	var f reconcile.Features
	var watch []schema.GroupVersionResource
	ok, err := served(disco, reconcile.LeaderWorkerSetGVR)
	if err != nil {
		return f, nil, err
	}
	if f.LeaderWorkerSets = ok; ok {
		watch = append(watch, reconcile.LeaderWorkerSetGVR)
	} else {
		klog.InfoS("LeaderWorkerSets are not served; multi-node models (spec.multiNode) are refused (MultiNodeUnsupported) until LeaderWorkerSet is installed and the operator restarted",
			"resource", reconcile.LeaderWorkerSetGVR.String())
	}
	// Kueue's Workloads say why a gated pod waits; watched whenever Kueue is installed.
	if f.KueueWorkloads, err = served(disco, kinds.KueueWorkloadGVR); err != nil {
		return f, nil, err
	}
	if f.KueueWorkloads {
		// What an admitted model's ClusterQueue borrows, and where a waiting one stands.
		if f.KueueClusterQueues, err = served(disco, kinds.KueueClusterQueueGVR); err != nil {
			return f, nil, err
		}
		pending := reconcile.KueueLocalQueueVisibilityGVR
		pending.Resource += "/pendingworkloads"
		// An aggregated API whose server is down fails discovery: positions go unread, the
		// operator runs.
		if f.KueueVisibility, err = served(disco, pending); err != nil {
			klog.InfoS("Kueue's visibility API is not available; queued models' positions are not read", "err", err)
			f.KueueVisibility = false
		}
	}
	if serviceMonitors {
		ok, err := served(disco, reconcile.ServiceMonitorGVR)
		if err != nil {
			return f, nil, err
		}
		if f.ServiceMonitors = ok; ok {
			watch = append(watch, reconcile.ServiceMonitorGVR)
		}
	}
	if gatewayParent != "" {
		ns, name, found := strings.Cut(gatewayParent, "/")
		if !found || ns == "" || name == "" {
			return f, nil, fmt.Errorf("--gateway-parent=%q: want namespace/name", gatewayParent)
		}
		ok, err := served(disco, reconcile.HTTPRouteGVR)
		if err != nil {
			return f, nil, err
		}
		if !ok {
			klog.InfoS("Gateway API HTTPRoutes are not served; --gateway-parent has no effect", "parent", gatewayParent)
		}
		if f.HTTPRoutes = ok; ok {
			f.GatewayParent = types.NamespacedName{Namespace: ns, Name: name}
			watch = append(watch, reconcile.HTTPRouteGVR)
			if f.ReferenceGrants, err = served(disco, reconcile.ReferenceGrantGVR); err != nil {
				return f, nil, err
			} else if f.ReferenceGrants {
				watch = append(watch, reconcile.ReferenceGrantGVR)
			}
		}
	}
	return f, watch, nil
}

// Autoscalers a model can be given (--autoscaler).
const (
	AutoscalerHPA  = "hpa"
	AutoscalerKEDA = "keda"
)

// DiscoverAutoscaler resolves --autoscaler into f and returns the resources to watch for it.
// With keda, each model gets a KEDA ScaledObject querying the Prometheus at prometheusURL
// instead of an HPA, when KEDA's CRD is served; when it is not, the models keep their HPAs
// and their AutoscalingActive condition says why (an operator that exits would leave every
// model unmanaged, and one that drops autoscaling would leave them at their minimum). Like
// the other optional children, a CRD installed later needs a restart.
func DiscoverAutoscaler(disco discovery.DiscoveryInterface, autoscaler, prometheusURL string, f *reconcile.Features) ([]schema.GroupVersionResource, error) {
	switch autoscaler {
	case AutoscalerHPA:
		return nil, nil
	case AutoscalerKEDA:
	default:
		return nil, fmt.Errorf("--autoscaler=%q: want %s or %s", autoscaler, AutoscalerHPA, AutoscalerKEDA)
	}
	if u, err := url.Parse(prometheusURL); prometheusURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--autoscaler=keda needs --keda-prometheus-address, the http(s) URL of the Prometheus KEDA's triggers query (e.g. http://prometheus-operated.monitoring.svc:9090); got %q", prometheusURL)
	}
	ok, err := served(disco, reconcile.ScaledObjectGVR)
	if err != nil {
		return nil, err
	}
	if !ok {
		klog.InfoS("KEDA's ScaledObjects are not served; --autoscaler=keda falls back to HorizontalPodAutoscalers, as each model's AutoscalingActive condition says",
			"resource", reconcile.ScaledObjectGVR.String())
		f.KEDAUnserved = true
		return nil, nil
	}
	f.ScaledObjects, f.KEDAPrometheus = true, prometheusURL
	return []schema.GroupVersionResource{reconcile.ScaledObjectGVR}, nil
}

// Modes of --inference-pool.
const (
	InferencePoolAuto = "auto"
	InferencePoolOff  = "off"
)

// DiscoverInferencePool resolves --inference-pool into f and returns the resources to watch for
// the pool route: with auto, HTTPRoutes on and the extension's InferencePool v1 served, models
// with spec.gateway get a pool and an endpoint picker. The picker's ServiceAccounts and
// RoleBindings are watched whenever HTTPRoutes are on, and pools whenever they are served, so a
// switch back to the Service route (off, after a restart) finds the pool route's children to
// delete; so are Istio's DestinationRules and GKE's HealthCheckPolicies where served, which the
// pools get (gatewaypolicy.go). The pickers run image, bound to clusterRole, reading their pods
// every refresh.
func DiscoverInferencePool(disco discovery.DiscoveryInterface, mode, image, clusterRole string, refresh time.Duration, f *reconcile.Features) ([]schema.GroupVersionResource, error) {
	if mode != InferencePoolAuto && mode != InferencePoolOff {
		return nil, fmt.Errorf("--inference-pool=%q: want %s or %s", mode, InferencePoolAuto, InferencePoolOff)
	}
	if err := reconcile.CheckPickerRefreshMetricsInterval(refresh); err != nil {
		return nil, err
	}
	if !f.HTTPRoutes {
		return nil, nil
	}
	watch := []schema.GroupVersionResource{reconcile.ServiceAccountGVR, reconcile.RoleBindingGVR}
	// The gateways' own policies for a pool, watched where served so that a switch back to
	// the Service route finds them to delete.
	for _, p := range []struct {
		gvr schema.GroupVersionResource
		on  *bool
	}{
		{reconcile.DestinationRuleGVR, &f.DestinationRules},
		{reconcile.HealthCheckPolicyGVR, &f.HealthCheckPolicies},
	} {
		ok, err := served(disco, p.gvr)
		if err != nil {
			return nil, err
		}
		if *p.on = ok; ok {
			watch = append(watch, p.gvr)
		}
	}
	ok, err := served(disco, reconcile.InferencePoolGVR)
	if err != nil {
		return nil, err
	}
	if !ok {
		klog.InfoS("InferencePools are not served; models' HTTPRoutes send requests to their Services", "resource", reconcile.InferencePoolGVR.String())
		return watch, nil
	}
	f.PoolServed = true
	f.InferencePools = mode == InferencePoolAuto
	f.PickerImage, f.PickerClusterRole, f.PickerRefreshMetricsInterval = image, clusterRole, refresh
	return append(watch, reconcile.InferencePoolGVR), nil
}

// DefaultActivatorService is the activator the install's manifests run.
const DefaultActivatorService = "inferenceservice-system/inferenceservice-activator:80"

// ParseActivatorService reads --activator-service, "namespace/name[:port]" (port 80 when
// omitted); empty is no activator.
func ParseActivatorService(s string) (types.NamespacedName, int32, error) {
	if s == "" {
		return types.NamespacedName{}, 0, nil
	}
	ref, portStr, hasPort := strings.Cut(s, ":")
	ns, name, ok := strings.Cut(ref, "/")
	port := int64(80)
	var err error
	if hasPort {
		port, err = strconv.ParseInt(portStr, 10, 32)
	}
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") || err != nil || port < 1 || port > 65535 {
		return types.NamespacedName{}, 0, fmt.Errorf("--activator-service=%q: want namespace/name or namespace/name:port", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, int32(port), nil
}
