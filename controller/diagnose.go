package controller

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// rolloutCauses walks the layers below a converged Deployment, the troubleshooting walk of
// the runbook, and returns why fewer than spec.replicas pods serve.
func rolloutCauses(isvc *crd.InferenceService, d *appsv1.Deployment) []Cause {
	var causes []Cause
	want := isvc.Spec.Replicas
	desired := ptr.Deref(d.Spec.Replicas, 1)
	switch {
	case d.Status.ObservedGeneration < d.Generation:
		causes = append(causes, Cause{RankRollout, ReasonRolloutInProgress,
			fmt.Sprintf("Deployment %s: generation %d not yet observed by the deployment controller", d.Name, d.Generation)})
	case d.Status.UpdatedReplicas < desired || d.Status.Replicas > d.Status.UpdatedReplicas:
		causes = append(causes, Cause{RankRollout, ReasonRolloutInProgress,
			fmt.Sprintf("Deployment %s: %d of %d replicas updated, %d old replicas pending termination", d.Name, d.Status.UpdatedReplicas, desired, max(0, d.Status.Replicas-d.Status.UpdatedReplicas))})
	}
	if d.Status.ReadyReplicas < want {
		causes = append(causes, Cause{RankPods, ReasonReplicasNotReady,
			fmt.Sprintf("Deployment %s: %d/%d replicas ready", d.Name, d.Status.ReadyReplicas, want)})
	}
	return causes
}
