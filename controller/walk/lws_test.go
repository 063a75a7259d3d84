package walk

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// groupPod is a pod of group g of LeaderWorkerSet qwen3 (worker 0 the leader), controlled by
// the group's StatefulSet.
func groupPod(g, worker string, ready bool) *corev1.Pod {
	sts, name := "qwen3", "qwen3-"+g
	if worker != "0" {
		sts, name = "qwen3-"+g, "qwen3-"+g+"-"+worker
	}
	p := readyPod(name)
	p.Labels = map[string]string{kinds.LWSNameLabel: "qwen3", kinds.LWSGroupLabel: g, kinds.LWSWorkerLabel: worker}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts, UID: types.UID("sts-" + sts), Controller: ptr.To(true)}}
	if !ready {
		p.Spec.NodeName = ""
		p.Status = unschedulablePod(name).Status
	}
	return p
}

// A multi-node model is walked through its LeaderWorkerSet: groups as replicas, StatefulSets
// as the layer below, and the group that cannot place its worker marked with the scheduler's
// message.
func TestWalkLeaderWorkerSet(t *testing.T) {
	o := model(2, 1)
	o.Deployment, o.ReplicaSets = nil, nil
	o.ISVC.Status.Phase, o.ISVC.Status.Reason = crd.PhaseFailed, reconcile.ReasonInsufficientGPU
	o.LeaderWorkerSet = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": "qwen3", "namespace": "team-a", "uid": "lws-uid", "generation": int64(1),
			"ownerReferences": []any{map[string]any{"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind, "name": "qwen3", "uid": "isvc-uid", "controller": true}}},
		"spec":   map[string]any{"replicas": int64(2), "leaderWorkerTemplate": map[string]any{"size": int64(2)}},
		"status": map[string]any{"replicas": int64(2), "updatedReplicas": int64(2)},
	}}
	o = o.withPods(groupPod("0", "0", true), groupPod("0", "1", true), groupPod("1", "0", true), groupPod("1", "1", false))
	r := Build(o)
	if r.Deployment == nil || r.Deployment.Kind != reconcile.KindLeaderWorkerSet || r.Deployment.Desired != 2 || r.Deployment.Ready != 1 {
		t.Fatalf("group layer %+v", r.Deployment)
	}
	if len(r.ReplicaSets) != 3 {
		t.Fatalf("StatefulSets %+v", r.ReplicaSets)
	}
	if len(r.Causes) == 0 || r.Causes[0].Reason != reconcile.ReasonInsufficientGPU || !strings.Contains(r.Causes[0].Message, "qwen3-1-1") {
		t.Fatalf("causes %+v", r.Causes)
	}
	var b strings.Builder
	if err := RenderWhy(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"LeaderWorkerSet", "groups desired 2, current 2, up-to-date 2, ready 1", "StatefulSet", "qwen3-1", "pods 1, ready 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the screen lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ReplicaSet") {
		t.Errorf("a LeaderWorkerSet's layers named ReplicaSet:\n%s", out)
	}
}
