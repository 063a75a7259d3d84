// An earlier version's adapter ConfigMap, which Reconcile deletes when ours: its name, drift
// and set.

package reconcile

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
)

// AdaptersConfigMapName is the ConfigMap an earlier version kept the adapter list in; the
// operator deletes its own (Reconcile) since adapters are loaded at run time.
func AdaptersConfigMapName(isvc string) string { return isvc + "-adapters" }

func configMapDrifted(live, want *corev1.ConfigMap) bool {
	return !hasLabels(live.Labels, want.Labels) || !maps.Equal(live.Data, want.Data)
}

func setConfigMap(out, want *corev1.ConfigMap) {
	out.Labels = mergeLabels(out.Labels, want.Labels)
	out.Data = maps.Clone(want.Data)
}
