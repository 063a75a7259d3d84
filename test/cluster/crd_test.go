// A CRD served as the operator's is: printer columns, kubectl edit, schema validation, the status subresource.

package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.localcluster.io
spec:
  group: test.localcluster.io
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Model, type: string, jsonPath: .spec.model}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [model]
            properties:
              replicas: {type: integer, minimum: 0, maximum: 10}
              model: {type: string, minLength: 1}
          status:
            type: object
            properties:
              phase: {type: string}
`

func TestCRDPrinterColumnsEditAndValidation(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, widgetCRD)
	eventually(t, 30*time.Second, func() (bool, string) {
		s := jsonpath(t, "", "crd/widgets.test.localcluster.io", `{.status.conditions[?(@.type=="Established")].status}`)
		return s == "True", "Established=" + s
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		_, _, err := c.Kubectl(context.Background(), "get", "widgets", "-n", ns)
		return err == nil, fmt.Sprint(err)
	})
	apply(t, ns, `apiVersion: test.localcluster.io/v1
kind: Widget
metadata:
  name: w1
spec:
  replicas: 1
  model: llama
`)
	kubectl(t, "patch", "widget", "w1", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Serving"}}`)
	out := kubectl(t, "get", "widgets", "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME REPLICAS MODEL PHASE AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "w1 1 llama Serving ") {
		t.Fatalf("kubectl get widgets:\n%s", out)
	}

	editor := func(expr string) []string {
		script := filepath.Join(t.TempDir(), "editor.sh")
		body := fmt.Sprintf("#!/bin/sh\nsed -i -e '%s' \"$1\"\n", expr)
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return []string{"EDITOR=" + script, "KUBE_EDITOR=" + script}
	}
	ctx := context.Background()
	if _, stderr, err := c.KubectlEnv(ctx, editor("s/replicas: 1$/replicas: 3/"), "edit", "widget", "w1", "-n", ns); err != nil {
		t.Fatalf("edit: %v %s", err, stderr)
	}
	if r := jsonpath(t, ns, "widget/w1", "{.spec.replicas}"); r != "3" {
		t.Fatalf("after edit replicas=%q", r)
	}
	_, stderr, err := c.KubectlEnv(ctx, editor("s/replicas: 3$/replicas: 50/"), "edit", "widget", "w1", "-n", ns)
	if err == nil {
		t.Fatalf("an edit violating the schema was accepted")
	}
	if !strings.Contains(stderr, `widgets.test.localcluster.io "w1" is invalid`) {
		t.Fatalf("unexpected edit error: %s", stderr)
	}
	// kubectl keeps the refused copy, with the server's reasons as comments.
	_, rest, _ := strings.Cut(stderr, "stored to \"")
	copyPath, _, _ := strings.Cut(rest, "\"")
	saved, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatalf("refused copy: %v (stderr %s)", err, stderr)
	}
	if !strings.Contains(string(saved), "spec.replicas: Invalid value: 50: spec.replicas in body should be less than or equal to 10") {
		t.Fatalf("refused copy lacks the validation error:\n%s", saved)
	}
	if r := jsonpath(t, ns, "widget/w1", "{.spec.replicas}"); r != "3" {
		t.Fatalf("refused edit changed replicas to %q", r)
	}
	// The status subresource: a main-resource update cannot change status.
	kubectl(t, "patch", "widget", "w1", "-n", ns, "--type=merge", "-p", `{"status":{"phase":"Hacked"}}`)
	if p := jsonpath(t, ns, "widget/w1", "{.status.phase}"); p != "Serving" {
		t.Fatalf("status changed through the main resource: %q", p)
	}
}
