package reconcile

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// multiNodeWorld is a 16-GPU model on 2 nodes per replica, 2 replicas, on a cluster that
// serves LeaderWorkerSets.
func multiNodeWorld() *world {
	w := newWorld(2)
	w.isvc.Spec.GPUsPerReplica = ptr.To[int32](16)
	w.ext.MultiNode = &crd.MultiNode{Nodes: 2}
	w.f.LeaderWorkerSets = true
	return w
}

func lwsContainer(t *testing.T, l *unstructured.Unstructured, tmpl string) corev1.Container {
	t.Helper()
	pt, ok := lwsTemplate(l, tmpl)
	if !ok || len(pt.Spec.Containers) != 1 {
		t.Fatalf("%s: %+v", tmpl, pt)
	}
	return pt.Spec.Containers[0]
}

// lwsDefaults plays LWS's webhook and the API server on a stored LeaderWorkerSet: fields the
// operator does not set appear, the templates' containers get the pod defaults.
func lwsDefaults(t *testing.T, l *unstructured.Unstructured) {
	t.Helper()
	spec := l.Object["spec"].(map[string]interface{})
	if _, ok := spec["rolloutStrategy"]; !ok { // as LWS's webhook: only when unset
		spec["rolloutStrategy"] = map[string]interface{}{"type": "RollingUpdate", "rollingUpdateConfiguration": map[string]interface{}{"maxSurge": int64(0), "maxUnavailable": int64(1), "partition": int64(0)}}
	}
	if _, ok := spec["networkConfig"]; !ok { // LWS's webhook defaults it only when unset
		spec["networkConfig"] = map[string]interface{}{"subdomainPolicy": "Shared"}
	}
	for _, name := range []string{"leaderTemplate", "workerTemplate"} {
		pt, _ := lwsTemplate(l, name)
		c := &pt.Spec.Containers[0]
		c.ImagePullPolicy, c.TerminationMessagePath = corev1.PullIfNotPresent, "/dev/termination-log"
		c.Env = append(c.Env, corev1.EnvVar{Name: "LWS_LEADER_ADDRESS", Value: "x"}) // someone else's variable
		pt.Spec.RestartPolicy = corev1.RestartPolicyAlways
		spec["leaderWorkerTemplate"].(map[string]interface{})[name] = templateToUnstructured(&pt)
	}
}

