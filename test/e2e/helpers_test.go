package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// kubectlErr runs kubectl and returns its combined error text (for refusals).
func kubectlErr(t *testing.T, env2 []string, args ...string) (string, error) {
	t.Helper()
	out, stderr, err := env.Cluster.KubectlEnv(testenv.Ctx(t, 2*time.Minute), env2, args...)
	return out + stderr, err
}

// applyYAML pipes a manifest through a file to kubectl apply.
func applyYAML(t *testing.T, ns, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "apply", "-n", ns, "-f", f)
}

// writesSettle waits until the operator's write count stops moving and returns it: unchanged
// for a resync period and over a reconcile that ran after the last write (an event: on a
// loaded machine a period can pass with no reconcile, and a write it would make still to come).
func writesSettle(t *testing.T) float64 {
	t.Helper()
	var last, reconciles float64 = -1, 0
	var stableSince time.Time
	var result float64
	defer func() {
		if t.Failed() {
			logOperatorTail(t, 10)
		}
	}()
	testenv.Eventually(t, time.Minute, "operator writes to settle", func() error {
		fams, err := env.op.Scrape()
		if err != nil {
			return err
		}
		r := operator.SumCounter(fams, "controller_runtime_reconcile_total", nil) // first: a reconcile counted may write after
		w, err := env.op.Writes()
		if err != nil {
			return err
		}
		if w != last {
			last, reconciles, stableSince = w, r, time.Now()
			return fmt.Errorf("writes still moving (%v)", w)
		}
		if time.Since(stableSince) < env.resync || r <= reconciles {
			return fmt.Errorf("stable for %s and %v reconciles only", time.Since(stableSince), r-reconciles)
		}
		result = w
		return nil
	})
	return result
}

// logOperatorTail logs the last n lines of the operator's log: what it kept doing is the
// first question when its writes do not settle.
func logOperatorTail(t *testing.T, n int) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.Dir, "operator.log"))
	if err != nil {
		t.Logf("operator log: %v", err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	t.Logf("the operator log's last %d lines:\n%s", n, strings.Join(lines[max(0, len(lines)-n):], "\n"))
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// quiesce waits until earlier tests' namespaces are gone, so their teardown (finalizers,
// garbage collection) does not count in this test's measurements.
func quiesce(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 3*time.Minute, "earlier tests' namespaces to be deleted", func() error {
		l, err := env.Kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range l.Items {
			if n.Status.Phase == corev1.NamespaceTerminating {
				return fmt.Errorf("namespace %s terminating", n.Name)
			}
		}
		return nil
	})
}

// modelNamespace is a namespace of t's own whose models are deleted, through their finalizer,
// before the namespace goes.
func modelNamespace(t *testing.T) string {
	ns := env.Namespace(t)
	t.Cleanup(func() { env.Kubectl(t, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	return ns
}
