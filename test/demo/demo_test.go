package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestDemo walks `make demo` to its end, as the README promises it on a fresh machine: the
// model Ready from a few lines of v1beta1 YAML, 3 -> 6, read as v1alpha1 through the operator's
// conversion webhook, the HPA scaling on the queue through the
// metrics adapter, the Service put back, a pod's log and one completion answered. Every step
// returns an error when what it shows does not happen; the output is kept for a failure.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the local cluster")
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "demo.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// The walk prints to standard output, as `make demo` shows it; here into a file.
	stdout := os.Stdout
	os.Stdout = out
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Scaled(10*time.Minute))
	defer cancel()
	start := time.Now()
	err = run(ctx, false)
	os.Stdout = stdout
	b, _ := os.ReadFile(out.Name())
	if err != nil {
		t.Fatalf("the demo failed after %s: %v\nits output:\n%s", time.Since(start).Round(time.Second), err, b)
	}
	for _, want := range []string{
		"inferenceservice.ai.example.com/qwen3 condition met", // Ready, then 6 ready
		"horizontalpodautoscaler.autoscaling/qwen3 condition met",
		"load stopped after",
		"ai.example.com/v1alpha1 Qwen/Qwen3-0.6B 6", // v1beta1 stored, read as v1alpha1 through the webhook
		`"choices"`, // the completion's answer
		"Done.",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, b)
		}
	}
	t.Logf("the demo's walk in %s (%d lines of output)", time.Since(start).Round(time.Second), strings.Count(string(b), "\n"))
}
