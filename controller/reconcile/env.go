// The model server's environment: the operator's variables, owned by name beside others'.

package reconcile

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/example/inferenceservice-operator/crd"
)

// desiredEnv is the operator's variables, then the user's; nil when there are none.
func desiredEnv(ext *crd.SpecExtensions) []corev1.EnvVar {
	var env []corev1.EnvVar
	if ra := partsOf(ext.EngineName()).runtimeAdapters; ra != nil && len(ext.Adapters) > 0 {
		env = append(env, *ra)
	}
	// HF_HOME is the cache's, claim or emptyDir; a user's own HF_HOME (allowed without a
	// claim) points the downloads elsewhere and wins.
	if ext.Cache != nil || !slices.ContainsFunc(ext.Env, func(e corev1.EnvVar) bool { return e.Name == HFHomeEnv }) {
		env = append(env, cacheEnv)
	}
	if ext.Cache.Managed() {
		env = append(env, offlineEnv) // the filled cache is all it may read, read-only
		// transformers creates $HF_HOME/modules for a --trust-remote-code model's code (EROFS
		// on the read-only claim): the modules go on an emptyDir of their own
		env = append(env, modulesEnv)
	}
	for _, e := range ext.Env {
		e = *e.DeepCopy()
		if f := e.ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1" // as the API server defaults it, so the comparison sees no drift
		}
		env = append(env, e)
	}
	return env
}

// envNames is the EnvAnnotation value for env.
func envNames(env []corev1.EnvVar) string {
	names := make([]string, len(env))
	for i, e := range env {
		names[i] = e.Name
	}
	return strings.Join(names, ",")
}

// envDrifted: a variable the operator sets differs or is missing, or one it set before (prev,
// the live EnvAnnotation) is still there though the spec dropped it. Others' variables are not
// compared.
func envDrifted(have, want []corev1.EnvVar, prev string) bool {
	for _, w := range want {
		i := slices.IndexFunc(have, func(h corev1.EnvVar) bool { return h.Name == w.Name })
		if i < 0 || !equality.Semantic.DeepEqual(have[i], w) {
			return true
		}
	}
	for _, name := range splitNames(prev) {
		if !slices.ContainsFunc(want, func(w corev1.EnvVar) bool { return w.Name == name }) &&
			slices.ContainsFunc(have, func(h corev1.EnvVar) bool { return h.Name == name }) {
			return true
		}
	}
	return false
}

// setEnv sets the operator's variables in have by name (others keep their place), and removes
// the ones it set before (prev) that want no longer has.
func setEnv(have, want []corev1.EnvVar, prev string) []corev1.EnvVar {
	out := slices.DeleteFunc(slices.Clone(have), func(h corev1.EnvVar) bool {
		return slices.Contains(splitNames(prev), h.Name) && !slices.ContainsFunc(want, func(w corev1.EnvVar) bool { return w.Name == h.Name })
	})
	for _, w := range want {
		if i := slices.IndexFunc(out, func(h corev1.EnvVar) bool { return h.Name == w.Name }); i >= 0 {
			out[i] = w
		} else {
			out = append(out, w)
		}
	}
	return out
}

func splitNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
