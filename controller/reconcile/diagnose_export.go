// The layer diagnosis for readers outside the controller: the kubectl plugin runs the diagnosis the
// status is made from on what it lists itself, so it still answers when the operator is down.

package reconcile

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/crd"
)

// Diagnose runs the controller's layer diagnosis below the isvc's Deployment and returns its causes
// (as WithCauses takes them: most blocking has the lowest Rank) and the crashed runs their messages
// name, whose previous logs say why. Pods and ReplicaSets are filtered by owner as the controller
// filters them; nothing is annotated, so no log line is quoted in the messages.
func Diagnose(isvc *crd.InferenceService, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, pods []*corev1.Pod, now time.Time) ([]Cause, []CrashedRun) {
	w := diagnose(isvc, d, rss, pods, now)
	return w.causes, w.crashed
}
