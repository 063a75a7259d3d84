package podmetrics

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// fakeOwners is the owner caches as a map keyed by group/kind/namespace/name.
type fakeOwners map[string]metav1.Object

func ownerKey(gk schema.GroupKind, namespace, name string) string {
	return gk.Group + "/" + gk.Kind + "/" + namespace + "/" + name
}

func (f fakeOwners) Get(gk schema.GroupKind, namespace, name string) metav1.Object {
	if o, ok := f[ownerKey(gk, namespace, name)]; ok {
		return o
	}
	return nil
}

// add caches an object of kind gk controlled by owner (nil: by nobody) and returns it.
func (f fakeOwners) add(gk schema.GroupKind, namespace, name string, owner *metav1.ObjectMeta, ownerGK schema.GroupKind) *metav1.ObjectMeta {
	o := &metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(fmt.Sprintf("uid-%s-%s-%s", gk.Kind, namespace, name))}
	if owner != nil {
		controlledBy(o, owner, ownerGK)
	}
	f[ownerKey(gk, namespace, name)] = o
	return o
}

func controlledBy(o metav1.Object, owner *metav1.ObjectMeta, gk schema.GroupKind) {
	yes := true
	o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: schema.GroupVersion{Group: gk.Group, Version: "v1"}.String(), Kind: gk.Kind, Name: owner.Name, UID: owner.UID, Controller: &yes}})
}

// deployment caches the chain isvc -> Deployment -> ReplicaSet of model in namespace and
// makes pod the ReplicaSet's.
func (f fakeOwners) deployment(pod *corev1.Pod, model string) {
	isvc := f.add(isvcKind, pod.Namespace, model, nil, schema.GroupKind{})
	d := f.add(deploymentKind, pod.Namespace, model, isvc, isvcKind)
	rs := f.add(replicaSetKind, pod.Namespace, model+"-7c9f", d, deploymentKind)
	controlledBy(pod, rs, replicaSetKind)
}

func TestServedBy(t *testing.T) {
	owners := fakeOwners{}
	mk := func(name, model string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-pod-" + name), Labels: map[string]string{InstanceLabel: model}}}
	}
	ok := mk("llama-7c9f-abcde", "llama")
	owners.deployment(ok, "llama")

	// A LeaderWorkerSet: its leaders are the leader StatefulSet's, its workers a worker
	// StatefulSet's that the leader pod controls.
	isvc := owners.add(isvcKind, "team-a", "big", nil, schema.GroupKind{})
	lws := owners.add(lwsKind, "team-a", "big", isvc, isvcKind)
	leaderSTS := owners.add(statefulSetKind, "team-a", "big", lws, lwsKind)
	leader := mk("big-0", "big")
	controlledBy(leader, leaderSTS, statefulSetKind)
	owners[ownerKey(podKind, "team-a", "big-0")] = leader
	workerSTS := owners.add(statefulSetKind, "team-a", "big-0", &leader.ObjectMeta, podKind)
	worker := mk("big-0-1", "big")
	controlledBy(worker, workerSTS, statefulSetKind)
	direct := mk("big-direct", "big")
	controlledBy(direct, lws, lwsKind)

	noOwner := mk("impostor", "llama")
	strangerRS := mk("stranger", "llama")
	plainD := owners.add(deploymentKind, "team-a", "web", nil, schema.GroupKind{})
	controlledBy(strangerRS, owners.add(replicaSetKind, "team-a", "web-1", plainD, deploymentKind), replicaSetKind)
	missingRS := mk("missing", "llama")
	controlledBy(missingRS, &metav1.ObjectMeta{Name: "gone", UID: "uid-gone"}, replicaSetKind)
	wrongUID := mk("wrong-uid", "llama")
	controlledBy(wrongUID, &metav1.ObjectMeta{Name: "llama-7c9f", UID: "uid-other"}, replicaSetKind)
	otherModel := mk("other-model", "qwen")
	owners.deployment(otherModel, "llama") // the chain reaches llama, the label says qwen
	skipsDeployment := mk("skip", "llama")
	controlledBy(skipsDeployment, owners.Get(isvcKind, "team-a", "llama").(*metav1.ObjectMeta), isvcKind)
	podOwnsPod := mk("pod-owned", "big")
	controlledBy(podOwnsPod, &leader.ObjectMeta, podKind)

	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{ok, "llama"}, {leader, "big"}, {worker, "big"}, {direct, "big"},
		{noOwner, ""}, {strangerRS, ""}, {missingRS, ""}, {wrongUID, ""}, {otherModel, ""},
		{skipsDeployment, ""}, {podOwnsPod, ""},
	} {
		t.Run(tc.pod.Name, func(t *testing.T) {
			got, served := ServedBy(tc.pod, owners)
			if served != (tc.want != "") || got != tc.want {
				t.Fatalf("ServedBy = %q, %v; want %q", got, served, tc.want)
			}
		})
	}
}
