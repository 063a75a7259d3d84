package reconcile

import (
	"testing"

	"github.com/example/inferenceservice-operator/crd"
)

func TestPriorityAndQueue(t *testing.T) {
	w := newWorld(1)
	w.isvc.Spec.PriorityClassName, w.isvc.Spec.QueueName = "online-high", "team-a"
	d := desiredDeployment(w.isvc, &crd.SpecExtensions{}, sharedOf(w.isvc))
	if d.Spec.Template.Spec.PriorityClassName != "online-high" || d.Labels[QueueLabel] != "team-a" || d.Spec.Template.Labels[QueueLabel] != "team-a" {
		t.Fatalf("priority %q labels %v / %v", d.Spec.Template.Spec.PriorityClassName, d.Labels, d.Spec.Template.Labels)
	}
	if _, ok := desiredService(sharedOf(w.isvc), false).Labels[QueueLabel]; ok {
		t.Fatal("only the pods' owner carries the queue label")
	}
	w.apply(w.reconcile().Actions)
	w.isvc.Spec.PriorityClassName = "offline-low"
	out := w.reconcile()
	if verbs(out.Actions) != "update Deployment" || out.Actions[0].Object.(interface{ GetName() string }).GetName() != "qwen3" {
		t.Fatalf("priority change: %s", verbs(out.Actions))
	}
}

// TestKueueDeploymentIntegration: Kueue v0.17's Deployment integration reads the queue label
// from the Deployment's own metadata, and its webhook then marks the pod template (a label and
// the annotation that makes its pod webhook gate each pod). The operator must carry the label
// there and must neither see that marking as drift (an update on every sync, each one mutated
// again by the webhook) nor strip it when it updates the Deployment for another reason.
func TestKueueDeploymentIntegration(t *testing.T) {
	w := newWorld(1)
	w.isvc.Spec.QueueName = "team-a"
	want := DesiredChildren(w.isvc, &crd.SpecExtensions{}, Features{})
	if want.Deployment.Labels[QueueLabel] != "team-a" {
		t.Fatalf("the Deployment's labels %v lack %s", want.Deployment.Labels, QueueLabel)
	}
	live := want.Deployment.DeepCopy()
	tmpl := &live.Spec.Template
	tmpl.Labels["kueue.x-k8s.io/managed"] = "true"
	tmpl.Annotations = map[string]string{"kueue.x-k8s.io/pod-suspending-parent": "deployment"}
	if deploymentDrifted(live, want.Deployment, want.Scale) {
		t.Fatal("Kueue's marks on the pod template read as drift")
	}
	w.isvc.Spec.Image = "vllm/vllm-openai:v0.12.0"
	changed := DesiredChildren(w.isvc, &crd.SpecExtensions{}, Features{})
	setDeployment(live, changed.Deployment, changed.Scale)
	if tmpl.Annotations["kueue.x-k8s.io/pod-suspending-parent"] != "deployment" || tmpl.Labels["kueue.x-k8s.io/managed"] != "true" || tmpl.Labels[QueueLabel] != "team-a" {
		t.Fatalf("an update dropped Kueue's marks: labels %v annotations %v", tmpl.Labels, tmpl.Annotations)
	}
}
