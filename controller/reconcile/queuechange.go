// A change of spec.queueName on a running Deployment, as a transition of its own: Kueue's
// Deployment webhook (v0.17.0, ValidateUpdate) refuses any change of kueue.x-k8s.io/queue-name
// while the Deployment has ready pods, and its removal always. Sent in the same update as
// the image, env or replicas, it had every change refused; held back, the others land.

package reconcile

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/crd"
)

// queueMove is what the Deployment's update does with the queue label.
type queueMove struct {
	// hold keeps the live label: the rest of the update goes without it.
	hold  bool
	cause *Cause
}

// decideQueueMove compares the live Deployment's queue with spec.queueName: the same, or a new
// queue while no pod is ready, goes through in the update; otherwise the label is held and the
// status says how to move it (spec.replicas: 0, then up again). A removed queue is never
// taken off: only a new Deployment is outside Kueue, and the operator deletes no Deployment
// (its RBAC has no delete), so the status tells the user to delete it at 0.
func decideQueueMove(isvc *crd.InferenceService, live *appsv1.Deployment) queueMove {
	have, want := live.Labels[QueueLabel], isvc.Spec.QueueName
	if have == want || want != "" && live.Status.ReadyReplicas == 0 {
		return queueMove{}
	}
	var msg string
	switch {
	case want == "":
		msg = "spec.queueName removed: Kueue refuses removing a Deployment's queue, so its pods stay in LocalQueue " + have +
			"; the other changes are applied. To leave Kueue: set spec.replicas: 0, and once its pods are gone delete the Deployment (kubectl delete deployment " +
			live.Name + " -n " + live.Namespace + "): the operator creates it anew without a queue; then scale up again"
	case have == "":
		msg = "spec.queueName " + want + ": Kueue refuses adding a queue to a Deployment with ready pods, so its pods stay outside Kueue" +
			"; the other changes are applied. To queue it: set spec.replicas: 0, and once no pod is ready, scale up again"
	default:
		msg = "spec.queueName " + want + ": Kueue refuses moving a Deployment with ready pods to another queue, so its pods stay in LocalQueue " + have +
			"; the other changes are applied. To move it: set spec.replicas: 0, and once no pod is ready, scale up again"
	}
	return queueMove{hold: true, cause: &Cause{RankQueueChange, ReasonQueueChangeWaiting, msg}}
}

// withQueueOf is want with live's queue label, on the Deployment and its pod template; want
// is shared and left as it is.
func withQueueOf(want, live *appsv1.Deployment) *appsv1.Deployment {
	held := *want
	held.Labels = withLabel(want.Labels, QueueLabel, live.Labels[QueueLabel])
	held.Spec.Template.Labels = withLabel(want.Spec.Template.Labels, QueueLabel, live.Labels[QueueLabel])
	return &held
}

// withLabel is a copy of labels with key set to value, or removed when value is "".
func withLabel(labels map[string]string, key, value string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	if value == "" {
		delete(out, key)
	} else {
		out[key] = value
	}
	return out
}

// decideLWSQueueMove is decideQueueMove for a multi-node model: Kueue v0.17.0's
// LeaderWorkerSet webhook makes the queue label immutable outright (ValidateImmutableField),
// so a LeaderWorkerSet changes queue only by being made anew. At spec.replicas 0 with no
// ready group the operator deletes it, and the next pass creates it in the new queue (or
// none); until then the live label is held, the other changes land, and the status says how.
func decideLWSQueueMove(isvc *crd.InferenceService, live *unstructured.Unstructured) (move queueMove, recreate bool) {
	have, want := live.GetLabels()[QueueLabel], isvc.Spec.QueueName
	if have == want {
		return queueMove{}, false
	}
	ready, _, _ := unstructured.NestedInt64(live.Object, "status", "readyReplicas")
	if isvc.Spec.Replicas == 0 && lwsReplicas(live) == 0 && ready == 0 {
		return queueMove{}, true
	}
	what := "spec.queueName " + want
	if want == "" {
		what = "spec.queueName removed"
	}
	from := "its groups stay in LocalQueue " + have
	if have == "" {
		from = "its groups stay outside Kueue"
	}
	msg := what + ": Kueue makes a LeaderWorkerSet's queue immutable, so " + from +
		"; the other changes are applied. To move it: set spec.replicas: 0; once no group is left the operator deletes the LeaderWorkerSet " +
		live.GetName() + " and creates it anew in the new queue; then scale up again"
	return queueMove{hold: true, cause: &Cause{RankQueueChange, ReasonQueueChangeWaiting, msg}}, false
}

// withLWSQueueOf is a copy of want with live's queue label on the LeaderWorkerSet and both pod
// templates; want is left as it is.
func withLWSQueueOf(want, live *unstructured.Unstructured) *unstructured.Unstructured {
	held := want.DeepCopy()
	q := live.GetLabels()[QueueLabel]
	held.SetLabels(withLabel(held.GetLabels(), QueueLabel, q))
	for _, name := range []string{"leaderTemplate", "workerTemplate"} {
		t, ok := lwsTemplate(held, name)
		if !ok {
			continue
		}
		t.Labels = withLabel(t.Labels, QueueLabel, q)
		unstructured.SetNestedField(held.Object, templateToUnstructured(&t), "spec", "leaderWorkerTemplate", name)
	}
	return held
}
