package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// TestNoTokenWhereNoneIsUsed: the model pods (a Deployment's, a LeaderWorkerSet's leaders and
// workers) and the weights fill pods never call the API server, so no ServiceAccount token is
// mounted in them; the endpoint picker reads pods and its pool, so it keeps its own.
func TestNoTokenWhereNoneIsUsed(t *testing.T) {
	noToken := func(what string, ps *corev1.PodSpec) {
		t.Helper()
		if a := ps.AutomountServiceAccountToken; a == nil || *a {
			t.Errorf("%s: automountServiceAccountToken %v, want false", what, a)
		}
	}
	w := newWorld(1)
	noToken("Deployment", &desiredDeployment(w.isvc, &crd.SpecExtensions{}, sharedOf(w.isvc)).Spec.Template.Spec)

	mn := multiNodeWorld()
	l := desiredLWS(mn.isvc, &mn.ext, sharedOf(mn.isvc))
	for _, name := range []string{"leaderTemplate", "workerTemplate"} {
		pt, ok := lwsTemplate(l, name)
		if !ok {
			t.Fatalf("LeaderWorkerSet: no %s", name)
		}
		noToken("LeaderWorkerSet "+name, &pt.Spec)
	}

	ext := &crd.SpecExtensions{Cache: &crd.Cache{Size: "40Gi"}}
	noToken("fill Job", &desiredFillJob(w.isvc, ext, "weights").Spec.Template.Spec)

	picker := desiredPicker(w.isvc, pickerMeta(w.isvc), Features{})
	if a := picker.Spec.Template.Spec.AutomountServiceAccountToken; a != nil && !*a {
		t.Error("the endpoint picker lost the token it reads its pods with")
	}
}

// TestTokenOptOutSetOnUpdate: a Deployment created before the opt-out gets it with the next
// update that rolls its pods anyway; its absence alone is no drift, and an update that rolls
// nothing (a scale change) leaves the template as it is.
func TestTokenOptOutSetOnUpdate(t *testing.T) {
	w := newWorld(1)
	want := desiredDeployment(w.isvc, &crd.SpecExtensions{}, sharedOf(w.isvc))
	live := want.DeepCopy()
	live.Spec.Template.Spec.AutomountServiceAccountToken = nil
	if templateDrifted(&live.Spec.Template, &want.Spec.Template, prior{}) {
		t.Fatal("a template without the opt-out alone is drift: an upgrade would roll every model")
	}
	setTemplate(&live.Spec.Template, &want.Spec.Template, prior{})
	if live.Spec.Template.Spec.AutomountServiceAccountToken != nil {
		t.Fatal("an update that rolls nothing wrote the opt-out: it would roll the pods")
	}
	live.Spec.Template.Spec.PriorityClassName = "changed"
	setTemplate(&live.Spec.Template, &want.Spec.Template, prior{})
	if !ptr.Equal(live.Spec.Template.Spec.AutomountServiceAccountToken, ptr.To(false)) {
		t.Fatalf("an update that rolls the pods leaves automountServiceAccountToken %v", live.Spec.Template.Spec.AutomountServiceAccountToken)
	}
}
