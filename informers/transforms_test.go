package informers

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

func TestStripInferenceServiceAndHPA(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetAnnotations(map[string]string{LastAppliedAnnotation: "{...}", "keep": "me"})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
	if _, err := StripInferenceService(u); err != nil {
		t.Fatal(err)
	}
	if a := u.GetAnnotations(); len(a) != 1 || a["keep"] != "me" || u.GetManagedFields() != nil {
		t.Fatalf("annotations %v, managedFields %v", a, u.GetManagedFields())
	}
	h := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2}}
	if _, err := kinds.StripHPA(h); err != nil {
		t.Fatal(err)
	}
	if h.Status.CurrentReplicas != 0 || h.Spec.MaxReplicas != 3 {
		t.Fatalf("hpa %+v", h)
	}
}

func TestStripWorkloadKeepsWhatTheDiagnosisReads(t *testing.T) {
	wl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "pod-m-abc-1", "namespace": "team-a", "uid": "wl-uid", "resourceVersion": "7",
			"labels":          map[string]any{"kueue.x-k8s.io/job-uid": "pod-uid"},
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "m-abc", "uid": "pod-uid", "controller": true}}},
		"spec": map[string]any{"queueName": "team-a", "podSets": []any{map[string]any{"name": "main", "count": int64(1)}}},
		"status": map[string]any{"admission": map[string]any{"clusterQueue": "team-a"}, "conditions": []any{
			map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "insufficient unused quota", "lastTransitionTime": "2026-12-04T00:00:00Z"},
			map[string]any{"type": "Admitted", "status": "False", "message": "x"},
		}},
	}}
	before := wl.DeepCopy()
	out, err := StripWorkload(wl)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(wl, before) {
		t.Fatal("the informer's object was modified")
	}
	s := out.(*unstructured.Unstructured)
	if _, ok := s.Object["spec"]; ok {
		t.Fatalf("spec kept: %v", s.Object)
	}
	uids, w, ok := kinds.WorkloadOf(s)
	if !ok || len(uids) != 1 || uids[0] != "pod-uid" || w.Name != "pod-m-abc-1" || w.ClusterQueue != "team-a" || w.Pending != "insufficient unused quota" || s.GetResourceVersion() != "7" {
		t.Fatalf("stripped: %v %q %+v %v", ok, uids, w, s.Object)
	}
	keys, _ := podOwnerIndex(s)
	if len(keys) != 1 || keys[0] != "team-a/pod-uid" {
		t.Fatalf("index %v", keys)
	}
	job := before.DeepCopy()
	job.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "eval", UID: "job-uid"}})
	sj, _ := StripWorkload(job)
	if keys, _ := podOwnerIndex(sj); len(keys) != 0 || len(sj.(*unstructured.Unstructured).Object) > 3 {
		t.Fatalf("a Job's Workload kept: %v %v", keys, sj)
	}
}

// A ClusterQueue is cached as its borrowing only (its usage moving within its own quota is
// then no update), and a pod's admitted Workload is indexed by the ClusterQueue that admitted
// it, so a change of borrowing reaches the models it admitted.
func TestStripClusterQueueAndIndex(t *testing.T) {
	cq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
		"metadata": map[string]any{"name": "team-a", "uid": "cq-uid", "resourceVersion": "9", "generation": int64(2)},
		"spec":     map[string]any{"cohortName": "gpus", "namespaceSelector": map[string]any{}},
		"status": map[string]any{"admittedWorkloads": int64(10), "flavorsUsage": []any{map[string]any{"name": "gpu", "resources": []any{
			map[string]any{"name": "nvidia.com/gpu", "total": "18", "borrowed": "2"}, map[string]any{"name": "cpu", "total": "3", "borrowed": "0"}}}}},
	}}
	before := cq.DeepCopy()
	out, err := StripClusterQueue(cq)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(cq, before) {
		t.Fatal("the informer's object was modified")
	}
	s := out.(*unstructured.Unstructured)
	if _, ok := s.Object["spec"]; ok {
		t.Fatalf("spec kept: %v", s.Object)
	}
	if !equality.Semantic.DeepEqual(kinds.ClusterQueueOf(s), kinds.ClusterQueueOf(cq)) || s.GetResourceVersion() != "9" {
		t.Fatalf("borrowing lost: %+v from %v", kinds.ClusterQueueOf(s), s.Object)
	}
	// More used, the same borrowed: the stripped forms are equal.
	busier := cq.DeepCopy()
	_ = unstructured.SetNestedField(busier.Object, int64(11), "status", "admittedWorkloads")
	if b, _ := StripClusterQueue(busier); !equality.Semantic.DeepEqual(kinds.ClusterQueueOf(b.(*unstructured.Unstructured)), kinds.ClusterQueueOf(s)) {
		t.Fatal("usage within quota changed the cached form")
	}

	wl := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "pod-m-abc-1", "namespace": "team-a",
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "m-abc", "uid": "pod-uid"}}},
		"status": map[string]any{"admission": map[string]any{"clusterQueue": "team-a"}},
	}}
	if keys, _ := clusterQueueIndex(wl); len(keys) != 1 || keys[0] != "team-a" {
		t.Fatalf("index %v", keys)
	}
	unstructured.RemoveNestedField(wl.Object, "status")
	if keys, _ := clusterQueueIndex(wl); len(keys) != 0 {
		t.Fatalf("a pending Workload indexed under %v", keys)
	}
}

// Cached isvcs asking the same spec.resources share one copy, which reads as each decoded
// alone; other resources get their own.
func TestInferenceServicesShareResources(t *testing.T) {
	d := newInferenceServiceDecoder()
	read := func(i int, cpu string) *crd.InferenceService {
		u := decodeModelObject(t, "isvc.json", modelJSON(t, "isvc.json", i)).(*unstructured.Unstructured)
		if cpu != "" {
			if err := unstructured.SetNestedField(u.Object, cpu, "spec", "resources", "requests", "cpu"); err != nil {
				t.Fatal(err)
			}
		}
		plain, err := DecodeInferenceService(u.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		obj, err := d.decode(u)
		if err != nil {
			t.Fatal(err)
		}
		isvc := obj.(*crd.InferenceService)
		if !equality.Semantic.DeepEqual(isvc, plain) {
			t.Fatalf("shared resources changed the isvc:\n%+v\nwant\n%+v", isvc.Spec.Resources, plain.(*crd.InferenceService).Spec.Resources)
		}
		return isvc
	}
	a, b, c := read(1, ""), read(2, ""), read(3, "20m")
	if a.Spec.Resources == nil || a.Spec.Resources != b.Spec.Resources {
		t.Fatal("the same spec.resources not shared")
	}
	if c.Spec.Resources == a.Spec.Resources {
		t.Fatal("other spec.resources shared")
	}
	// A reconcile's copy shares nothing with the cached one.
	cp := a.DeepCopy()
	cp.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3")
	if q := b.Spec.Resources.Requests[corev1.ResourceCPU]; q.String() != "10m" {
		t.Fatalf("a copy's change reached the shared resources: cpu %s", q.String())
	}
}