func TestMultiNodeChildren(t *testing.T) {
	w := multiNodeWorld()
	out := w.reconcile()
	if got := verbs(out.Actions); got != "create LeaderWorkerSet, create Service, create HorizontalPodAutoscaler" {
		t.Fatalf("actions %s", got)
	}
	for _, a := range out.Actions[1:] {
		if !a.AfterDeployment {
			t.Errorf("%s does not wait for the LeaderWorkerSet's create", a.Kind)
		}
	}
	l := out.Actions[0].Object.(*unstructured.Unstructured)
	if l.GetAPIVersion() != "leaderworkerset.x-k8s.io/v1" || !ControlledBy(l, w.isvc) {
		t.Fatalf("LeaderWorkerSet %s, owners %v", l.GetAPIVersion(), l.GetOwnerReferences())
	}
	if n, _, _ := unstructured.NestedInt64(l.Object, "spec", "leaderWorkerTemplate", "size"); n != 2 || lwsReplicas(l) != 2 {
		t.Fatalf("size %d replicas %d", n, lwsReplicas(l))
	}
	if p, _, _ := unstructured.NestedString(l.Object, "spec", "startupPolicy"); p != "LeaderCreated" {
		t.Fatalf("startupPolicy %q: vLLM's leader is ready only once its workers joined", p)
	}
	leader, worker := lwsContainer(t, l, "leaderTemplate"), lwsContainer(t, l, "workerTemplate")
	for _, c := range []corev1.Container{leader, worker} {
		if g := c.Resources.Limits["nvidia.com/gpu"]; g.Value() != 8 {
			t.Errorf("%s asks %s GPUs, want 8 (16 over 2 nodes)", c.Args, g.String())
		}
	}
	script := leader.Args[0]
	for _, want := range []string{"multi-node-serving.sh leader --ray_cluster_size=$(LWS_GROUP_SIZE) --ray_init_timeout=3600 && exec vllm serve 'Qwen/Qwen3-0.6B'",
		"'--tensor-parallel-size' '8' '--pipeline-parallel-size' '2' '--distributed-executor-backend' 'ray'"} {
		if !strings.Contains(script, want) {
			t.Errorf("leader script %q lacks %q", script, want)
		}
	}
	if leader.ReadinessProbe == nil || len(leader.Ports) != 1 {
		t.Errorf("the leader serves the API: probes %v ports %v", leader.ReadinessProbe, leader.Ports)
	}
	if worker.ReadinessProbe != nil || worker.StartupProbe != nil || len(worker.Ports) != 0 || !strings.Contains(worker.Args[0], "worker --ray_address=$(LWS_LEADER_ADDRESS) --ray_init_timeout=3600") {
		t.Errorf("worker %+v", worker)
	}
	svc := out.Actions[1].Object.(*corev1.Service)
	if svc.Spec.Selector[kinds.LWSWorkerLabel] != "0" || svc.Spec.Selector[kinds.InstanceLabel] != "qwen3" {
		t.Errorf("Service selector %v: leaders only", svc.Spec.Selector)
	}
	if ref := out.Actions[2].Object.(interface{ GetName() string }); ref == nil {
		t.Fatal()
	}
	w.apply(out.Actions)
	if r := w.obs.HPA.Spec.ScaleTargetRef; r.Kind != KindLeaderWorkerSet || r.APIVersion != "leaderworkerset.x-k8s.io/v1" {
		t.Errorf("HPA scales %+v", r)
	}

	// LWS's defaults and a variable its webhook adds are no drift.
	lwsDefaults(t, w.obs.LeaderWorkerSet)
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("converged model acts: %s", verbs(out.Actions))
	}
	// A LeaderWorkerSet of the Shared subdomain policy (made before it was the operator's, or
	// edited) is corrected: under Shared its headless Service would take the model Service's name.
	unstructured.SetNestedField(w.obs.LeaderWorkerSet.Object, "Shared", "spec", "networkConfig", "subdomainPolicy")
	if out := w.reconcile(); verbs(out.Actions) != "update LeaderWorkerSet" {
		t.Fatalf("Shared subdomain policy: %s", verbs(out.Actions))
	} else {
		w.apply(out.Actions)
	}
	if p, _, _ := unstructured.NestedString(w.obs.LeaderWorkerSet.Object, "spec", "networkConfig", "subdomainPolicy"); p != "UniquePerReplica" {
		t.Fatalf("subdomain policy %q", p)
	}
	// LWS's own rollout step (maxSurge 0, maxUnavailable 1: a group down first) is corrected to
	// a surge for two groups; the partition LWS defaulted stays.
	unstructured.SetNestedField(w.obs.LeaderWorkerSet.Object, map[string]interface{}{"maxSurge": int64(0), "maxUnavailable": int64(1), "partition": int64(0)},
		"spec", "rolloutStrategy", "rollingUpdateConfiguration")
	if out := w.reconcile(); verbs(out.Actions) != "update LeaderWorkerSet" {
		t.Fatalf("LWS's default rollout step: %s", verbs(out.Actions))
	} else {
		w.apply(out.Actions)
	}
	if ru, _, _ := unstructured.NestedMap(w.obs.LeaderWorkerSet.Object, "spec", "rolloutStrategy", "rollingUpdateConfiguration"); ru["maxSurge"] != "25%" || ru["maxUnavailable"] != "25%" || ru["partition"] != int64(0) {
		t.Fatalf("rollout step %v", ru)
	}
	// The HPA's count is kept.
	unstructured.SetNestedField(w.obs.LeaderWorkerSet.Object, int64(5), "spec", "replicas")
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("fights the HPA: %s", verbs(out.Actions))
	}
	// Scaled to one group, which LWS v0.8 cannot surge (its partition would never move with
	// unavailability 0): LWS's own step, the HPA's count kept.
	unstructured.SetNestedField(w.obs.LeaderWorkerSet.Object, int64(1), "spec", "replicas")
	if out := w.reconcile(); verbs(out.Actions) != "update LeaderWorkerSet" {
		t.Fatalf("one group: %s", verbs(out.Actions))
	} else {
		w.apply(out.Actions)
	}
	if ru, _, _ := unstructured.NestedMap(w.obs.LeaderWorkerSet.Object, "spec", "rolloutStrategy", "rollingUpdateConfiguration"); ru["maxSurge"] != int64(0) || ru["maxUnavailable"] != int64(1) || lwsReplicas(w.obs.LeaderWorkerSet) != 1 {
		t.Fatalf("one group: rollout step %v, %d groups", ru, lwsReplicas(w.obs.LeaderWorkerSet))
	}
	unstructured.SetNestedField(w.obs.LeaderWorkerSet.Object, int64(5), "spec", "replicas")
	w.apply(w.reconcile().Actions)
	// A hand edit of the worker's image is reverted; LWS's fields and others' variables stay.
	pt, _ := lwsTemplate(w.obs.LeaderWorkerSet, "workerTemplate")
	pt.Spec.Containers[0].Image = "vllm/vllm-openai:hacked"
	unstructured.SetNestedField(w.obs.LeaderWorkerSet.Object, templateToUnstructured(&pt), "spec", "leaderWorkerTemplate", "workerTemplate")
	out = w.reconcile()
	if verbs(out.Actions) != "update LeaderWorkerSet" {
		t.Fatalf("hand edit: %s", verbs(out.Actions))
	}
	w.apply(out.Actions)
	l = w.obs.LeaderWorkerSet
	if c := lwsContainer(t, l, "workerTemplate"); c.Image == "vllm/vllm-openai:hacked" || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "LWS_LEADER_ADDRESS" }) {
		t.Errorf("worker after the update: image %s env %v", c.Image, c.Env)
	}
	if _, found, _ := unstructured.NestedMap(l.Object, "spec", "rolloutStrategy"); !found || lwsReplicas(l) != 5 {
		t.Errorf("the update dropped LWS's fields or the HPA's count: %v", l.Object["spec"])
	}
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("after the update: %s", verbs(out.Actions))
	}
	// kubectl edit isvc replicas 2 -> 3: the user's raise is a floor over the HPA's 5? No: the
	// HPA's count stays, raised to the user's; as the Deployment's.
	w.isvc.Spec.Replicas = 3
	out = w.reconcile()
	w.apply(out.Actions)
	if lwsReplicas(w.obs.LeaderWorkerSet) != 5 {
		t.Errorf("replicas after 2 -> 3 with the HPA at 5: %d", lwsReplicas(w.obs.LeaderWorkerSet))
	}
}

