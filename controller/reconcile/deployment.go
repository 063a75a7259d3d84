// The Deployment, a single-node model's running child: desired, drift and set.

package reconcile

import (
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

func desiredDeployment(isvc *crd.InferenceService, ext *crd.SpecExtensions, b shared) *appsv1.Deployment {
	meta := b.meta
	if q := isvc.Spec.QueueName; q != "" {
		meta.Labels = maps.Clone(meta.Labels)
		meta.Labels[QueueLabel] = q
	}
	podLabels := meta.Labels // the queue label goes on the pods too: Kueue admits pods
	volumes := []corev1.Volume{{Name: ShmVolume, VolumeSource: corev1.VolumeSource{EmptyDir: shmSource}}}
	// The container's own filesystem does not outlive a restart: without a claim the weights
	// go on an emptyDir, which does, so a restarted container loads, not downloads.
	volumes = append(volumes, cacheVolume(isvc, ext))
	if ext.Cache.Managed() { // the read-only cache cannot hold transformers' modules
		volumes = append(volumes, corev1.Volume{Name: ModulesVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(isvc.Spec.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: b.selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					PriorityClassName: isvc.Spec.PriorityClassName,
					// A Service named vllm in the namespace would inject VLLM_PORT=tcp://...,
					// which vLLM reads as its own port setting and aborts on.
					EnableServiceLinks: ptr.To(false),
					// vLLM (and Ray, across a multi-node group) never calls the API server: a
					// token mounted in a server that runs the tenant's image and parses prompts
					// would only be something to steal.
					AutomountServiceAccountToken: ptr.To(false),
					Containers:                   []corev1.Container{desiredContainer(podSpecOf(isvc, ext), ext)},
					Volumes:                      volumes,
				},
			},
		},
	}
	if len(ext.Adapters) > 0 {
		d.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: kinds.AdaptersGate}}
	}
	d.Annotations = map[string]string{ReplicasAnnotation: strconv.Itoa(int(isvc.Spec.Replicas))}
	if env := d.Spec.Template.Spec.Containers[0].Env; len(env) > 0 {
		d.Annotations[EnvAnnotation] = envNames(env)
	}
	applyPlacement(&d.Spec.Template, &ext.Placement)
	if r := placementRecord(&ext.Placement); r != "" {
		d.Annotations[PlacementAnnotation] = r
	}
	return d
}

func deploymentDrifted(live, want *appsv1.Deployment, sc Scale) bool {
	if !hasLabels(live.Labels, want.Labels) || live.Annotations[ReplicasAnnotation] != want.Annotations[ReplicasAnnotation] ||
		live.Annotations[EnvAnnotation] != want.Annotations[EnvAnnotation] || live.Annotations[PlacementAnnotation] != want.Annotations[PlacementAnnotation] ||
		live.Annotations[RaisedAnnotation] != want.Annotations[RaisedAnnotation] ||
		live.Annotations[AsleepSinceAnnotation] != want.Annotations[AsleepSinceAnnotation] || live.Annotations[AwakeSinceAnnotation] != want.Annotations[AwakeSinceAnnotation] {
		return true
	}
	if r, ok := want.Annotations[RevisionAnnotation]; ok && live.Annotations[RevisionAnnotation] != r {
		return true // a canary rollout's record of the stable's revision: metadata only, no pod rolls
	}
	if _, change := wantedReplicas(live, sc); change {
		return true
	}
	return templateDrifted(&live.Spec.Template, &want.Spec.Template, priorOf(live.Annotations))
}

// setDeployment writes the owned fields of want onto out, a copy of the live object.
func setDeployment(out, want *appsv1.Deployment, sc Scale) {
	n, _ := wantedReplicas(out, sc)
	out.Spec.Replicas = ptr.To(n)
	out.Labels = mergeLabels(out.Labels, want.Labels)
	prev := priorOf(out.Annotations)
	out.Annotations = setOwnedAnnotations(out.Annotations, want.Annotations)
	setTemplate(&out.Spec.Template, &want.Spec.Template, prev)
}

// setOwnedAnnotations writes the operator's annotations, removing the records (EnvAnnotation,
// PlacementAnnotation ...) want has none of.
func setOwnedAnnotations(have, want map[string]string) map[string]string {
	have = mergeLabels(have, want)
	for _, k := range []string{EnvAnnotation, PlacementAnnotation, RaisedAnnotation, AsleepSinceAnnotation, AwakeSinceAnnotation} {
		if _, ok := want[k]; !ok {
			delete(have, k)
		}
	}
	return have
}
