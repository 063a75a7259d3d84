// The managed cache's fill Job: the desired Job (the engine's fill in the model's own image,
// or the s3 copy of cache_s3.go), and what its pod and its log say while it runs.

package reconcile

import (
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

const (
	// fillBackoffLimit retries a failed download; each retry resumes the files the last one
	// left (huggingface_hub keeps .incomplete blobs and continues them with a Range request).
	fillBackoffLimit = 6
	// fillDeadline bounds a whole fill, retries included: a few hundred GB on a slow link.
	fillDeadline = 6 * 3600
	// fillContainer is the fill Job's container.
	fillContainer = "download"
)

// desiredFillJob downloads the weights (and the hf:// adapters) onto the claim with the
// engine's fill, in the model's own image: into HF_HOME's hub cache, the layout the engine
// reads.
func desiredFillJob(isvc *crd.InferenceService, ext *crd.SpecExtensions, claim string) *batchv1.Job {
	if _, ok := s3Source(ext.Cache); ok {
		return desiredS3FillJob(isvc, ext, claim)
	}
	fill := engineOf(isvc).Fill()
	env := []corev1.EnvVar{{Name: HFHomeEnv, Value: crd.CachePath}}
	for _, e := range fill.Env {
		env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	if ref := tokenRef(ext); ref != nil {
		env = append(env, corev1.EnvVar{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}})
	}
	return fillJob(isvc, ext, claim, corev1.Container{
		Command: fill.Command,
		Args:    append([]string{isvc.Spec.Model, WeightsRevision(ext)}, hubAdapters(ext)...),
		Env:     env,
	}, fill.TooSmallExit)
}

// fillJob is the managed claim's fill Job around the fill's container (its command, args and
// environment): the model's own image, the claim at the cache's path, no API token (the fill
// talks to its store only; a workload identity projects its own), the ServiceAccount of
// spec.cache.serviceAccountName, the pod's placement from the model's, and the Job failed at
// once on the exit codes no retry can change (failFast).
func fillJob(isvc *crd.InferenceService, ext *crd.SpecExtensions, claim string, c corev1.Container, failFast ...int32) *batchv1.Job {
	c.Name, c.Image = fillContainer, isvc.Spec.ImageFor(crd.EngineOf(isvc))
	c.VolumeMounts = []corev1.VolumeMount{{Name: CacheVolume, MountPath: crd.CachePath}}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: weightsMeta(isvc, ext, WeightsJobName(claim), claim),
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](fillBackoffLimit),
			ActiveDeadlineSeconds: ptr.To[int64](fillDeadline),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: ptr.To(fillContainer), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: failFast},
			}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{WeightsLabel: claim}},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					EnableServiceLinks:           ptr.To(false),
					ServiceAccountName:           ext.Cache.ServiceAccountName,
					AutomountServiceAccountToken: ptr.To(false),
					Containers:                   []corev1.Container{c},
					Volumes: []corev1.Volume{{Name: CacheVolume, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
				},
			},
		},
	}
	fillPodPlacement(&job.Spec.Template, ext)
	return job
}

// hubAdapters are the Hugging Face repositories of the model's hf:// adapters, sorted: the
// offline pods load them from the cache the fill writes.
func hubAdapters(ext *crd.SpecExtensions) []string {
	var ids []string
	for _, a := range ext.Adapters {
		if id, ok := strings.CutPrefix(a.StorageURI, "hf://"); ok && id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// tokenRef is the Hub token's Secret key: spec.cache.tokenSecret, else the one spec.env gives
// the server as HF_TOKEN (the fill needs what the server would have downloaded with).
func tokenRef(ext *crd.SpecExtensions) *corev1.SecretKeySelector {
	if s := ext.Cache.TokenSecret; s != nil {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: s.Name}, Key: s.Key}
	}
	for _, e := range ext.Env {
		if e.Name == "HF_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.DeepCopy()
		}
	}
	return nil
}

// fillPodWaits says, in the kubelet's or the scheduler's words, why the fill pod has not
// started when one of them has said: a missing Secret, an image that cannot be pulled, no
// node. "" when it is on its way (being scheduled, created, pulled) or there is no pod.
func fillPodWaits(p *corev1.Pod) string {
	if p == nil || p.Status.Phase != corev1.PodPending {
		return ""
	}
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return "waits " + w.Reason + ": " + strings.TrimSuffix(w.Message, ".")
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return "is not scheduled: " + strings.TrimSuffix(c.Message, ".")
		}
	}
	return ""
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobConditionMessage(j *batchv1.Job, t batchv1.JobConditionType) string {
	for _, c := range j.Status.Conditions {
		if c.Type == t {
			return strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return ""
}

// lastLogLine is the last non-empty line of a log, bounded for a status message.
func lastLogLine(log string) string {
	lines := strings.FieldsFunc(log, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			if len(l) > 300 {
				l = l[:300]
			}
			return l
		}
	}
	return ""
}
