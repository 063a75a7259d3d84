package e2e

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/crd"
)

// TestBadInputCorpus: each invalid InferenceService is refused by the API server with a message
// that says what is wrong. Unknown fields are refused under strict field validation, kubectl's
// default.
func TestBadInputCorpus(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ok := func() map[string]any { return map[string]any{"model": "m", "replicas": int64(1)} }
	with := func(k string, v any) map[string]any { s := ok(); s[k] = v; return s }
	without := func(k string) map[string]any { s := ok(); delete(s, k); return s }
	res := func(r map[string]any) map[string]any { return with("resources", r) }
	long := func(n int) string { return strings.Repeat("a", n) }
	type tc struct {
		name string
		spec map[string]any
		obj  func(u *unstructured.Unstructured) // for metadata and top-level changes
		want string
	}
	cases := []tc{
		// Missing fields.
		{name: "no-spec", obj: func(u *unstructured.Unstructured) { delete(u.Object, "spec") }, want: "spec: Required value"},
		{name: "no-model", spec: without("model"), want: "spec.model: Required value"},
		{name: "no-replicas", spec: without("replicas"), want: "spec.replicas: Required value"},
		{name: "empty-spec", spec: map[string]any{}, want: "spec.model: Required value"},
		// Wrong types.
		{name: "model-int", spec: with("model", int64(7)), want: `spec.model: Invalid value: "integer": spec.model in body must be of type string`},
		{name: "model-bool", spec: with("model", true), want: "spec.model in body must be of type string"},
		{name: "model-list", spec: with("model", []any{"a"}), want: "spec.model in body must be of type string"},
		{name: "model-object", spec: with("model", map[string]any{"a": "b"}), want: `unknown field "spec.model.a"`},
		{name: "replicas-string", spec: with("replicas", "three"), want: "spec.replicas in body must be of type integer"},
		{name: "replicas-float", spec: with("replicas", 1.5), want: "spec.replicas in body must be of type int32"},
		{name: "replicas-bool", spec: with("replicas", true), want: "spec.replicas in body must be of type int32"},
		{name: "replicas-list", spec: with("replicas", []any{int64(1)}), want: "spec.replicas in body must be of type integer"},
		{name: "gpus-string", spec: with("gpusPerReplica", "one"), want: "spec.gpusPerReplica in body must be of type integer"},
		{name: "gpus-float", spec: with("gpusPerReplica", 0.5), want: "spec.gpusPerReplica in body must be of type int32"},
		{name: "image-int", spec: with("image", int64(1)), want: "spec.image in body must be of type string"},
		{name: "spec-string", obj: func(u *unstructured.Unstructured) { u.Object["spec"] = "x" }, want: `spec: Invalid value: "string": spec in body must be of type object`},
		{name: "resources-string", spec: with("resources", "big"), want: "spec.resources in body must be of type object"},
		// Negative and huge numbers.
		{name: "replicas-negative", spec: with("replicas", int64(-1)), want: "spec.replicas in body should be greater than or equal to 0"},
		{name: "replicas-huge", spec: with("replicas", int64(1001)), want: "spec.replicas in body should be less than or equal to 1000"},
		{name: "replicas-int64", spec: with("replicas", int64(3000000000)), want: "spec.replicas"},
		{name: "replicas-minint", spec: with("replicas", int64(-9223372036854775808)), want: "spec.replicas"},
		{name: "gpus-negative", spec: with("gpusPerReplica", int64(-1)), want: "spec.gpusPerReplica in body should be greater than or equal to 0"},
		{name: "gpus-huge", spec: with("gpusPerReplica", int64(17)), want: "spec.gpusPerReplica in body should be less than or equal to 16"},
		// Names too long for derived children, and bad characters.
		{name: long(51), spec: ok(), want: crd.RuleNameMessage},
		{name: long(63), spec: ok(), want: crd.RuleNameMessage},
		{name: "a-" + long(200), spec: ok(), want: crd.RuleNameMessage},
		{name: "1starts-with-digit", spec: ok(), want: crd.RuleNameMessage},
		{name: "has.dot", spec: ok(), want: crd.RuleNameMessage},
		{name: "ends-with-dash-", spec: ok(), want: "metadata.name"},
		{name: "UpperCase", spec: ok(), want: "metadata.name"},
		{name: "under_score", spec: ok(), want: "metadata.name"},
		// Bad strings.
		{name: "model-empty", spec: with("model", ""), want: "spec.model in body should be at least 1 chars long"},
		{name: "model-space", spec: with("model", "a b"), want: "spec.model in body should match"},
		{name: "model-newline", spec: with("model", "a\nb"), want: "spec.model in body should match"},
		{name: "model-flag", spec: with("model", "--trust-remote-code"), want: crd.RuleModelMessage},
		{name: "model-dash", spec: with("model", "-"), want: crd.RuleModelMessage},
		{name: "model-huge", spec: with("model", long(513)), want: "spec.model: Too long: may not be more than 512"},
		{name: "model-megabyte", spec: with("model", long(1<<20)), want: "spec.model: Too long"},
		{name: "image-empty", spec: with("image", ""), want: "spec.image in body should be at least 1 chars long"},
		{name: "image-space", spec: with("image", "vllm latest"), want: "spec.image in body should match"},
		{name: "image-huge", spec: with("image", long(600)), want: "spec.image: Too long"},
		{name: "priority-bad", spec: with("priorityClassName", "Bad_Name"), want: "spec.priorityClassName in body should match"},
		{name: "queue-too-long", spec: with("queueName", long(64)), want: "spec.queueName: Too long"},
		// Resources.
		{name: "resources-gpu-key", spec: res(map[string]any{"requests": map[string]any{"nvidia.com/gpu": "1"}}), want: crd.RuleResourceKeysMessage},
		{name: "resources-bad-quantity", spec: res(map[string]any{"requests": map[string]any{"cpu": "lots"}}), want: "spec.resources.requests.cpu in body should match"},
		{name: "resources-limit-below-request", spec: res(map[string]any{"requests": map[string]any{"memory": "8Gi"}, "limits": map[string]any{"memory": "4Gi"}}), want: crd.RuleLimitsCoverRequestsMessage},
		{name: "resources-gpu-name", spec: res(map[string]any{"gpuResourceName": "gpu"}), want: "spec.resources.gpuResourceName in body should match"},
		{name: "resources-too-many", spec: res(map[string]any{"limits": map[string]any{"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi", "hugepages-2Mi": "1Gi"}}), want: "spec.resources.limits: Too many"},
		// Unknown fields (strict field validation).
		{name: "unknown-spec-field", spec: with("replica", int64(3)), want: `unknown field "spec.replica"`},
		{name: "unknown-top-field", obj: func(u *unstructured.Unstructured) { u.Object["specs"] = map[string]any{} }, want: `unknown field "specs"`},
		{name: "unknown-resources-field", spec: res(map[string]any{"gpu": "1"}), want: `unknown field "spec.resources.gpu"`},
	}
	if len(cases) < 50 {
		t.Fatalf("corpus has %d cases, want at least 50", len(cases))
	}
	for _, c := range cases {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
			"metadata": map[string]any{"name": c.name, "namespace": ns},
			"spec":     c.spec,
		}}
		if c.spec == nil {
			u.Object["spec"] = ok()
		}
		if c.obj != nil {
			c.obj(u)
		}
		_, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{FieldValidation: "Strict"})
		label := c.name
		if len(label) > 40 {
			label = label[:40] + "..."
		}
		if err == nil {
			t.Errorf("%s: accepted", label)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) {
			if len(msg) > 400 {
				msg = msg[:400] + "..."
			}
			t.Errorf("%s: want a message containing %q, got %s", label, c.want, msg)
		}
	}
	t.Logf("%d invalid objects, each refused with its message", len(cases))
}
