// The managed weights cache (spec.cache.size): the claim named after the weights, the Job
// that fills it once, the fill's progress read from its log, and the gate that keeps the
// model's pods from starting before the weights are there.

package reconcile

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

const (
	// WeightsLabel names the weights a managed claim and its fill Job hold (their claim's
	// name): a claim of that name without it is someone else's, never adopted.
	WeightsLabel = "ai.example.com/weights"
	// WeightsModelAnnotation is the model id and revision a managed claim holds.
	WeightsModelAnnotation = "ai.example.com/weights-model"
	// WeightsFilledAnnotation marks a managed claim its fill Job completed, so the cache stays
	// filled when that Job is deleted (a later Job would only hold the models back again).
	WeightsFilledAnnotation = "ai.example.com/weights-filled"
	// HFOfflineEnv keeps a server on the filled cache from reaching the Hub at all.
	HFOfflineEnv = "HF_HUB_OFFLINE"
	// weightsRecheck is how often a filling cache is looked at: its Job's completion and its
	// log's progress come with no event the operator watches.
	weightsRecheck = 5 * time.Second
)

// Weights is what the I/O layer read of a managed cache: its claim, its fill Job, the Job's
// newest pod and the tail of its log once it runs (nil and "" when absent).
type Weights struct {
	Claim *corev1.PersistentVolumeClaim
	Job   *batchv1.Job
	Pod   *corev1.Pod
	Log   string
}

// WeightsPlan is the decision on a managed cache, applied by the I/O layer beside Actions:
// the claim and Job are shared by the models on the same weights, so none of them controls
// them, and each model adds itself as a (non-controller) owner. The garbage collector deletes
// them with their last owner.
type WeightsPlan struct {
	// Claim is the managed claim's name; "" without a managed cache.
	Claim string
	// Creates are the claim and Job to create; an AlreadyExists is adopted next pass.
	Creates []Child
	// Updates are copies of the cached claim or Job with this model's owner reference (and,
	// on the claim, the filled mark) added, sent as patches from Cached.
	Updates []Action
	// Filled: the model's pods may start.
	Filled bool
	cause  *Cause
	status *crd.CacheStatus
}

// WeightsRevision is the revision the model is served at: the engine's among its arguments
// (vLLM's --revision), else the Hub's main.
func WeightsRevision(ext *crd.SpecExtensions) string {
	if r := engineNamed(ext.EngineName()).Revision(ext.EngineArgs); r != "" {
		return r
	}
	return "main"
}

// WeightsClaimName is the managed claim of a model id at a revision: the same for every model
// on those weights in a namespace, so they share one claim and one fill. At most 57
// characters, so its Job's name (and the job-name label on its pods) stays within 63.
func WeightsClaimName(model, revision string) string {
	sum := sha256.Sum256([]byte(model + "@" + revision))
	slug := strings.Trim(nonName.ReplaceAllString(strings.ToLower(model), "-"), "-")
	const room = 57 - len("weights-") - 1 - 10
	if len(slug) > room {
		slug = strings.TrimRight(slug[:room], "-")
	}
	return "weights-" + slug + "-" + hex.EncodeToString(sum[:5])
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// WeightsJobName is the fill Job of a managed claim.
func WeightsJobName(claim string) string { return claim + "-fill" }

// WeightsID is what a managed cache holds: the Hub's model id at its revision, or an s3://
// source (its own revision is "": an object store has none).
func WeightsID(isvc *crd.InferenceService, ext *crd.SpecExtensions) (id, revision string) {
	if src, ok := s3Source(ext.Cache); ok {
		return src, ""
	}
	return isvc.Spec.Model, WeightsRevision(ext)
}

// ManagedClaimName is the managed claim of a model's cache.
func ManagedClaimName(isvc *crd.InferenceService, ext *crd.SpecExtensions) string {
	return WeightsClaimName(WeightsID(isvc, ext))
}

// cacheClaimName is the claim the model's pods mount: the user's (claimName or a pvc://
// source's), or the managed one.
func cacheClaimName(isvc *crd.InferenceService, ext *crd.SpecExtensions) string {
	if c := ext.Cache; c.Managed() {
		return ManagedClaimName(isvc, ext)
	}
	claim, _ := ext.Cache.PVC()
	return claim
}

// cacheVolume is the model's HF_HOME volume: the claim (the managed one read-only, since only
// its fill Job writes it), or an emptyDir, which outlives a container restart.
func cacheVolume(isvc *crd.InferenceService, ext *crd.SpecExtensions) corev1.Volume {
	if ext.Cache == nil {
		return corev1.Volume{Name: CacheVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	return corev1.Volume{Name: CacheVolume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
		ClaimName: cacheClaimName(isvc, ext), ReadOnly: ext.Cache.Managed()}}}
}

// weightsMeta is the managed claim's and Job's metadata, owned by the model that makes them.
func weightsMeta(isvc *crd.InferenceService, ext *crd.SpecExtensions, name, claim string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: isvc.Namespace,
		Labels:          map[string]string{kinds.ManagedByLabel: kinds.ManagedByValue, WeightsLabel: claim},
		Annotations:     map[string]string{WeightsModelAnnotation: weightsIDString(isvc, ext)},
		OwnerReferences: []metav1.OwnerReference{weightsOwner(isvc)},
	}
}

