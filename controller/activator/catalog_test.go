package activator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/crd"
)

// isvcObject is an InferenceService as the API server sends it, in v1alpha1's form with its
// v1beta1 fields (spec.autoscaling) in the annotation.
func isvcObject(ns, name string, uid types.UID, v1beta1Spec string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]interface{}{"namespace": ns, "name": name, "uid": string(uid), "resourceVersion": "7"},
		"spec":     map[string]interface{}{"model": "Qwen/Qwen3-0.6B", "replicas": int64(0), "gpusPerReplica": int64(1)},
		"status":   map[string]interface{}{"phase": "Ready"},
	}}
	if v1beta1Spec != "" {
		u.SetAnnotations(map[string]string{crd.AnnotationV1beta1Spec: v1beta1Spec})
	}
	return u
}

func ownedService(ns, name string, owner types.UID, kind, apiVersion string, controller bool) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"x": "y"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: owner, Controller: &controller}}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"a": "b"}}}
}

func TestStripModel(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		zero       bool
	}{
		{"minReplicas 0", `{"autoscaling":{"minReplicas":0,"maxReplicas":2},"replicasUnset":true}`, true},
		{"minReplicas 1", `{"autoscaling":{"minReplicas":1,"maxReplicas":2},"replicasUnset":true}`, false},
		{"no autoscaling", "", false},
		{"an annotation that does not decode", `{"autoscaling":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := StripModel(isvcObject("team-a", "qwen3", "u1", tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			m := o.(*ModelEntry)
			if m.ScalesToZero != tc.zero || m.Name != "qwen3" || m.Namespace != "team-a" || m.UID != "u1" || m.ResourceVersion != "7" {
				t.Fatalf("%+v, want ScalesToZero %v", m, tc.zero)
			}
			if m.Annotations != nil || m.Labels != nil {
				t.Fatalf("kept %v %v", m.Annotations, m.Labels)
			}
		})
	}
}

func TestServes(t *testing.T) {
	gv := crd.GroupVersion.String()
	zero := &ModelEntry{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "qwen3", UID: "u1"}, ScalesToZero: true}
	awake := &ModelEntry{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "qwen3", UID: "u1"}}
	for _, tc := range []struct {
		name  string
		model *ModelEntry
		svc   *corev1.Service
		want  bool
	}{
		{"at zero, the operator's Service", zero, ownedService("team-a", "qwen3", "u1", crd.Kind, gv, true), true},
		{"the other version's owner reference", zero, ownedService("team-a", "qwen3", "u1", crd.Kind, crd.Group+"/v1beta1", true), true},
		{"not at zero", awake, ownedService("team-a", "qwen3", "u1", crd.Kind, gv, true), false},
		{"no model", nil, ownedService("team-a", "qwen3", "u1", crd.Kind, gv, true), false},
		{"no Service yet (the operator is making it)", zero, nil, true},
		{"a namesake's Service (another UID)", zero, ownedService("team-a", "qwen3", "u0", crd.Kind, gv, true), false},
		{"owned, not controlled", zero, ownedService("team-a", "qwen3", "u1", crd.Kind, gv, false), false},
		{"controlled by another kind", zero, ownedService("team-a", "qwen3", "u1", "Deployment", "apps/v1", true), false},
		{"another group's InferenceService", zero, ownedService("team-a", "qwen3", "u1", crd.Kind, "serving.kserve.io/v1beta1", true), false},
		{"a tenant's own Service", zero, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "qwen3"}}, false},
	} {
		if got := Serves(tc.model, tc.svc); got != tc.want {
			t.Errorf("%s: Serves = %v, want %v", tc.name, got, tc.want)
		}
		// Written on only when the operator's Service is there (at zero or not).
		if got, want := Owns(tc.model, tc.svc), tc.svc != nil && (tc.want || tc.model == awake); got != want {
			t.Errorf("%s: Owns = %v, want %v", tc.name, got, want)
		}
	}
}

func TestModelsLooksUpEveryScope(t *testing.T) {
	keyed := func() cache.Store { return cache.NewStore(cache.MetaNamespaceKeyFunc) }
	models := NewModels()
	aI, aS, bI, bS := keyed(), keyed(), keyed(), keyed()
	models.Add(aI, aS)
	models.Add(bI, bS)
	o, _ := StripModel(isvcObject("team-b", "qwen3", "u1", `{"autoscaling":{"minReplicas":0,"maxReplicas":2},"replicasUnset":true}`))
	_ = bI.Add(o)
	s, _ := StripService(ownedService("team-b", "qwen3", "u1", crd.Kind, crd.GroupVersion.String(), true))
	_ = bS.Add(s)
	if !models.Serves(Key{Namespace: "team-b", Name: "qwen3"}) {
		t.Fatal("team-b/qwen3 not served")
	}
	for _, k := range []Key{{"team-a", "qwen3"}, {"team-b", "other"}, {"team-b", ""}} {
		if models.Serves(k) || models.Owned(k) {
			t.Errorf("%s served", k)
		}
	}
	if !models.Owned(Key{Namespace: "team-b", Name: "qwen3"}) {
		t.Error("team-b/qwen3's Service not owned")
	}
	if sv := s.(*corev1.Service); sv.Labels != nil || sv.Spec.Selector != nil || len(sv.OwnerReferences) != 1 {
		t.Errorf("StripService kept %+v", sv)
	}
}
