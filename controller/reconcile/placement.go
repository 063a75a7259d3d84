// The pods' placement and identity (spec.nodeSelector, tolerations, affinity, topology spread,
// pull secrets, ServiceAccount, RuntimeClass, podMetadata) on the model's pod template: desired,
// drift and set. A field is the operator's only while the spec sets it, so the rest of the
// template stays free for admission webhooks and platform mutations; PlacementAnnotation
// records what it set, so a field the spec drops is removed, not left behind.

package reconcile

import (
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// PlacementAnnotation lists, on the Deployment or LeaderWorkerSet, the placement fields the
// operator set on its pod template: whole fields by name (tolerations, affinity, ...), and the
// keys of the maps it shares with others (nodeSelector/KEY, label/KEY, annotation/KEY).
const PlacementAnnotation = kinds.PlacementAnnotation

// Names of the whole fields in PlacementAnnotation; each is owned whole while set, as a
// server-side apply list of atomic type is.
const (
	fieldTolerations    = "tolerations"
	fieldAffinity       = "affinity"
	fieldSpread         = "topologySpreadConstraints"
	fieldPullSecrets    = "imagePullSecrets"
	fieldServiceAccount = "serviceAccountName"
	fieldRuntimeClass   = "runtimeClassName"
	keyNodeSelector     = "nodeSelector/"
	keyLabel            = "label/"
	keyAnnotation       = kinds.PlacementAnnotationKey
)

// applyPlacement sets the spec's placement on a desired pod template; the template's label
// map (shared with the other children) is cloned before the user's labels are added.
func applyPlacement(t *corev1.PodTemplateSpec, p *crd.Placement) {
	if p.Empty() {
		return
	}
	s := &t.Spec
	s.NodeSelector = maps.Clone(p.NodeSelector)
	q := p.DeepCopy()
	s.Tolerations, s.Affinity, s.TopologySpreadConstraints = q.Tolerations, q.Affinity, q.TopologySpreadConstraints
	s.ImagePullSecrets, s.RuntimeClassName = q.ImagePullSecrets, q.RuntimeClassName
	// The API server keeps the deprecated serviceAccount equal to serviceAccountName, and reads
	// it back when serviceAccountName is empty: both are set (and cleared) together.
	s.ServiceAccountName, s.DeprecatedServiceAccount = p.ServiceAccountName, p.ServiceAccountName
	if m := p.PodMetadata; m != nil {
		if len(m.Labels) > 0 {
			t.Labels = maps.Clone(t.Labels)
			if t.Labels == nil {
				t.Labels = map[string]string{}
			}
			maps.Copy(t.Labels, m.Labels)
		}
		if len(m.Annotations) > 0 {
			t.Annotations = maps.Clone(m.Annotations)
		}
	}
}

// placementRecord is the PlacementAnnotation value for the spec's placement; "" for none.
func placementRecord(p *crd.Placement) string {
	if p.Empty() {
		return ""
	}
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{fieldTolerations, len(p.Tolerations) > 0}, {fieldAffinity, p.Affinity != nil},
		{fieldSpread, len(p.TopologySpreadConstraints) > 0}, {fieldPullSecrets, len(p.ImagePullSecrets) > 0},
		{fieldServiceAccount, p.ServiceAccountName != ""}, {fieldRuntimeClass, p.RuntimeClassName != nil},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	out = append(out, keys(keyNodeSelector, p.NodeSelector)...)
	if m := p.PodMetadata; m != nil {
		out = append(out, keys(keyLabel, m.Labels)...)
		out = append(out, keys(keyAnnotation, m.Annotations)...)
	}
	return strings.Join(out, ",")
}

func keys(prefix string, m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, prefix+k)
	}
	sort.Strings(out)
	return out
}

// placementDrifted: a field or key the spec sets differs, or one the operator set before
// (prev, the live PlacementAnnotation) is still there though the spec dropped it. Fields and
// keys the operator never set are not compared.
func placementDrifted(have, want *corev1.PodTemplateSpec, prev string) bool {
	h, w := &have.Spec, &want.Spec
	if (len(w.Tolerations) > 0 && !equality.Semantic.DeepEqual(h.Tolerations, w.Tolerations)) ||
		(w.Affinity != nil && !equality.Semantic.DeepEqual(h.Affinity, w.Affinity)) ||
		(len(w.TopologySpreadConstraints) > 0 && !equality.Semantic.DeepEqual(h.TopologySpreadConstraints, w.TopologySpreadConstraints)) ||
		(len(w.ImagePullSecrets) > 0 && !equality.Semantic.DeepEqual(h.ImagePullSecrets, w.ImagePullSecrets)) ||
		(w.ServiceAccountName != "" && h.ServiceAccountName != w.ServiceAccountName) ||
		(w.RuntimeClassName != nil && (h.RuntimeClassName == nil || *h.RuntimeClassName != *w.RuntimeClassName)) ||
		!hasLabels(h.NodeSelector, w.NodeSelector) || !hasLabels(have.Annotations, want.Annotations) {
		return true
	}
	for _, tok := range splitNames(prev) {
		if !sets(want, tok) && sets(have, tok) {
			return true
		}
	}
	return false
}

