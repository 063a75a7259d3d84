// The managed weights cache's I/O (reconcile/cache.go decides): read its claim, its fill Job
// and the fill pod's log tail; create the claim and Job, add the model's owner reference.
// They are read from the API server, not a cache: only models with spec.cache.size pay for
// it, two GETs a sync, and the log only while the fill runs.

package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

const (
	// fillLogTailLines and fillLogLimitBytes bound one read of the fill's log: its last
	// progress lines (one per TQDM_MININTERVAL) or its error, never the whole log.
	fillLogTailLines  = 20
	fillLogLimitBytes = 16 << 10
	// jobNameLabel is the label the Job controller puts on its pods.
	jobNameLabel = "batch.kubernetes.io/job-name"
)

// observeWeights reads a managed cache's claim and fill Job, and the fill's log while it runs
// or after it failed.
func (c *Controller) observeWeights(ctx context.Context, isvc *crd.InferenceService, ext *crd.SpecExtensions) (reconcile.Weights, error) {
	var w reconcile.Weights
	if !ext.Cache.Managed() {
		return w, nil
	}
	claim := reconcile.ManagedClaimName(isvc, ext)
	pvc, err := c.kube.CoreV1().PersistentVolumeClaims(isvc.Namespace).Get(ctx, claim, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return w, fmt.Errorf("reading the weights claim %s: %w", claim, err)
	default:
		w.Claim = pvc
	}
	job, err := c.kube.BatchV1().Jobs(isvc.Namespace).Get(ctx, reconcile.WeightsJobName(claim), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return w, nil
	case err != nil:
		return w, fmt.Errorf("reading the weights fill Job: %w", err)
	}
	w.Job = job
	if complete(job) || w.Claim != nil && w.Claim.Annotations[reconcile.WeightsFilledAnnotation] == "true" {
		return w, nil
	}
	w.Pod = c.fillPod(ctx, job)
	w.Log = c.fillLog(ctx, w.Pod)
	return w, nil
}

// complete reports a Job that succeeded.
func complete(j *batchv1.Job) bool {
	return slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
	})
}

// fillPod is the Job's newest pod; nil when there is none yet or the read failed (the status
// then says it waits for the pod: why it waits is a courtesy, not a decision).
func (c *Controller) fillPod(ctx context.Context, job *batchv1.Job) *corev1.Pod {
	pods, err := c.kube.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: jobNameLabel + "=" + job.Name})
	if err != nil || len(pods.Items) == 0 {
		return nil
	}
	newest := slices.MaxFunc(pods.Items, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return &newest
}

// fillLog is the tail of the fill pod's log; "" when it has not started or the read failed
// (progress, like the pod, is a courtesy).
func (c *Controller) fillLog(ctx context.Context, newest *corev1.Pod) string {
	if newest == nil || newest.Status.Phase == corev1.PodPending {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	defer cancel()
	body, err := c.kube.CoreV1().Pods(newest.Namespace).GetLogs(newest.Name, &corev1.PodLogOptions{
		TailLines: ptr.To[int64](fillLogTailLines), LimitBytes: ptr.To[int64](fillLogLimitBytes),
	}).DoRaw(ctx)
	if err != nil {
		klog.V(2).InfoS("Fill log not read; the status names the Job without its progress", "pod", klog.KObj(newest), "err", err)
		return ""
	}
	if len(body) >= fillLogLimitBytes {
		body = body[:bytes.LastIndexByte(body, '\n')+1] // cut at the limit: the last line may be a part of one
	}
	return string(body)
}

// logReadTimeout bounds one log read: the API server proxies it to the node's kubelet.
const logReadTimeout = 5 * time.Second

// applyWeights creates the managed claim and Job (one another model made first is adopted on
// the next pass) and patches this model's owner reference onto them.
func (c *Controller) applyWeights(ctx context.Context, isvc *crd.InferenceService, p reconcile.WeightsPlan) error {
	var errs []error
	for _, obj := range p.Creates {
		var err error
		switch o := obj.(type) {
		case *corev1.PersistentVolumeClaim:
			_, err = c.kube.CoreV1().PersistentVolumeClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{FieldManager: FieldManager})
		case *batchv1.Job:
			_, err = c.kube.BatchV1().Jobs(o.Namespace).Create(ctx, o, metav1.CreateOptions{FieldManager: FieldManager})
		}
		if err == nil {
			c.recorder.Eventf(isvc, obj, corev1.EventTypeNormal, EventCreated, "Create", "created %s %s for the weights of %s", kindOf(obj), obj.GetName(), isvc.Spec.Model)
		} else if !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("create %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err))
		}
	}
	for _, a := range p.Updates {
		data, err := reconcile.OwnedPatch(a.Cached, a.Object)
		if err == nil {
			switch a.Object.(type) {
			case *corev1.PersistentVolumeClaim:
				_, err = c.kube.CoreV1().PersistentVolumeClaims(a.Object.GetNamespace()).Patch(ctx, a.Object.GetName(), types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: FieldManager})
			case *batchv1.Job:
				_, err = c.kube.BatchV1().Jobs(a.Object.GetNamespace()).Patch(ctx, a.Object.GetName(), types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: FieldManager})
			}
		}
		if err != nil { // a conflict too: the next pass reads the object again
			errs = append(errs, fmt.Errorf("update %s %s/%s: %w", a.Kind, a.Object.GetNamespace(), a.Object.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

func kindOf(obj reconcile.Child) string {
	if _, ok := obj.(*batchv1.Job); ok {
		return "Job"
	}
	return "PersistentVolumeClaim"
}