// weightsIDString is WeightsID as the claim's annotation and the status messages name it.
func weightsIDString(isvc *crd.InferenceService, ext *crd.SpecExtensions) string {
	id, rev := WeightsID(isvc, ext)
	if rev == "" {
		return id
	}
	return id + "@" + rev
}

// weightsOwner is a model's reference on the shared claim and Job: not their controller (no
// model is), and not blocking its owner's deletion (which would need rights on finalizers).
func weightsOwner(isvc *crd.InferenceService) metav1.OwnerReference {
	v := isvc.APIVersion
	if v == "" { // a decoded object may lose its TypeMeta; the garbage collector needs one
		v = crd.GroupVersion.String()
	}
	return metav1.OwnerReference{APIVersion: v, Kind: crd.Kind, Name: isvc.Name, UID: isvc.UID}
}

// desiredWeightsClaim is the managed claim: ReadWriteMany by default, so replicas on many
// nodes mount it.
func desiredWeightsClaim(isvc *crd.InferenceService, ext *crd.SpecExtensions, claim string) *corev1.PersistentVolumeClaim {
	c := ext.Cache
	modes := c.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	}
	size, _ := resource.ParseQuantity(c.Size) // validated by the CRD and crd.Validate
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: weightsMeta(isvc, ext, claim, claim),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      modes,
			StorageClassName: c.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

