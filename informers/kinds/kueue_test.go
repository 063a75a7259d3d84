package kinds

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func workloadObject(owner string, status map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "pod-qwen3-7b6cd-a-1f2e3", "namespace": "default",
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": owner, "name": "qwen3-7b6cd-a", "uid": "qwen3-7b6cd-a", "controller": true}}},
		"status": status,
	}}
}

func TestWorkloadOf(t *testing.T) {
	pending := map[string]any{"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending",
		"message": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 2 more needed. Pending the preemption of 1 workload(s)"}}}
	uids, w, ok := WorkloadOf(workloadObject("Pod", pending))
	if !ok || len(uids) != 1 || uids[0] != "qwen3-7b6cd-a" || w.Name != "pod-qwen3-7b6cd-a-1f2e3" || !strings.HasSuffix(w.Pending, "Pending the preemption of 1 workload(s)") {
		t.Fatalf("pod's Workload: %v %q %+v", ok, uids, w)
	}
	if _, _, ok := WorkloadOf(workloadObject("Job", pending)); ok {
		t.Fatal("a Job's Workload read as a pod's")
	}
	// A LeaderWorkerSet group's Workload, as Kueue v0.17.0 writes it: owned by the
	// LeaderWorkerSet and by every pod of the group.
	group := workloadObject("Pod", pending)
	group.SetOwnerReferences([]metav1.OwnerReference{
		{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "big", UID: "lws"},
		{APIVersion: "v1", Kind: "Pod", Name: "big-0", UID: "leader"},
		{APIVersion: "v1", Kind: "Pod", Name: "big-0-1", UID: "worker"},
	})
	if uids, _, ok := WorkloadOf(group); !ok || len(uids) != 2 || uids[0] != "leader" || uids[1] != "worker" {
		t.Fatalf("a group's Workload: owned by %v (%v), want both pods", uids, ok)
	}
	reserved := map[string]any{"admission": map[string]any{"clusterQueue": "team-a"},
		"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "True", "message": "Quota reserved in ClusterQueue team-a"}}}
	if _, w, _ := WorkloadOf(workloadObject("Pod", reserved)); w.Pending != "" || w.ClusterQueue != "team-a" {
		t.Fatalf("reserved: %+v", w)
	}
}

func TestClusterQueueOf(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "team-a"},
		"status": map[string]any{"flavorsUsage": []any{
			map[string]any{"name": "gpu", "resources": []any{
				map[string]any{"name": "nvidia.com/gpu", "total": "18", "borrowed": "2"},
				map[string]any{"name": "cpu", "total": "4", "borrowed": "0"},
			}},
			map[string]any{"name": "spot", "resources": []any{map[string]any{"name": "nvidia.com/gpu", "total": "1"}}},
		}},
	}}
	got := ClusterQueueOf(u)
	if got.Name != "team-a" || len(got.Borrowed) != 1 || got.Borrowed[0] != (Borrowed{"gpu", "nvidia.com/gpu", "2"}) {
		t.Fatalf("%+v", got)
	}
	if got := ClusterQueueOf(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "idle"}}}); len(got.Borrowed) != 0 {
		t.Fatalf("no status: %+v", got)
	}
}
