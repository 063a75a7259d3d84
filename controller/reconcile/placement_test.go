package reconcile

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

func gpuPool() crd.Placement {
	return crd.Placement{
		NodeSelector:       map[string]string{"pool": "gpu"},
		Tolerations:        []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "regcred"}},
		ServiceAccountName: "model-reader",
		RuntimeClassName:   ptr.To("nvidia"),
		PodMetadata:        &crd.PodMetadata{Labels: map[string]string{"team": "search"}, Annotations: map[string]string{"sidecar.istio.io/inject": "false"}},
	}
}

// TestPlacementOnTemplate: every field of the spec is on the pod template, the token stays
// off, the operator's labels stay, and the record names what was set.
func TestPlacementOnTemplate(t *testing.T) {
	w := newWorld(1)
	ext := &crd.SpecExtensions{Placement: gpuPool()}
	d := desiredDeployment(w.isvc, ext, sharedOf(w.isvc))
	ps := &d.Spec.Template.Spec
	if ps.NodeSelector["pool"] != "gpu" || len(ps.Tolerations) != 1 || ps.ImagePullSecrets[0].Name != "regcred" ||
		ps.ServiceAccountName != "model-reader" || ps.DeprecatedServiceAccount != "model-reader" || *ps.RuntimeClassName != "nvidia" {
		t.Fatalf("template spec %+v", ps)
	}
	if a := ps.AutomountServiceAccountToken; a == nil || *a {
		t.Error("a ServiceAccount of the user's mounted the API token: vLLM never calls the API server")
	}
	if l := d.Spec.Template.Labels; l["team"] != "search" || !hasLabels(l, selectorLabels(w.isvc.Name)) || d.Labels["team"] != "" {
		t.Errorf("labels: template %v, Deployment %v", l, d.Labels)
	}
	if sharedOf(w.isvc).meta.Labels["team"] != "" {
		t.Error("the user's label was written into the shared labels")
	}
	if got, want := d.Annotations[PlacementAnnotation], "tolerations,imagePullSecrets,serviceAccountName,runtimeClassName,nodeSelector/pool,label/team,annotation/sidecar.istio.io/inject"; got != want {
		t.Errorf("record %q, want %q", got, want)
	}
	l := desiredLWS(w.isvc, ext, sharedOf(w.isvc))
	for _, name := range []string{"leaderTemplate", "workerTemplate"} {
		pt, _ := lwsTemplate(l, name)
		if len(pt.Spec.Tolerations) != 1 || pt.Spec.ServiceAccountName != "model-reader" || pt.Labels["team"] != "search" {
			t.Errorf("LeaderWorkerSet %s: %+v", name, pt)
		}
	}
}

