package reconcile

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/crd"
)

// TestEnvOwnedByName: the operator's variables are set and hand edits of them reverted, the
// ones a spec dropped removed, others' variables kept in place; setEnv's result never drifts.
func TestEnvOwnedByName(t *testing.T) {
	v := func(n, val string) corev1.EnvVar { return corev1.EnvVar{Name: n, Value: val} }
	for _, tc := range []struct {
		name       string
		have, want []corev1.EnvVar
		prev       string
		drift      bool
		after      string
	}{
		{"converged", []corev1.EnvVar{v("A", "1")}, []corev1.EnvVar{v("A", "1")}, "A", false, "[A=1]"},
		{"hand edit reverted", []corev1.EnvVar{v("A", "2")}, []corev1.EnvVar{v("A", "1")}, "A", true, "[A=1]"},
		{"others kept in place", []corev1.EnvVar{v("X", "w"), v("A", "1")}, []corev1.EnvVar{v("A", "1")}, "A", false, "[X=w A=1]"},
		{"dropped from the spec", []corev1.EnvVar{v("X", "w"), v("A", "1")}, nil, "A", true, "[X=w]"},
		{"never ours, not removed", []corev1.EnvVar{v("A", "1")}, nil, "", false, "[A=1]"},
		{"added", nil, []corev1.EnvVar{v("A", "1"), v("B", "2")}, "", true, "[A=1 B=2]"},
	} {
		if got := envDrifted(tc.have, tc.want, tc.prev); got != tc.drift {
			t.Errorf("%s: drifted %v, want %v", tc.name, got, tc.drift)
		}
		out := setEnv(tc.have, tc.want, tc.prev)
		got := "["
		for i, e := range out {
			if i > 0 {
				got += " "
			}
			got += fmt.Sprintf("%s=%s", e.Name, e.Value)
		}
		if got += "]"; got != tc.after {
			t.Errorf("%s: set %s, want %s", tc.name, got, tc.after)
		}
		if envDrifted(out, tc.want, envNames(tc.want)) {
			t.Errorf("%s: drifted after set: %v", tc.name, out)
		}
	}
}

// Without spec.cache the weights still outlive a container restart (an emptyDir under
// HF_HOME), and a user's own HF_HOME wins over the operator's without a duplicate.
func TestHFHomeWithoutCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []corev1.EnvVar
		want []string // HF_HOME values in order
	}{
		{"default", nil, []string{crd.CachePath}},
		{"the user's", []corev1.EnvVar{{Name: HFHomeEnv, Value: "/data/hf"}}, []string{"/data/hf"}},
	} {
		ext := &crd.SpecExtensions{Env: tc.env}
		var got []string
		for _, e := range desiredEnv(ext) {
			if e.Name == HFHomeEnv {
				got = append(got, e.Value)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: HF_HOME %v, want %v", tc.name, got, tc.want)
		}
		c := desiredContainer(&crd.InferenceServiceSpec{Model: "m"}, ext)
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == CacheVolume && m.MountPath == crd.CachePath }) {
			t.Errorf("%s: no cache mount: %v", tc.name, c.VolumeMounts)
		}
	}
}
