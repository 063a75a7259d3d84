// Kueue's objects as cached: the pods' Workloads (why a pod waits for admission) and the
// ClusterQueues (what they borrow from their cohort), read from their unstructured form.

package kinds

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// KueueWorkloadGVR is Kueue's Workload (v1beta2, Kueue 0.15 and later): one per gated pod of a
// model Kueue manages, whose QuotaReserved condition says why the pod waits.
var KueueWorkloadGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

// Workload is what the diagnosis reads of a pod's Kueue Workload.
type Workload struct {
	Name string
	// Pending is Kueue's reason for not reserving quota yet (its QuotaReserved=False message:
	// "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu
	// in flavor gpu, 2 more needed. Pending the preemption of 1 workload(s)"); "" if none.
	Pending string
	// ClusterQueue is where its quota is reserved, once it is.
	ClusterQueue string
	// Position is where it waits, from Kueue's visibility API (the I/O layer reads it when
	// reconcile.WantsQueuePositions); nil when not read or not pending.
	Position *QueuePosition
}

// WorkloadOf reads a Kueue Workload owned by pods: their UIDs and what the diagnosis needs;
// ok is false for a Workload of anything else (a Job's). A pod group's Workload (a
// LeaderWorkerSet group's: Kueue makes one per group) is owned by every pod of the group.
func WorkloadOf(u *unstructured.Unstructured) (pods []types.UID, w Workload, ok bool) {
	for _, r := range u.GetOwnerReferences() {
		if r.Kind == "Pod" && r.APIVersion == "v1" {
			pods = append(pods, r.UID)
		}
	}
	if len(pods) == 0 {
		return nil, Workload{}, false
	}
	w.Name = u.GetName()
	w.ClusterQueue, _, _ = unstructured.NestedString(u.Object, "status", "admission", "clusterQueue")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "QuotaReserved" && m["status"] == "False" {
			w.Pending, _ = m["message"].(string)
		}
	}
	return pods, w, true
}

// KueueClusterQueueGVR is Kueue's ClusterQueue, whose status says what it borrows from its
// cohort: what Kueue may take back from the models it admitted.
var KueueClusterQueueGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}

// QueuePosition is how many pending Workloads Kueue considers before one (its visibility
// API's positions, from 0).
type QueuePosition struct {
	InLocalQueue, InClusterQueue int32
}

// ClusterQueue is what the status reads of a Kueue ClusterQueue: the quota it borrows.
type ClusterQueue struct {
	Name     string
	Borrowed []Borrowed
}

// Borrowed is quota a ClusterQueue uses beyond its own, from its cohort.
type Borrowed struct {
	Flavor, Resource, Amount string
}

// ClusterQueueOf reads a ClusterQueue's borrowing from status.flavorsUsage, in its order.
func ClusterQueueOf(u *unstructured.Unstructured) ClusterQueue {
	cq := ClusterQueue{Name: u.GetName()}
	flavors, _, _ := unstructured.NestedSlice(u.Object, "status", "flavorsUsage")
	for _, f := range flavors {
		fm, _ := f.(map[string]any)
		flavor, _ := fm["name"].(string)
		resources, _ := fm["resources"].([]any)
		for _, r := range resources {
			rm, _ := r.(map[string]any)
			name, _ := rm["name"].(string)
			amount := quantityString(rm["borrowed"])
			if amount != "" && amount != "0" {
				cq.Borrowed = append(cq.Borrowed, Borrowed{Flavor: flavor, Resource: name, Amount: amount})
			}
		}
	}
	return cq
}

// quantityString is a quantity as JSON decoded it: a string ("2", "500m") or a number.
func quantityString(v any) string {
	switch q := v.(type) {
	case string:
		return q
	case int64:
		return fmt.Sprint(q)
	case float64:
		return fmt.Sprint(q)
	}
	return ""
}
