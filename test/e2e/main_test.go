// Package e2e proves the operator against the project's real local cluster: a real
// kube-apiserver, controller-manager, scheduler and garbage collector, driven with kubectl.
// The operator runs as a child process with the ServiceAccount token the manifests' RBAC
// grants, so a missing rule fails a test.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
)

// env is shared by every test in the package: one cluster, one operator, one gateway.
var env struct {
	cluster  *cluster.Cluster
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	root     string
	bin      string
	saConfig string
	dir      string
	gateway  *fakeGateway
	op       *operator.Process
	resync   time.Duration
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		teardown()
		return 1
	}
	code := m.Run()
	if code != 0 && env.op != nil {
		fmt.Fprintln(os.Stderr, "operator log:", filepath.Join(env.dir, "operator.log"))
	}
	teardown()
	return code
}

func setup(ctx context.Context) error {
	var err error
	if env.root, err = cluster.RepoRoot(); err != nil {
		return err
	}
	env.dir, err = os.MkdirTemp("", "isvc-e2e-")
	if err != nil {
		return err
	}
	binc := make(chan error, 1)
	go func() {
		var err error
		env.bin, err = operator.Build(ctx, env.dir)
		binc <- err
	}()
	if env.cluster, err = cluster.Start(ctx, cluster.Options{}); err != nil {
		return err
	}
	if err := <-binc; err != nil {
		return err
	}
	if env.kube, err = env.cluster.Clientset(); err != nil {
		return err
	}
	if env.dyn, err = dynamic.NewForConfig(env.cluster.RESTConfig()); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"apply", "-k", filepath.Join(env.root, "manifests", "crd")},
		{"apply", "-k", filepath.Join(env.root, "manifests", "rbac")},
		{"wait", "--for=condition=Established", "crd/inferenceservices.ai.example.com", "--timeout=60s"},
	} {
		if _, _, err := env.cluster.Kubectl(ctx, args...); err != nil {
			return err
		}
	}
	if env.saConfig, err = env.cluster.ServiceAccountKubeconfig(ctx, "inferenceservice-system", "inferenceservice-operator"); err != nil {
		return err
	}
	env.gateway = newFakeGateway()
	env.resync = 2 * time.Second
	return startOperator(ctx)
}

// startOperator starts the shared operator with the suite's flags plus extra.
func startOperator(ctx context.Context, extra ...string) error {
	var err error
	env.op, err = operator.Start(ctx, env.bin, filepath.Join(env.dir, "operator.log"), append([]string{
		"--kubeconfig=" + env.saConfig,
		"--gateway-url=" + env.gateway.URL(),
		"--resync=" + env.resync.String(),
		"--backoff-max=2s",
		"-v=2",
	}, extra...)...)
	if err != nil {
		return err
	}
	return env.op.WaitReady(ctx, 60*time.Second)
}

func teardown() {
	if env.op != nil {
		if err := env.op.Stop(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "operator stop:", err)
		}
	}
	if env.gateway != nil {
		env.gateway.Close()
	}
	if env.cluster != nil {
		if err := env.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cluster stop:", err)
		}
	}
	if env.dir != "" && os.Getenv("E2E_KEEP") == "" {
		_ = os.RemoveAll(env.dir)
	}
}
