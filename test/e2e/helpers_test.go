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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/crd"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-")
	ctx := ctxFor(t, time.Minute)
	_, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// kubectl runs kubectl as the cluster admin and fails the test on error.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := env.cluster.Kubectl(ctxFor(t, 2*time.Minute), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kubectlErr runs kubectl and returns its combined error text (for refusals).
func kubectlErr(t *testing.T, env2 []string, args ...string) (string, error) {
	t.Helper()
	out, stderr, err := env.cluster.KubectlEnv(ctxFor(t, 2*time.Minute), env2, args...)
	return out + stderr, err
}

// applyYAML pipes a manifest through a file to kubectl apply.
func applyYAML(t *testing.T, ns, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-n", ns, "-f", f)
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

func getISVC(t *testing.T, ns, name string) (*crd.InferenceService, error) {
	t.Helper()
	u, err := env.dyn.Resource(crd.Resource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return crd.FromUnstructured(u)
}

func createISVC(t *testing.T, ns, name string, spec map[string]any) (*unstructured.Unstructured, error) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	return env.dyn.Resource(crd.Resource).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
}

// waitPhase waits for the isvc's phase and returns the object.
func waitPhase(t *testing.T, ns, name string, phase crd.Phase, timeout time.Duration) *crd.InferenceService {
	t.Helper()
	var got *crd.InferenceService
	eventually(t, timeout, fmt.Sprintf("%s/%s phase %s", ns, name, phase), func() error {
		i, err := getISVC(t, ns, name)
		if err != nil {
			return err
		}
		if i.Status.Phase != phase {
			return fmt.Errorf("phase %q reason %q", i.Status.Phase, i.Status.Reason)
		}
		got = i
		return nil
	})
	return got
}

// writesSettle waits until the operator's write count stops moving and returns it.
func writesSettle(t *testing.T) float64 {
	t.Helper()
	var last float64 = -1
	var stableSince time.Time
	var result float64
	eventually(t, time.Minute, "operator writes to settle", func() error {
		w, err := env.op.Writes()
		if err != nil {
			return err
		}
		if w != last {
			last, stableSince = w, time.Now()
			return fmt.Errorf("writes still moving (%v)", w)
		}
		if time.Since(stableSince) < env.resync {
			return fmt.Errorf("stable for %s only", time.Since(stableSince))
		}
		result = w
		return nil
	})
	return result
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// quiesce waits until earlier tests' namespaces are gone, so their teardown (finalizers,
// garbage collection) does not count in this test's measurements.
func quiesce(t *testing.T) {
	t.Helper()
	eventually(t, 3*time.Minute, "earlier tests' namespaces to be deleted", func() error {
		l, err := env.kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
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
