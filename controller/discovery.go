package controller

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
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
// when serviceMonitors, HTTPRoutes when gatewayParent, "namespace/name", is set) and returns
// the resources to watch for them. A CRD installed later needs a restart (the Deployment's
// rollout), as with other operators.
func DiscoverFeatures(disco discovery.DiscoveryInterface, serviceMonitors bool, gatewayParent string) (reconcile.Features, []schema.GroupVersionResource, error) {
	var f reconcile.Features
	var watch []schema.GroupVersionResource
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
		}
	}
	return f, watch, nil
}