// TestPlacementDriftAndSet walks a live Deployment through the user's changes, hand edits and
// others' additions: drift where the operator owns, none where it does not, and after set no drift.
func TestPlacementDriftAndSet(t *testing.T) {
	w := newWorld(1)
	want := func(p crd.Placement) *appsv1.Deployment {
		return desiredDeployment(w.isvc, &crd.SpecExtensions{Placement: p}, sharedOf(w.isvc))
	}
	none := want(crd.Placement{})
	webhook := corev1.Toleration{Key: "kubernetes.azure.com/scalesetpriority", Operator: corev1.TolerationOpExists}
	for _, tc := range []struct {
		name    string
		live    func() *appsv1.Deployment
		want    *appsv1.Deployment
		drifted bool
		check   func(t *testing.T, d *appsv1.Deployment)
	}{
		{name: "set, unchanged", live: func() *appsv1.Deployment { return want(gpuPool()) }, want: want(gpuPool())},
		{name: "others' fields where the spec sets none", want: none, live: func() *appsv1.Deployment {
			d := none.DeepCopy()
			d.Spec.Template.Spec.Tolerations = []corev1.Toleration{webhook}
			d.Spec.Template.Spec.NodeSelector = map[string]string{"platform": "x"}
			d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
			d.Spec.Template.Labels["mesh"] = "on"
			return d
		}},
		{name: "a platform's node selector key beside the user's", want: want(gpuPool()), live: func() *appsv1.Deployment {
			d := want(gpuPool())
			d.Spec.Template.Spec.NodeSelector["platform"] = "x"
			return d
		}},
		{name: "spec added tolerations", want: want(gpuPool()), drifted: true, live: func() *appsv1.Deployment { return none.DeepCopy() }},
		{name: "hand edit of a toleration", want: want(gpuPool()), drifted: true, live: func() *appsv1.Deployment {
			d := want(gpuPool())
			d.Spec.Template.Spec.Tolerations[0].Effect = corev1.TaintEffectNoExecute
			return d
		}},
		{name: "hand edit of the node selector", want: want(gpuPool()), drifted: true, live: func() *appsv1.Deployment {
			d := want(gpuPool())
			d.Spec.Template.Spec.NodeSelector["pool"] = "cpu"
			return d
		}},
		{name: "spec dropped every field", want: none, drifted: true, live: func() *appsv1.Deployment { return want(gpuPool()) },
			check: func(t *testing.T, d *appsv1.Deployment) {
				ps := &d.Spec.Template.Spec
				if len(ps.Tolerations) > 0 || len(ps.NodeSelector) > 0 || ps.ServiceAccountName != "" || ps.DeprecatedServiceAccount != "" ||
					ps.RuntimeClassName != nil || len(ps.ImagePullSecrets) > 0 || d.Spec.Template.Labels["team"] != "" ||
					len(d.Spec.Template.Annotations) > 0 || d.Annotations[PlacementAnnotation] != "" {
					t.Errorf("left behind: %+v %v %v", ps, d.Spec.Template.Labels, d.Annotations)
				}
			}},
		{name: "spec dropped tolerations, a webhook's stays elsewhere", drifted: true,
			want: want(crd.Placement{NodeSelector: map[string]string{"pool": "gpu"}}),
			live: func() *appsv1.Deployment {
				d := want(crd.Placement{NodeSelector: map[string]string{"pool": "gpu"}, Tolerations: gpuPool().Tolerations})
				d.Spec.Template.Spec.NodeSelector["platform"] = "x"
				return d
			},
			check: func(t *testing.T, d *appsv1.Deployment) {
				if ps := &d.Spec.Template.Spec; len(ps.Tolerations) > 0 || ps.NodeSelector["platform"] != "x" || ps.NodeSelector["pool"] != "gpu" {
					t.Errorf("template %+v", ps)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The controller compares the Deployment as the informer caches it.
			o, _ := kinds.StripDeployment(tc.live())
			live := o.(*appsv1.Deployment)
			sc := scaleOf(w.isvc, &crd.SpecExtensions{})
			if got := deploymentDrifted(live, tc.want, sc); got != tc.drifted {
				t.Fatalf("drifted = %v, want %v", got, tc.drifted)
			}
			setDeployment(live, tc.want, sc)
			if deploymentDrifted(live, tc.want, sc) {
				t.Fatal("drifted after set")
			}
			if tc.check != nil {
				tc.check(t, live)
			}
		})
	}
}

// TestFillJobPlacement: the fill pod pulls the model's image with its secrets, tolerates its
// pool without being forced there, and runs as spec.cache.serviceAccountName, else the model's.
func TestFillJobPlacement(t *testing.T) {
	w := newWorld(1)
	ext := &crd.SpecExtensions{Cache: &crd.Cache{Size: "40Gi"}, Placement: gpuPool()}
	ps := desiredFillJob(w.isvc, ext, "weights").Spec.Template.Spec
	if ps.ImagePullSecrets[0].Name != "regcred" || len(ps.Tolerations) != 1 || ps.ServiceAccountName != "model-reader" ||
		len(ps.NodeSelector) > 0 || ps.RuntimeClassName != nil || ps.Affinity != nil {
		t.Fatalf("fill pod %+v", ps)
	}
	ext.Cache = &crd.Cache{Size: "40Gi", Source: "s3://models/q", ServiceAccountName: "s3-reader"}
	if sa := desiredFillJob(w.isvc, ext, "weights").Spec.Template.Spec.ServiceAccountName; sa != "s3-reader" {
		t.Fatalf("s3 fill runs as %q, want spec.cache.serviceAccountName", sa)
	}
}
