package controller

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

// A managed cache through sync: the claim and Job read by name and created, no Deployment
// while the Job runs; once it completed, the claim marked filled and the Deployment created.
func TestSyncManagedCache(t *testing.T) {
	isvc := newISVCObject(1)
	isvc.Annotations = map[string]string{crd.AnnotationV1beta1Spec: `{"cache":{"size":"10Gi"}}`}
	f := newFixture(t, isvc, nil)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	calls := f.calls()
	for _, want := range []string{"get persistentvolumeclaims", "get jobs", "create persistentvolumeclaims", "create jobs"} {
		if !strings.Contains(calls, want) {
			t.Errorf("first sync: no %q in %s", want, calls)
		}
	}
	if strings.Contains(calls, "create deployments") {
		t.Fatalf("a Deployment before the weights: %s", calls)
	}
	ctx := context.Background()
	claim := reconcile.WeightsClaimName(isvc.Spec.Model, "main")
	job, err := f.kube.BatchV1().Jobs("default").Get(ctx, reconcile.WeightsJobName(claim), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if _, err := f.kube.BatchV1().Jobs("default").UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.caches.svc = desired(t, isvc).Service // the first sync's create, seen by the cache
	f.ctrl.memory.forget(queue.Key{Namespace: "default", Name: "qwen3"})
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	calls = f.calls()
	if !strings.Contains(calls, "patch persistentvolumeclaims(strategic)") || !strings.Contains(calls, "create deployments") || strings.Contains(calls, "create jobs") {
		t.Fatalf("filled: %s", calls)
	}
	pvc, err := f.kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
	if err != nil || pvc.Annotations[reconcile.WeightsFilledAnnotation] != "true" || len(pvc.OwnerReferences) != 1 || pvc.OwnerReferences[0].UID != isvc.UID {
		t.Fatalf("claim %v %+v", err, pvc)
	}
}