// decideWeights decides a managed cache: create the claim and its Job, adopt them (owner
// reference), mark the claim filled, and whether the model's pods may start.
func decideWeights(in *Input) WeightsPlan {
	ext, isvc := &in.Ext, in.ISVC
	if !ext.Cache.Managed() {
		return WeightsPlan{Filled: true}
	}
	claim := cacheClaimName(isvc, ext)
	p := WeightsPlan{Claim: claim}
	w := in.Observed.Weights
	model, _ := WeightsID(isvc, ext)
	switch c := w.Claim; {
	case c == nil:
		p.Creates = append(p.Creates, desiredWeightsClaim(isvc, ext, claim))
	case c.Labels[WeightsLabel] != claim:
		p.cause = &Cause{RankConflict, ReasonChildConflict, ConflictMessage("PersistentVolumeClaim", c) +
			" (a weights cache carries the label " + WeightsLabel + "=" + claim + ")"}
		return p
	case c.Annotations[WeightsFilledAnnotation] == "true":
		p.Filled = true
	}
	j := w.Job
	// A Job older than its claim filled a claim since deleted: it fills nothing now.
	stale := j != nil && w.Claim != nil && j.CreationTimestamp.Before(&w.Claim.CreationTimestamp)
	done := j != nil && w.Claim != nil && !stale && jobCondition(j, batchv1.JobComplete)
	p.Filled = p.Filled || done
	if c := w.Claim; c != nil {
		upd := withOwner(c, isvc)
		if done && c.Annotations[WeightsFilledAnnotation] != "true" {
			if upd == nil {
				upd = c.DeepCopy()
			}
			if upd.Annotations == nil {
				upd.Annotations = map[string]string{}
			}
			upd.Annotations[WeightsFilledAnnotation] = "true"
		}
		if upd != nil {
			p.Updates = append(p.Updates, Action{Verb: Update, Kind: "PersistentVolumeClaim", Object: upd, Cached: c})
		}
	}
	if p.Filled {
		p.status = &crd.CacheStatus{Claim: claim, Phase: crd.CacheFilled}
		return p
	}
	p.status = &crd.CacheStatus{Claim: claim, Phase: crd.CacheFilling}
	switch {
	case j == nil:
		p.Creates = append(p.Creates, desiredFillJob(isvc, ext, claim))
		p.cause = &Cause{RankWeights, ReasonWeightsDownloading, "downloading " + model + ": starting the fill Job " + WeightsJobName(claim) + " on PersistentVolumeClaim " + claim}
	case j.Labels[WeightsLabel] != claim:
		p.cause = &Cause{RankConflict, ReasonChildConflict, ConflictMessage("Job", j)}
	case stale:
		p.cause = &Cause{RankWeights, ReasonWeightsDownloadFailed, "the fill Job " + j.Name + " is older than PersistentVolumeClaim " + claim +
			" (the claim it filled was deleted): delete the Job to fill the new claim"}
		p.status.Phase = crd.CacheFailed
	case jobCondition(j, batchv1.JobFailed):
		msg := "downloading " + model + " failed: Job " + j.Name + " " + jobConditionMessage(j, batchv1.JobFailed)
		last := lastLogLine(w.Log)
		if last != "" {
			msg += "; its log ends: " + last
		}
		next := "; delete the Job to try again"
		switch {
		case strings.HasPrefix(last, "fill: ") && strings.Contains(last, "more than the volume"):
			// the fill's size refusal: a retry on the same claim cannot fit either
			next = "; raise spec.cache.size, then delete PersistentVolumeClaim " + claim + " and Job " + j.Name + " (both are made again, the claim at the new size)"
		case strings.HasPrefix(last, "fill: s3://") && strings.Contains(last, " refused: "):
			// the s3 fill's refusal by the store (credentials, bucket, prefix): a retry gets the same
			next = "; " + s3Remedy(ext.Cache) + ", then delete Job " + j.Name + " to try again"
		}
		p.cause = &Cause{RankWeights, ReasonWeightsDownloadFailed, msg + next}
		p.status.Phase = crd.CacheFailed
	default:
		msg := "downloading " + model + ": waiting for the fill Job " + j.Name + "'s pod"
		if why := fillPodWaits(w.Pod); why != "" {
			msg += ", which " + why
		}
		if pr, ok := engineOf(isvc).DownloadProgress(w.Log); ok {
			msg = pr.Message(model)
			p.status.Bytes, p.status.TotalBytes, p.status.BytesPerSecond = pr.Bytes, pr.Total, int64(pr.Rate)
		}
		p.cause = &Cause{RankWeights, ReasonWeightsDownloading, msg}
	}
	if j != nil && j.Labels[WeightsLabel] == claim {
		if upd := withOwner(j, isvc); upd != nil {
			p.Updates = append(p.Updates, Action{Verb: Update, Kind: "Job", Object: upd, Cached: j})
		}
	}
	return p
}

// withOwner is a copy of obj with the model's owner reference added, or nil when it has it.
func withOwner[T interface {
	Child
	DeepCopy() T
}](obj T, isvc *crd.InferenceService) T {
	for _, r := range obj.GetOwnerReferences() {
		if r.UID == isvc.UID {
			var none T
			return none
		}
	}
	c := obj.DeepCopy()
	c.SetOwnerReferences(append(c.GetOwnerReferences(), weightsOwner(isvc)))
	return c
}

// gate holds the model's pods while the cache fills: no create or update of the Deployment
// (or LeaderWorkerSet), so a new model starts none and a serving one keeps its pods on the
// weights they have until the new ones are there.
func (p *WeightsPlan) gate(out *Output) {
	if p.Filled {
		return
	}
	kept := out.Actions[:0]
	for _, a := range out.Actions {
		if !IsAnchorKind(a.Kind) || a.Verb == Delete {
			kept = append(kept, a)
		}
	}
	out.Actions = kept
}

// recheck is how soon to look at a filling cache again.
func (p *WeightsPlan) recheck() time.Duration {
	if p.Filled || p.cause == nil || p.cause.Reason != ReasonWeightsDownloading {
		return 0
	}
	return weightsRecheck
}
