package reconcile

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
