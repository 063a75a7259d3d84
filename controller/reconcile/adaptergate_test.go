package reconcile

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

func gatedPod(name string, serverReady bool, gate corev1.ConditionStatus) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: kinds.AdaptersGate}}}}
	p.Name, p.Namespace = name, "ns"
	st := corev1.ConditionFalse
	if serverReady {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.ContainersReady, Status: st}}
	if gate != "" {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: kinds.AdaptersGate, Status: gate})
	}
	return p
}

// The gate opens once the pod's server lists every adapter it can load (a refused one counts
// as settled), closes as soon as the server is not ready, and is left alone for a pod that was
// not asked or already says it.
func TestAdapterGates(t *testing.T) {
	want := []crd.Adapter{{Name: "sql", StorageURI: "hf://org/sql"}, {Name: "s3", StorageURI: "s3://b/x"}}
	loaded := []LoadedAdapter{{Name: "sql", Path: "org/sql"}}
	for _, c := range []struct {
		name     string
		want     []crd.Adapter
		pod      *corev1.Pod
		observed []PodAdapters
		gate     string // "": no change
	}{
		{"new pod, adapter listed", want, gatedPod("p", true, ""), []PodAdapters{{Pod: "p", Loaded: loaded}}, "True/AdaptersLoaded"},
		{"new pod, still loading", want, gatedPod("p", true, ""), []PodAdapters{{Pod: "p"}}, "False/AdaptersLoading"},
		{"already closed, still loading", want, gatedPod("p", true, corev1.ConditionFalse), []PodAdapters{{Pod: "p"}}, ""},
		{"a refused load settles", want, gatedPod("p", true, corev1.ConditionFalse), []PodAdapters{{Pod: "p", Failed: map[string]string{"sql": "404"}}}, "True/AdaptersLoaded"},
		{"loaded from another path", want, gatedPod("p", true, ""), []PodAdapters{{Pod: "p", Loaded: []LoadedAdapter{{Name: "sql", Path: "org/old"}}}}, "False/AdaptersLoading"},
		{"not asked", want, gatedPod("p", true, ""), []PodAdapters{{Pod: "p", Err: "timeout"}}, ""},
		{"container restarted", want, gatedPod("p", false, corev1.ConditionTrue), nil, "False/ServerNotReady"},
		{"open and served", want, gatedPod("p", true, corev1.ConditionTrue), []PodAdapters{{Pod: "p", Loaded: loaded}}, ""},
		{"adapters all removed", nil, gatedPod("p", true, corev1.ConditionFalse), nil, "True/AdaptersLoaded"},
		{"no gate declared", want, &corev1.Pod{}, []PodAdapters{{Pod: ""}}, ""},
	} {
		got := adapterGates(c.want, c.observed, []*corev1.Pod{c.pod})
		s := ""
		if len(got) == 1 {
			s = fmt.Sprintf("%s/%s", got[0].Status, got[0].Reason)
		}
		if s != c.gate || len(got) > 1 {
			t.Errorf("%s: %v, want %q", c.name, got, c.gate)
		}
	}
}

// The cache keeps what the gate is decided from: the pod's readiness gates, ContainersReady and
// the gate's condition; a pod without the gate keeps neither condition.
func TestStripPodKeepsTheAdaptersGate(t *testing.T) {
	p := gatedPod("p", true, corev1.ConditionFalse)
	p.Spec.Containers = []corev1.Container{{Name: kinds.ContainerName}}
	got, _ := kinds.StripPod(p.DeepCopy())
	s := got.(*corev1.Pod)
	if !kinds.HasAdaptersGate(&s.Spec) || !ServerReady(s) || gateStatus(s) != corev1.ConditionFalse {
		t.Fatalf("stripped: gates %v conditions %v", s.Spec.ReadinessGates, s.Status.Conditions)
	}
	if g := adapterGates([]crd.Adapter{{Name: "sql", StorageURI: "hf://org/sql"}}, []PodAdapters{{Pod: "p", Loaded: []LoadedAdapter{{Name: "sql", Path: "org/sql"}}}}, []*corev1.Pod{s}); len(g) != 1 || g[0].Status != corev1.ConditionTrue {
		t.Fatalf("gate on the cached pod: %v", g)
	}
	plain := gatedPod("q", true, "")
	plain.Spec.ReadinessGates = nil
	got, _ = kinds.StripPod(plain)
	if c := got.(*corev1.Pod).Status.Conditions; len(c) != 0 {
		t.Fatalf("a pod without the gate keeps %v", c)
	}
}
