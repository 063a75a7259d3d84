package reconcile

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/example/inferenceservice-operator/crd"
)

// TestQueueChangeLetsOtherChangesLand: a serving model's queueName and image changed in one
// edit: the Deployment's update carries the image and keeps the live queue (Kueue refuses a
// queue change while any pod is ready), and the status says how to move it; with no pod ready
// the queue moves; a removed queue is held, and the status names the Deployment to delete at 0.
func TestQueueChangeLetsOtherChangesLand(t *testing.T) {
	w := newWorld(2)
	w.isvc.Spec.QueueName = "q1"
	w.apply(w.reconcile().Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged: %s", verbs(out.Actions))
	}

	w.isvc.Spec.QueueName, w.isvc.Spec.Image = "q2", "vllm/vllm-openai:v0.11.1"
	out := w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment" {
		t.Fatalf("queue and image changed: %s", got)
	}
	w.apply(out.Actions)
	d := w.obs.Deployment
	if d.Spec.Template.Spec.Containers[0].Image != "vllm/vllm-openai:v0.11.1" || d.Labels[QueueLabel] != "q1" || d.Spec.Template.Labels[QueueLabel] != "q1" {
		t.Fatalf("the update: image %s, queue %s (template %s); want the new image, the queue held at q1",
			d.Spec.Template.Spec.Containers[0].Image, d.Labels[QueueLabel], d.Spec.Template.Labels[QueueLabel])
	}
	w.podsReady()
	out = w.reconcile()
	if len(out.Actions) != 0 {
		t.Fatalf("held queue not converged: %s", verbs(out.Actions))
	}
	c := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionProgressing)
	if r := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionReady); r == nil || r.Status != "True" ||
		c == nil || c.Reason != ReasonQueueChangeWaiting || !strings.Contains(c.Message, "LocalQueue q1") || !strings.Contains(c.Message, "spec.replicas: 0") {
		t.Fatalf("the waiting queue change in the status: Ready %+v, Progressing %+v", r, c)
	}

	// No pod ready: the queue moves, in the Deployment and its template.
	noneReady(w)
	if got := verbs(w.reconcile().Actions); got != "update Deployment" {
		t.Fatalf("no pod ready: %s", got)
	}
	w.apply(w.reconcile().Actions)
	if d := w.obs.Deployment; d.Labels[QueueLabel] != "q2" || d.Spec.Template.Labels[QueueLabel] != "q2" {
		t.Fatalf("queue %s (template %s), want q2", d.Labels[QueueLabel], d.Spec.Template.Labels[QueueLabel])
	}

	// Removed: held, at any count (Kueue refuses the removal); the status names the Deployment
	// to delete, and a new one, without a queue, is created in its place.
	w.podsReady()
	w.isvc.Spec.QueueName = ""
	if out := w.reconcile(); len(out.Actions) != 0 || !hasReason(out, ReasonQueueChangeWaiting) {
		t.Fatalf("queue removed while serving: %s, reasons %v", verbs(out.Actions), out.Causes)
	}
	w.isvc.Spec.Replicas = 0
	w.apply(w.reconcile().Actions)
	noneReady(w)
	out = w.reconcile()
	if len(out.Actions) != 0 || !hasReason(out, ReasonQueueChangeWaiting) || !strings.Contains(fmt.Sprint(out.Causes), "kubectl delete deployment qwen3 -n default") {
		t.Fatalf("queue removed at 0: %s, causes %v", verbs(out.Actions), out.Causes)
	}
	w.obs.Deployment = nil // the user deletes it
	out = w.reconcile()
	if got := verbs(out.Actions); !strings.HasPrefix(got, "create Deployment") {
		t.Fatalf("after the delete: %s", got)
	}
	if _, ok := out.Actions[0].Object.(*appsv1.Deployment).Labels[QueueLabel]; ok {
		t.Fatal("the new Deployment keeps a queue")
	}
}

func noneReady(w *world) {
	d := w.obs.Deployment.DeepCopy()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation}
	w.obs.Deployment = d
}

func hasReason(out Output, reason string) bool {
	for _, c := range out.Causes {
		if c.Reason == reason {
			return true
		}
	}
	return false
}

// A multi-node model's queue: Kueue makes a LeaderWorkerSet's queue label immutable, so the
// label is held while the other changes land, and at replicas 0 with no group left the
// LeaderWorkerSet is deleted and made anew in the new queue.
func TestLWSQueueChangeLetsOtherChangesLand(t *testing.T) {
	w := multiNodeWorld()
	w.isvc.Spec.QueueName = "q1"
	w.apply(w.reconcile().Actions)
	lwsDefaults(t, w.obs.LeaderWorkerSet)
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged: %s", verbs(out.Actions))
	}

	w.isvc.Spec.QueueName, w.isvc.Spec.Image = "q2", "vllm/vllm-openai:v0.11.1"
	out := w.reconcile()
	if got := verbs(out.Actions); got != "update LeaderWorkerSet" || !hasReason(out, ReasonQueueChangeWaiting) {
		t.Fatalf("queue and image changed: %s, reasons %v", got, out.Causes)
	}
	w.apply(out.Actions)
	l := w.obs.LeaderWorkerSet
	leader := lwsContainer(t, l, "leaderTemplate")
	pt, _ := lwsTemplate(l, "workerTemplate")
	if leader.Image != "vllm/vllm-openai:v0.11.1" || l.GetLabels()[QueueLabel] != "q1" || pt.Labels[QueueLabel] != "q1" {
		t.Fatalf("the update: image %s, queue %s (worker template %s); want the new image, the queue held at q1",
			leader.Image, l.GetLabels()[QueueLabel], pt.Labels[QueueLabel])
	}
	out = w.reconcile()
	if len(out.Actions) != 0 {
		t.Fatalf("held queue not converged: %s", verbs(out.Actions))
	}
	said := false
	for _, c := range out.Causes {
		said = said || c.Reason == ReasonQueueChangeWaiting && strings.Contains(c.Message, "LocalQueue q1") && strings.Contains(c.Message, "spec.replicas: 0")
	}
	if !said {
		t.Fatalf("causes %v", out.Causes)
	}

	// At 0, no group left: deleted, then created in q2.
	w.isvc.Spec.Replicas = 0
	w.apply(w.reconcile().Actions)
	if n := lwsReplicas(w.obs.LeaderWorkerSet); n != 0 {
		t.Fatalf("scaled to %d groups, want 0", n)
	}
	if got := verbs(w.reconcile().Actions); got != "delete LeaderWorkerSet" {
		t.Fatalf("at 0 with a queue to move: %s", got)
	}
	w.apply(w.reconcile().Actions)
	if w.obs.LeaderWorkerSet != nil {
		t.Fatal("the LeaderWorkerSet was not deleted")
	}
	w.apply(w.reconcile().Actions)
	if l := w.obs.LeaderWorkerSet; l == nil || l.GetLabels()[QueueLabel] != "q2" {
		t.Fatalf("made anew: %v", l)
	}
}
