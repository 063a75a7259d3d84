package crd

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// spellings are the ways vLLM v0.11 reads a list item as flag: each non-empty prefix argparse
// may take for it, with =value and with a .key (vLLM's JSON form), and a --flag's '-' as '_'.
func spellings(flag string) []string {
	dashes, name := "--", strings.TrimPrefix(flag, "--")
	if name == flag {
		dashes, name = "-", strings.TrimPrefix(flag, "-")
	}
	var out []string
	for i := 1; i <= len(name); i++ {
		p := dashes + name[:i]
		out = append(out, p, p+"=1", p+".x")
		if dashes == "--" && strings.Contains(name[:i], "-") {
			u := dashes + strings.ReplaceAll(name[:i], "-", "_")
			out = append(out, u, u+"=1")
		}
	}
	return out
}

// refusalsIn is the refusal messages among msgs, sorted, to compare CEL's with Validate's.
func refusalsIn(msgs []string) []string {
	var all []string
	for _, o := range slices.Concat(OwnedArgs, OwnedArgsWithAdapters) {
		all = append(all, o.Message)
	}
	for _, o := range slices.Concat(OwnedEnv, OwnedEnvWithAdapters) {
		all = append(all, o.Message)
	}
	var out []string
	for _, m := range msgs {
		if slices.Contains(all, m) && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// TestOwnedArgsRefusedByCELAndValidate: every spelling of every refused flag is refused by
// the CRD's CEL rules, with its group's message, and by the pure Validate with the same
// messages; the flags refused with adapters pass without them.
func TestOwnedArgsRefusedByCELAndValidate(t *testing.T) {
	evalCEL := newCELSpec(t)
	adapters := []any{map[string]any{"name": "a", "storageURI": "hf://o/a"}}
	check := func(t *testing.T, item string, withAdapters bool) []string {
		t.Helper()
		spec := map[string]any{"baseModel": "m", "replicas": int64(1), "engineArgs": []any{item, "1"}}
		ext := SpecExtensions{EngineArgs: []string{item, "1"}}
		if withAdapters {
			spec["adapters"] = adapters
			ext.Adapters = []Adapter{{Name: "a", StorageURI: "hf://o/a"}}
		}
		byCEL, byGo := refusalsIn(evalCEL(t, spec)), refusalsIn(validateEngine(&ext))
		if !slices.Equal(byCEL, byGo) {
			t.Errorf("%q: CEL refuses with %q, Validate with %q", item, byCEL, byGo)
		}
		return byCEL
	}
	for _, o := range OwnedArgs {
		for _, f := range o.Flags {
			for _, item := range spellings(f) {
				if got := check(t, item, false); !slices.Contains(got, o.Message) {
					t.Errorf("%q (for %s): refused with %q, want %q", item, f, got, o.Message)
				}
			}
		}
	}
	for _, o := range OwnedArgsWithAdapters {
		for _, f := range o.Flags {
			for _, item := range spellings(f) {
				if got := check(t, item, true); !slices.Contains(got, o.Message) {
					t.Errorf("%q (for %s) with adapters: refused with %q, want %q", item, f, got, o.Message)
				}
				if got := check(t, item, false); slices.Contains(got, o.Message) {
					t.Errorf("%q (for %s) without adapters: refused with %q", item, f, got)
				}
			}
		}
	}
}

// TestLookAlikesAllowed: real vLLM v0.11 flags that share a start with refused ones, but are
// no prefix of one, pass both checks.
func TestLookAlikesAllowed(t *testing.T) {
	evalCEL := newCELSpec(t)
	for _, item := range []string{
		"--max-model-len", "--max_model_len=8192", "--model-impl", "--model-loader-extra-config", "--enable-lora-bias",
		"--no-enable-lora-bias", "--max-loras", "--max-lora-rank", "--lora-dtype", "--lora-extra-vocab-size",
		"--disable-log-requests", "--enable-log-requests", "--disable-uvicorn-access-log", "--data-parallel-size-local",
		"-dpl", "-dcp", "--decode-context-parallel-size", "--data-parallel-backend", "--hf-overrides.max_position_embeddings",
		"--tokenizer", "--trust-remote-code", "--speculative-config.model", "-q", "-O3", "-1", "0.9",
	} {
		spec := map[string]any{"baseModel": "m", "replicas": int64(1), "engineArgs": []any{item},
			"adapters": []any{map[string]any{"name": "a", "storageURI": "hf://o/a"}}}
		ext := SpecExtensions{EngineArgs: []string{item}, Adapters: []Adapter{{Name: "a", StorageURI: "hf://o/a"}}}
		if got := evalCEL(t, spec); len(got) > 0 {
			t.Errorf("%q: CEL refuses with %q", item, got)
		}
		if got := validateEngine(&ext); len(got) > 0 {
			t.Errorf("%q: Validate refuses with %q", item, got)
		}
	}
}

// TestAPIKeyEnvWithAdapters: VLLM_API_KEY in spec.env is refused by CEL and Validate alike
// only while spec.adapters is not empty.
func TestAPIKeyEnvWithAdapters(t *testing.T) {
	evalCEL := newCELSpec(t)
	msg := OwnedEnvWithAdapters[0].Message
	for _, c := range []struct {
		adapters int
		want     bool
	}{{0, false}, {1, true}} {
		spec := map[string]any{"baseModel": "m", "replicas": int64(1),
			"env": []any{map[string]any{"name": "VLLM_API_KEY", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "k"}}}}}
		ext := SpecExtensions{Env: []corev1.EnvVar{{Name: "VLLM_API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}}
		if c.adapters > 0 {
			spec["adapters"] = []any{map[string]any{"name": "a", "storageURI": "hf://o/a"}}
			ext.Adapters = []Adapter{{Name: "a", StorageURI: "hf://o/a"}}
		} else {
			spec["adapters"] = []any{} // an empty list is no adapters, as the reconcile reads it
		}
		byCEL, byGo := evalCEL(t, spec), validateEngine(&ext)
		if slices.Contains(byCEL, msg) != c.want || slices.Contains(byGo, msg) != c.want {
			t.Errorf("%d adapters: CEL %q, Validate %q; want refused %v", c.adapters, byCEL, byGo, c.want)
		}
	}
}

// Patterns are put in single-quoted CEL strings: no quote nor backslash may appear.
func TestFlagPatternsAreCELSafe(t *testing.T) {
	for _, o := range slices.Concat(OwnedArgs, OwnedArgsWithAdapters) {
		if strings.ContainsAny(o.Pattern, `'\`) {
			t.Errorf("%v: pattern %s", o.Flags, o.Pattern)
		}
	}
}
