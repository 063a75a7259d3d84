// Package testenv is the common ground of the end-to-end suites: the local cluster with the CRD
// and the operator's RBAC installed from manifests/, the operator binary built, a kubeconfig for
// the operator's ServiceAccount, and the helpers every test uses (namespaces, kubectl, polling).
package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
)

// Where the manifests install the operator.
const (
	SystemNamespace = "inferenceservice-system"
	ServiceAccount  = "inferenceservice-operator"
)

// Env is one running local cluster prepared for the operator.
type Env struct {
	Cluster      *cluster.Cluster
	Kube         kubernetes.Interface
	Dyn          dynamic.Interface
	Root         string // the repository
	Dir          string // scratch: the operator binary, logs
	Bin          string // the operator binary
	SAKubeconfig string // the operator's ServiceAccount, with exactly the manifests' RBAC
}

// Setup starts a cluster (building the operator meanwhile), installs manifests/crd and
// manifests/rbac, and issues the ServiceAccount's kubeconfig. Teardown undoes it.
func Setup(ctx context.Context, opts cluster.Options, name string) (*Env, error) {
	e := &Env{}
	var err error
	if e.Root, err = cluster.RepoRoot(); err != nil {
		return e, err
	}
	if e.Dir, err = os.MkdirTemp("", "isvc-"+name+"-"); err != nil {
		return e, err
	}
	built := make(chan error, 1)
	go func() {
		var err error
		e.Bin, err = operator.Build(ctx, e.Dir)
		built <- err
	}()
	if e.Cluster, err = cluster.Start(ctx, opts); err != nil {
		return e, err
	}
	if err := <-built; err != nil {
		return e, err
	}
	if e.Kube, err = e.Cluster.Clientset(); err != nil {
		return e, err
	}
	if e.Dyn, err = dynamic.NewForConfig(e.Cluster.RESTConfig()); err != nil {
		return e, err
	}
	if err := e.Install(ctx); err != nil {
		return e, err
	}
	e.SAKubeconfig, err = e.Cluster.ServiceAccountKubeconfig(ctx, SystemNamespace, ServiceAccount)
	return e, err
}

// Install applies the CRD and RBAC manifests and waits for the CRD to be served.
func (e *Env) Install(ctx context.Context) error {
	for _, args := range [][]string{
		{"apply", "-k", filepath.Join(e.Root, "manifests", "crd")},
		{"apply", "-k", filepath.Join(e.Root, "manifests", "rbac")},
		{"wait", "--for=condition=Established", "crd/inferenceservices.ai.example.com", "--timeout=60s"},
	} {
		if _, _, err := e.Cluster.Kubectl(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// StartOperator runs the env's operator binary as its ServiceAccount, logging to log in the
// env's directory, and waits up to a minute for it to be ready; it is stopped on any error.
func (e *Env) StartOperator(ctx context.Context, log string, args ...string) (*operator.Process, error) {
	op, err := operator.Start(ctx, e.Bin, filepath.Join(e.Dir, log), append([]string{"--kubeconfig=" + e.SAKubeconfig}, args...)...)
	if err != nil {
		return nil, err
	}
	if err := op.WaitReady(ctx, time.Minute); err != nil {
		_ = op.Stop(30 * time.Second)
		return nil, err
	}
	return op, nil
}

// Teardown stops the cluster and removes the scratch directory unless keep is set.
func (e *Env) Teardown(keep bool) {
	if e.Cluster != nil {
		if err := e.Cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cluster stop:", err)
		}
	}
	if e.Dir != "" && !keep {
		_ = os.RemoveAll(e.Dir)
	}
}

// Ctx is a context that ends with the test or after d (scaled by ISVC_TEST_TIMESCALE).
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Scaled(d))
	t.Cleanup(cancel)
	return ctx
}

// TimeScaleEnv names the one factor every suite's deadlines are multiplied by (a decimal,
// default 1): a loaded machine (CI's 2 cores shared with the cluster) slows every step, and a
// deadline only bounds the wait for an event, so stretching it never changes what a test checks.
const TimeScaleEnv = "ISVC_TEST_TIMESCALE"

// Scaled is d times ISVC_TEST_TIMESCALE.
func Scaled(d time.Duration) time.Duration {
	f, err := strconv.ParseFloat(os.Getenv(TimeScaleEnv), 64)
	if err != nil || f <= 0 {
		return d
	}
	return time.Duration(float64(d) * f)
}

// Timeout is kubectl's --timeout flag for d, scaled like every other deadline.
func Timeout(d time.Duration) string { return "--timeout=" + Scaled(d).String() }

// Eventually polls cond until it returns nil, failing the test after timeout (scaled by
// ISVC_TEST_TIMESCALE) with cond's last error.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	timeout = Scaled(timeout)
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

// CreateNamespace creates a namespace that is deleted when the test ends.
func (e *Env) CreateNamespace(t testing.TB, name string) string {
	t.Helper()
	if _, err := e.Kube.CoreV1().Namespaces().Create(Ctx(t, time.Minute), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// Namespace creates a namespace named after the test.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	return e.CreateNamespace(t, strings.Trim(name, "-"))
}

// Kubectl runs kubectl as the cluster admin and fails the test on error.
func (e *Env) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, _, err := e.Cluster.Kubectl(Ctx(t, 2*time.Minute), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CreateISVC creates an InferenceService with the given spec.
func (e *Env) CreateISVC(ctx context.Context, ns, name string, spec map[string]any) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	return e.Dyn.Resource(crd.Resource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
}

// ISVC reads an InferenceService from the API server.
func (e *Env) ISVC(ns, name string) (*crd.InferenceService, error) {
	u, err := e.Dyn.Resource(crd.Resource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return crd.FromUnstructured(u)
}

// WaitPhase waits for the isvc's phase and returns the object.
func (e *Env) WaitPhase(t testing.TB, ns, name string, phase crd.Phase, timeout time.Duration) *crd.InferenceService {
	t.Helper()
	var got *crd.InferenceService
	Eventually(t, timeout, fmt.Sprintf("%s/%s phase %s", ns, name, phase), func() error {
		i, err := e.ISVC(ns, name)
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

// Restarts sums the restart counts of every container of every pod in ns.
func (e *Env) Restarts(t testing.TB, ns string) (n int32) {
	t.Helper()
	pods, err := e.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
		}
	}
	return n
}
