package incluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createNamespace creates a namespace and deletes it when the test ends.
func createNamespace(t *testing.T, name string) string {
	t.Helper()
	_, err := env.kube.CoreV1().Namespaces().Create(ctxFor(t, time.Minute), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// namespace creates a namespace named after the test.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	return createNamespace(t, strings.Trim(name, "-"))
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

// writeFile writes content into the test's temporary directory and returns the path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

func createISVC(t *testing.T, ns, name string, replicas int64) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"model": "Qwen/Qwen3-0.6B", "replicas": replicas, "gpusPerReplica": int64(1)},
	}}
	if _, err := env.dyn.Resource(crd.Resource).Namespace(ns).Create(ctxFor(t, time.Minute), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getISVC(ns, name string) (*crd.InferenceService, error) {
	u, err := env.dyn.Resource(crd.Resource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return crd.FromUnstructured(u)
}

// waitPhase waits for the isvc's phase.
func waitPhase(t *testing.T, ns, name string, phase crd.Phase, timeout time.Duration) *crd.InferenceService {
	t.Helper()
	var got *crd.InferenceService
	eventually(t, timeout, fmt.Sprintf("%s/%s phase %s", ns, name, phase), func() error {
		i, err := getISVC(ns, name)
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

// startOperator runs the operator binary (or a wrapper of it) with args and stops it when the
// test ends. Its log is kept in env.dir under the given name.
func startOperator(t *testing.T, bin, name string, args ...string) *operator.Process {
	t.Helper()
	p, err := operator.Start(ctxFor(t, time.Minute), bin, filepath.Join(env.dir, name+".log"), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.Exited():
		default:
			p.Kill()
		}
	})
	if err := p.WaitReady(ctxFor(t, time.Minute), time.Minute); err != nil {
		t.Fatalf("%s: %v (log %s)", name, err, filepath.Join(env.dir, name+".log"))
	}
	return p
}

// counter scrapes one counter family of p, summed over labels matching match.
func counter(t *testing.T, p *operator.Process, name string, match func(map[string]string) bool) float64 {
	t.Helper()
	fams, err := p.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	return operator.SumCounter(fams, name, match)
}

func writes(t *testing.T, p *operator.Process) float64 {
	t.Helper()
	w, err := p.Writes()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// identity is the Lease holder identity main.go uses: hostname_pid.
func identity(t *testing.T, p *operator.Process) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s_%d", h, p.Pid())
}

// leaseHolder reads the Lease's holder ("" when none or released).
func leaseHolder(ns, name string) (string, error) {
	l, err := env.kube.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

// waitHolder polls the Lease until want holds it and returns how long after since it was
// acquired, from the Lease's own acquireTime (microseconds, same clock: one machine).
func waitHolder(t *testing.T, ns, lease, want string, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	var took time.Duration
	eventually(t, timeout, "lease "+lease+" held by "+want, func() error {
		l, err := env.kube.CoordinationV1().Leases(ns).Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := l.Spec.HolderIdentity; h == nil || *h != want {
			return fmt.Errorf("holder %v", l.Spec.HolderIdentity)
		}
		took = time.Since(since)
		if at := l.Spec.AcquireTime; at != nil {
			took = at.Sub(since)
		}
		return nil
	})
	return took
}

// readLog returns an operator's log so far.
func readLog(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
