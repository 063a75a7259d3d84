package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/informers"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestLWSWorkloadOwnsEveryGroupPod: Kueue (v0.17.0, pkg/controller/jobs/leaderworkerset and
// the pod group's EnsureWorkloadOwnedByAllMembers) makes one Workload per LeaderWorkerSet
// group, owned by the LeaderWorkerSet and by every pod of the group. Stored by the API server
// and read through the operator's Workload cache, it is the Workload of each of those pods,
// not only of the last owner listed.
func TestLWSWorkloadOwnsEveryGroupPod(t *testing.T) {
	ctx := testenv.Ctx(t, 3*time.Minute)
	// Kueue's own CRD when an earlier test installed it; else the stand-in (open schema).
	if _, _, err := env.Cluster.Kubectl(ctx, "get", "crd", "workloads.kueue.x-k8s.io"); err != nil {
		standins := filepath.Join(env.Root, "test", "e2e", "testdata", "standin_crds.yaml")
		env.Kubectl(t, "apply", "-f", standins)
		t.Cleanup(func() {
			_, _, _ = env.Cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=false", "-f", standins)
		})
		env.Kubectl(t, "wait", "--for=condition=Established", "crd/workloads.kueue.x-k8s.io", testenv.Timeout(time.Minute))
	}
	ns := env.Namespace(t)

	// The group's pods, as LeaderWorkerSet names them and Kueue's webhook gates them.
	var owners []metav1.OwnerReference
	var uids []types.UID
	for _, name := range []string{"grp-0", "grp-0-1"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}},
				Containers:      []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.11.0"}},
			}}
		created, err := env.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owners = append(owners, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: created.Name, UID: created.UID})
		uids = append(uids, created.UID)
	}
	lws := metav1.OwnerReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: "grp", UID: "lws-uid"}
	wl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "leaderworkerset-grp-0-abcde"},
		"spec": map[string]any{"queueName": "team-a", "podSets": []any{map[string]any{"name": "main", "count": int64(2),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}}}}}}},
	}}
	wl.SetOwnerReferences(append([]metav1.OwnerReference{lws}, owners...))
	if _, err := env.Dyn.Resource(workloadGVR).Namespace(ns).Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	caches := informers.New(env.Kube, env.Dyn, informers.Options{Namespaces: []string{ns}, Workloads: true})
	caches.Start(ctx)
	if !caches.WaitForCacheSync(ctx) {
		t.Fatal("caches not synced")
	}
	testenv.Eventually(t, 30*time.Second, "the Workload, for each pod of the group", func() error {
		got := caches.Workloads(ns, uids)
		for i, uid := range uids {
			if w, ok := got[uid]; !ok || w.Name != "leaderworkerset-grp-0-abcde" {
				return fmt.Errorf("pod %s: Workload %+v (found %v); every pod's: %+v", owners[i].Name, w, ok, got)
			}
		}
		return nil
	})
}
