// The baseline: the same children from a plain client at the same QPS, the pace the operator is measured against.

package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

// baseline creates N Deployments, Services and HPAs with a plain client at the operator's QPS
// and waits until every Deployment is ready: the limit the operator is measured against. They
// are the operator's own children of the same models (its probes and resources: a pod without
// probes is ready sooner, which is not the operator's doing), without their owner.
func baseline(ctx context.Context, c Config, cfg *rest.Config, admin kubernetes.Interface, r *Result) error {
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "baseline"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	bc := rest.CopyConfig(cfg)
	bc.QPS, bc.Burst = float32(c.QPS), 2*c.QPS
	kube, err := kubernetes.NewForConfig(bc)
	if err != nil {
		return err
	}
	logf(c, "baseline: %d Deployments + Services + HPAs at %d QPS", c.N, c.QPS)
	start := time.Now()
	if err := forEach(ctx, c.N, 16, func(i int) error {
		for _, child := range sameChildren(i, c.Adapter) {
			var err error
			switch o := child.(type) {
			case *appsv1.Deployment:
				_, err = kube.AppsV1().Deployments("baseline").Create(ctx, o, metav1.CreateOptions{})
			case *corev1.Service:
				_, err = kube.CoreV1().Services("baseline").Create(ctx, o, metav1.CreateOptions{})
			case *autoscalingv2.HorizontalPodAutoscaler:
				_, err = kube.AutoscalingV2().HorizontalPodAutoscalers("baseline").Create(ctx, o, metav1.CreateOptions{})
			}
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	r.BaselineChildrenSeconds = time.Since(start).Seconds()
	deadline := time.Now().Add(30 * time.Minute)
	for {
		l, err := admin.AppsV1().Deployments("baseline").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, d := range l.Items {
			if d.Status.ReadyReplicas >= 1 {
				ready++
			}
		}
		if ready == c.N {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("baseline: %d/%d ready after 30m", ready, c.N)
		}
		time.Sleep(250 * time.Millisecond) // poll interval
	}
	r.BaselineReadySeconds = time.Since(start).Seconds()
	logf(c, "baseline: children %.1fs, ready %.1fs", r.BaselineChildrenSeconds, r.BaselineReadySeconds)
	// Leave the cluster as quiet as it was for the operator's run: the namespace is gone only
	// once the garbage collector and namespace controller have deleted every object in it, work
	// that would otherwise compete with the operator's pods for the controller-manager.
	if err := admin.CoreV1().Namespaces().Delete(ctx, "baseline", metav1.DeleteOptions{}); err != nil {
		return err
	}
	del := time.Now()
	for {
		_, err := admin.CoreV1().Namespaces().Get(ctx, "baseline", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			logf(c, "baseline: namespace deleted in %.1fs", time.Since(del).Seconds())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("baseline namespace not deleted after 30m")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond): // poll interval
		}
	}
}

// sameChildren are the Deployment, Service and HPA the operator creates for the benchmark's
// model i, in the baseline namespace, owned by nothing.
func sameChildren(i int, serving bool) []runtime.Object {
	u := isvcObject(i, serving)
	u.SetNamespace("baseline")
	isvc, err := crd.FromUnstructured(u)
	if err != nil {
		panic(err) // the benchmark's own object
	}
	var out []runtime.Object
	for _, a := range reconcile.Reconcile(reconcile.Input{ISVC: isvc, Now: metav1.Now()}).Actions {
		if a.Verb != reconcile.Create {
			continue
		}
		switch o := a.Object.(type) {
		case *appsv1.Deployment, *corev1.Service, *autoscalingv2.HorizontalPodAutoscaler:
			o.(metav1.Object).SetOwnerReferences(nil)
			out = append(out, o)
		}
	}
	return out
}