// setPlacement writes placementDrifted's fields of want onto t, and removes what the operator
// set before (prev) that want no longer has. Labels are written with the template's own.
func setPlacement(t, want *corev1.PodTemplateSpec, prev string) {
	s, w := &t.Spec, &want.Spec
	for _, tok := range splitNames(prev) {
		if !sets(want, tok) {
			clear1(t, tok)
		}
	}
	if len(w.Tolerations) > 0 {
		s.Tolerations = slices.Clone(w.Tolerations)
	}
	if w.Affinity != nil {
		s.Affinity = w.Affinity.DeepCopy()
	}
	if len(w.TopologySpreadConstraints) > 0 {
		s.TopologySpreadConstraints = slices.Clone(w.TopologySpreadConstraints)
	}
	if len(w.ImagePullSecrets) > 0 {
		s.ImagePullSecrets = slices.Clone(w.ImagePullSecrets)
	}
	if w.ServiceAccountName != "" {
		s.ServiceAccountName, s.DeprecatedServiceAccount = w.ServiceAccountName, w.ServiceAccountName
	}
	if w.RuntimeClassName != nil {
		s.RuntimeClassName = w.RuntimeClassName
	}
	if len(w.NodeSelector) > 0 {
		s.NodeSelector = mergeLabels(s.NodeSelector, w.NodeSelector)
	}
	if len(want.Annotations) > 0 {
		t.Annotations = mergeLabels(t.Annotations, want.Annotations)
	}
}

// sets reports whether the template sets tok's field or key: the desired template (is it
// still wanted?) or the live one (is it still there?).
func sets(t *corev1.PodTemplateSpec, tok string) bool {
	s := &t.Spec
	switch tok {
	case fieldTolerations:
		return len(s.Tolerations) > 0
	case fieldAffinity:
		return s.Affinity != nil
	case fieldSpread:
		return len(s.TopologySpreadConstraints) > 0
	case fieldPullSecrets:
		return len(s.ImagePullSecrets) > 0
	case fieldServiceAccount:
		return s.ServiceAccountName != "" || s.DeprecatedServiceAccount != ""
	case fieldRuntimeClass:
		return s.RuntimeClassName != nil
	}
	m, k := keyedMap(t, tok)
	_, ok := m[k]
	return ok
}

// clear1 removes tok's field or key from t.
func clear1(t *corev1.PodTemplateSpec, tok string) {
	s := &t.Spec
	switch tok {
	case fieldTolerations:
		s.Tolerations = nil
	case fieldAffinity:
		s.Affinity = nil
	case fieldSpread:
		s.TopologySpreadConstraints = nil
	case fieldPullSecrets:
		s.ImagePullSecrets = nil
	case fieldServiceAccount:
		s.ServiceAccountName, s.DeprecatedServiceAccount = "", ""
	case fieldRuntimeClass:
		s.RuntimeClassName = nil
	default:
		if m, k := keyedMap(t, tok); m != nil {
			delete(m, k)
		}
	}
}

// keyedMap is the template's map a keyed token names, and the key; nil for other tokens.
func keyedMap(t *corev1.PodTemplateSpec, tok string) (map[string]string, string) {
	if k, ok := strings.CutPrefix(tok, keyNodeSelector); ok {
		return t.Spec.NodeSelector, k
	}
	if k, ok := strings.CutPrefix(tok, keyLabel); ok {
		return t.Labels, k
	}
	if k, ok := strings.CutPrefix(tok, keyAnnotation); ok {
		return t.Annotations, k
	}
	return nil, ""
}

// fillPodPlacement is what the weights fill Job's pod takes of the model's placement: the
// pull secrets (it runs the model's image), the tolerations (it may run on the model's
// tainted pool, needing no GPU it is not forced there: no node selector, affinity or
// RuntimeClass), the ServiceAccount when spec.cache names none, and the added labels and
// annotations (a platform's cost labels, a mesh's opt-out).
func fillPodPlacement(t *corev1.PodTemplateSpec, ext *crd.SpecExtensions) {
	p := ext.Placement.DeepCopy()
	t.Spec.ImagePullSecrets, t.Spec.Tolerations = p.ImagePullSecrets, p.Tolerations
	if t.Spec.ServiceAccountName == "" {
		t.Spec.ServiceAccountName = p.ServiceAccountName
	}
	if m := p.PodMetadata; m != nil {
		for k, v := range m.Labels {
			if _, ok := t.Labels[k]; !ok {
				if t.Labels == nil {
					t.Labels = map[string]string{}
				}
				t.Labels[k] = v
			}
		}
		if len(m.Annotations) > 0 {
			t.Annotations = m.Annotations
		}
	}
}
