package incluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// writeFile writes content into the test's temporary directory and returns the path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func createISVC(t *testing.T, ns, name string, replicas int64) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"model": "Qwen/Qwen3-0.6B", "replicas": replicas, "gpusPerReplica": int64(1)},
	}}
	if _, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Create(testenv.Ctx(t, time.Minute), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startOperator runs the operator binary (or a wrapper of it) with args and stops it when the
// test ends. Its log is kept in env.Dir under the given name.
func startOperator(t *testing.T, bin, name string, args ...string) *operator.Process {
	t.Helper()
	p, err := operator.Start(testenv.Ctx(t, time.Minute), bin, filepath.Join(env.Dir, name+".log"), args...)
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
	if err := p.WaitReady(testenv.Ctx(t, time.Minute), time.Minute); err != nil {
		t.Fatalf("%s: %v (log %s)", name, err, filepath.Join(env.Dir, name+".log"))
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
	l, err := env.Kube.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
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
	testenv.Eventually(t, timeout, "lease "+lease+" held by "+want, func() error {
		l, err := env.Kube.CoordinationV1().Leases(ns).Get(context.Background(), lease, metav1.GetOptions{})
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
	b, err := os.ReadFile(filepath.Join(env.Dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
