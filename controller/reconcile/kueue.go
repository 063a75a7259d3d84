package reconcile

import (
	"strings"

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
}

// WorkloadOf reads a Kueue Workload owned by a pod: the pod's UID and what the diagnosis needs;
// ok is false for a Workload of anything else (a Job's).
func WorkloadOf(u *unstructured.Unstructured) (pod types.UID, w Workload, ok bool) {
	for _, r := range u.GetOwnerReferences() {
		if r.Kind == "Pod" && r.APIVersion == "v1" {
			pod, ok = r.UID, true
		}
	}
	if !ok {
		return "", Workload{}, false
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
	return pod, w, true
}

// KueueGate is the scheduling gate Kueue's pod webhook sets and its admission removes.
const KueueGate = "kueue.x-k8s.io/admission"

// kueueSays is Kueue's own account of a gated pod's wait, for the admission message.
func kueueSays(w Workload, found bool) string {
	switch {
	case !found:
		return "; no Kueue Workload for it yet"
	case w.Pending != "":
		return "; Kueue Workload " + w.Name + ": " + strings.TrimSuffix(firstLine(w.Pending), ".")
	case w.ClusterQueue != "":
		return "; Kueue Workload " + w.Name + ": quota reserved in ClusterQueue " + w.ClusterQueue + ", the gate about to be removed"
	}
	return "; Kueue Workload " + w.Name + ": not yet considered"
}
