// One client per child kind, seen through reconcile.Child, so apply.go needs no switch per kind.

package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// clientFor picks the namespaced client of a child's kind.
func (c *Controller) clientFor(obj reconcile.Child) (childClient, error) {
	ns := obj.GetNamespace()
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return typed[*appsv1.Deployment]{c.kube.AppsV1().Deployments(ns)}, nil
	case *corev1.Service:
		return typed[*corev1.Service]{c.kube.CoreV1().Services(ns)}, nil
	case *autoscalingv2.HorizontalPodAutoscaler:
		return typed[*autoscalingv2.HorizontalPodAutoscaler]{c.kube.AutoscalingV2().HorizontalPodAutoscalers(ns)}, nil
	case *corev1.ConfigMap:
		return typed[*corev1.ConfigMap]{c.kube.CoreV1().ConfigMaps(ns)}, nil
	case *policyv1.PodDisruptionBudget:
		return typed[*policyv1.PodDisruptionBudget]{c.kube.PolicyV1().PodDisruptionBudgets(ns)}, nil
	case *unstructured.Unstructured:
		if gvr, ok := reconcile.GVROfKind(o.GetKind()); ok {
			return typed[*unstructured.Unstructured]{dynamicClient{c.dyn.Resource(gvr).Namespace(ns)}}, nil
		}
	}
	return nil, fmt.Errorf("unsupported child %T %s", obj, obj.GetObjectKind().GroupVersionKind().Kind)
}

// childClient is one kind's client, seen through Child.
type childClient interface {
	create(ctx context.Context, obj reconcile.Child) (reconcile.Child, error)
	update(ctx context.Context, obj reconcile.Child) (reconcile.Child, error)
	patch(ctx context.Context, name string, data []byte) error
	get(ctx context.Context, name string) (reconcile.Child, error)
	delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// typedClient is the method set client-go's typed clients share.
type typedClient[T reconcile.Child] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

type typed[T reconcile.Child] struct{ c typedClient[T] }

func (t typed[T]) create(ctx context.Context, obj reconcile.Child) (reconcile.Child, error) {
	return t.c.Create(ctx, obj.(T), metav1.CreateOptions{FieldManager: FieldManager})
}

func (t typed[T]) update(ctx context.Context, obj reconcile.Child) (reconcile.Child, error) {
	return t.c.Update(ctx, obj.(T), metav1.UpdateOptions{FieldManager: FieldManager})
}

// patch sends a strategic merge patch: only typed children carry an Action.Cached (custom
// resources have no strategic merge and are updated whole), so no other type reaches it.
func (t typed[T]) patch(ctx context.Context, name string, data []byte) error {
	_, err := t.c.Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

func (t typed[T]) get(ctx context.Context, name string) (reconcile.Child, error) {
	return t.c.Get(ctx, name, metav1.GetOptions{})
}

func (t typed[T]) delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return t.c.Delete(ctx, name, opts)
}

// dynamicClient drops the dynamic client's subresource arguments to fit typedClient.
type dynamicClient struct{ r dynamic.ResourceInterface }

func (d dynamicClient) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error) {
	return d.r.Create(ctx, obj, opts)
}

func (d dynamicClient) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return d.r.Update(ctx, obj, opts)
}

func (d dynamicClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	return d.r.Patch(ctx, name, pt, data, opts, sub...)
}

func (d dynamicClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error) {
	return d.r.Get(ctx, name, opts)
}

func (d dynamicClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return d.r.Delete(ctx, name, opts)
}
