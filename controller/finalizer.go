// The finalizer and the gateway registration: the external resource an InferenceService
// holds, registered once per generation and deregistered before it may go.

package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

// abandonRoute says why a deletion should stop waiting for the gateway, or "" to keep
// waiting: the namespace is being deleted, or the deletion is older than the deregistration
// timeout. The namespace is read only here, on a failed deregistration.
func (c *Controller) abandonRoute(ctx context.Context, isvc *crd.InferenceService, now time.Time) string {
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, isvc.Namespace, metav1.GetOptions{})
	switch {
	case err == nil && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating):
		return "namespace " + isvc.Namespace + " is being deleted"
	case err != nil:
		klog.InfoS("Cannot read the namespace of a deleted InferenceService", "isvc", klog.KObj(isvc), "err", err)
	}
	if t, del := c.deregisterTimeout, isvc.DeletionTimestamp; t > 0 && del != nil && now.Sub(del.Time) >= t {
		return fmt.Sprintf("deregistration has failed for %s (--gateway-deregister-timeout=%s)", now.Sub(del.Time).Round(time.Second), t)
	}
	return ""
}

func hasFinalizer(u metav1.Object) bool { return slices.Contains(u.GetFinalizers(), Finalizer) }

// patchFinalizers sets the finalizer list with the resourceVersion as a precondition, so a
// concurrent change is never overwritten.
func (c *Controller) patchFinalizers(ctx context.Context, u metav1.Object, finalizers []string) error {
	patch, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"finalizers": finalizers, "resourceVersion": u.GetResourceVersion()},
	})
	if err != nil {
		return err
	}
	_, err = c.isvcs.Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

func (c *Controller) ensureFinalizer(ctx context.Context, isvc *crd.InferenceService) error {
	if c.gateway == nil || hasFinalizer(isvc) {
		return nil
	}
	return c.patchFinalizers(ctx, isvc, append(slices.Clone(isvc.Finalizers), Finalizer))
}

// register registers the route once per generation; it returns the new GatewayRegistered
// condition, or nil when nothing changed.
func (c *Controller) register(ctx context.Context, isvc *crd.InferenceService, ext *crd.SpecExtensions, now metav1.Time) (*metav1.Condition, error) {
	if c.gateway == nil {
		return nil, nil
	}
	if cond := meta.FindStatusCondition(isvc.Status.Conditions, crd.ConditionGatewayRegistered); cond != nil &&
		cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == isvc.Generation {
		return nil, nil
	}
	r := reconcile.RouteOf(isvc, ext)
	cond := &metav1.Condition{Type: crd.ConditionGatewayRegistered, ObservedGeneration: isvc.Generation, LastTransitionTime: now}
	if err := c.gateway.Register(ctx, r); err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reconcile.ReasonGatewayUnavailable, err.Error()
		return cond, fmt.Errorf("registering route: %w", err)
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, reconcile.ReasonRegistered
	cond.Message = fmt.Sprintf("route %s (%s/%s) -> Service %s port %d registered", r.Path, r.Namespace, r.Name, r.Service, r.Port)
	c.recorder.Eventf(isvc, nil, corev1.EventTypeNormal, EventRegistered, "Register", "%s", cond.Message)
	return cond, nil
}

// finalize deregisters the route, then removes the finalizer; children go with the garbage
// collector through their ownerReferences. A deregistration that keeps failing holds the
// isvc, except when its namespace is being deleted (the finalizer would hold the namespace
// forever) or after --gateway-deregister-timeout: the route is then abandoned, counted and
// reported, and the finalizer released.
func (c *Controller) finalize(ctx context.Context, isvc *crd.InferenceService, now metav1.Time) error {
	if !hasFinalizer(isvc) {
		return nil
	}
	abandoned := ""
	if c.gateway != nil {
		ext, stored, _ := crd.ExtensionsOf(isvc)
		r := reconcile.RouteOf(isvc, &ext)
		if err := c.gateway.Deregister(ctx, r); err != nil {
			why := c.abandonRoute(ctx, isvc, now.Time)
			if why == "" {
				err = fmt.Errorf("deleting: deregistering the gateway route failed, retrying: %w", err)
				st := reconcile.WithCauses(isvc.Status, isvc, []reconcile.Cause{{Rank: reconcile.RankAPI, Reason: reconcile.ReasonGatewayUnavailable, Message: err.Error()}}, now)
				st.Phase = crd.PhaseTerminating
				_, werr := c.writeStatus(ctx, isvc, &st, &stored, &stored)
				return errors.Join(err, werr)
			}
			abandoned = fmt.Sprintf("route %s may be left on the gateway: %s; deregistration failed: %v", r.Path, why, err)
		} else {
			c.recorder.Eventf(isvc, nil, corev1.EventTypeNormal, EventDeregistered, "Deregister", "route %s/%s deregistered", isvc.Namespace, isvc.Name)
		}
	}
	// Remove the finalizer even if the cached object is stale, re-reading on a conflict, so
	// the gateway is not called twice for one deletion. Only the reconcile that removed it
	// reports an abandoned route: a stale cache may run this more than once.
	var latest metav1.Object = isvc
	removed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !hasFinalizer(latest) {
			return nil // an earlier reconcile removed it
		}
		remaining := slices.DeleteFunc(slices.Clone(latest.GetFinalizers()), func(f string) bool { return f == Finalizer })
		err := c.patchFinalizers(ctx, latest, remaining)
		if apierrors.IsConflict(err) {
			c.metrics.ConflictRetry("InferenceService/finalizers")
			fresh, gerr := c.isvcs.Namespace(isvc.Namespace).Get(ctx, isvc.Name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			latest = fresh
		}
		removed = err == nil
		return err
	})
	if removed && abandoned != "" {
		c.metrics.RouteAbandoned()
		// In a terminating namespace the API server refuses the Event: the log line and the
		// metric are what remains.
		klog.InfoS("Released the finalizer without deregistering the gateway route", "isvc", klog.KObj(isvc), "reason", abandoned)
		c.recorder.Eventf(isvc, nil, corev1.EventTypeWarning, EventRouteAbandoned, "Deregister", "%s", abandoned)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