// TestMultiNodeParallelism: spec.parallelism splits a multi-node replica in multiNode's
// defaults' place; the pods' GPUs stay the replica's over its nodes.
func TestMultiNodeParallelism(t *testing.T) {
	w := multiNodeWorld()
	w.ext.Parallelism = &crd.Parallelism{TensorParallelSize: 4, PipelineParallelSize: 4}
	l := DesiredChildren(w.isvc, &w.ext, w.f).LeaderWorkerSet
	leader := lwsContainer(t, l, "leaderTemplate")
	if want := "'--tensor-parallel-size' '4' '--pipeline-parallel-size' '4' '--distributed-executor-backend' 'ray'"; !strings.Contains(leader.Args[0], want) {
		t.Errorf("leader script %q lacks %q", leader.Args[0], want)
	}
	if g := leader.Resources.Limits["nvidia.com/gpu"]; g.Value() != 8 {
		t.Errorf("leader asks %s GPUs, want 8 (16 over 2 nodes)", g.String())
	}
}

// TestMultiNodeSwitch: single-node to multi-node and back replaces the child that runs the
// pods; the Service, HPA and PDB follow.
func TestMultiNodeSwitch(t *testing.T) {
	w := newWorld(2)
	w.isvc.Spec.GPUsPerReplica = ptr.To[int32](16)
	w.ext.MultiNode = &crd.MultiNode{Nodes: 2}
	w.f.LeaderWorkerSets = true
	w.ext.MultiNode = nil
	w.isvc.Spec.GPUsPerReplica = ptr.To[int32](8)
	w.apply(w.reconcile().Actions)
	if w.obs.Deployment == nil {
		t.Fatal("no Deployment")
	}
	w.isvc.Spec.GPUsPerReplica = ptr.To[int32](16)
	w.ext.MultiNode = &crd.MultiNode{Nodes: 2}
	out := w.reconcile()
	if got := verbs(out.Actions); got != "create LeaderWorkerSet, delete Deployment, update Service, update HorizontalPodAutoscaler" {
		t.Fatalf("to multi-node: %s", got)
	}
	w.apply(out.Actions)
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("after the switch: %s", verbs(out.Actions))
	}
	w.ext.MultiNode = nil
	w.isvc.Spec.GPUsPerReplica = ptr.To[int32](8)
	out = w.reconcile()
	if got := verbs(out.Actions); got != "create Deployment, delete LeaderWorkerSet, update Service, update HorizontalPodAutoscaler" {
		t.Fatalf("back to one node: %s", got)
	}
}

// TestMultiNodeUnsupported: without LeaderWorkerSet the spec is refused and nothing is
// touched, a serving Deployment included.
func TestMultiNodeUnsupported(t *testing.T) {
	w := newWorld(1)
	w.apply(w.reconcile().Actions)
	w.isvc.Spec.GPUsPerReplica = ptr.To[int32](16)
	w.ext.MultiNode = &crd.MultiNode{Nodes: 2}
	out := w.reconcile()
	if len(out.Actions) != 0 {
		t.Fatalf("acts without LeaderWorkerSet: %s", verbs(out.Actions))
	}
	if out.Status.Phase != crd.PhaseFailed || out.Status.Reason != ReasonMultiNodeUnsupported ||
		!strings.Contains(out.Status.Conditions[0].Message+out.Status.Conditions[1].Message, "install LeaderWorkerSet") {
		t.Fatalf("status %+v", out.Status)
	}
}
