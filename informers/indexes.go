// How a reconcile finds its objects in the caches without a scan: the indexes by model, by
// pod owner, by ClusterQueue and by GPU trouble.

package informers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

// byInstance indexes objects by namespace/kinds.InstanceLabel: a reconcile then reads its own
// pods, not a scan of every pod in the namespace (O(1), not O(N), per reconcile).
const byInstance = "instance"

func instanceIndex(obj interface{}) ([]string, error) {
	ns, name, ok := instanceOf(obj)
	if !ok {
		return nil, nil
	}
	return []string{ns + "/" + name}, nil
}

// byTrouble indexes nodes with GPU trouble under "troubled".
const byTrouble = "trouble"

func troubleIndex(obj interface{}) ([]string, error) {
	if n, ok := obj.(*corev1.Node); ok && kinds.NodeTroubled(n) {
		return []string{"troubled"}, nil
	}
	return nil, nil
}

// byPodOwner indexes Workloads by the namespace/UID of each pod that owns them (every pod of
// a group).
const byPodOwner = "podOwner"

func podOwnerIndex(obj interface{}) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	uids, _, _ := kinds.WorkloadOf(u)
	keys := make([]string, 0, len(uids))
	for _, uid := range uids {
		keys = append(keys, u.GetNamespace()+"/"+string(uid))
	}
	return keys, nil
}

// byClusterQueue indexes pods' Workloads by the ClusterQueue that admitted them.
const byClusterQueue = "clusterQueue"

func clusterQueueIndex(obj interface{}) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	if _, w, ok := kinds.WorkloadOf(u); ok && w.ClusterQueue != "" {
		return []string{w.ClusterQueue}, nil
	}
	return nil, nil
}
