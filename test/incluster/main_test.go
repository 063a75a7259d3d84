// Package incluster proves the operator runs as production operators run, against the
// project's real local cluster: two replicas with leader election on a Lease (failover on
// kill -9, handover on SIGTERM, exit on a lost Lease), the in-cluster configuration from the
// standard ServiceAccount paths, least-privilege RBAC (a denied permission shows in status),
// the Role-based namespaced overlay, and the manifests themselves (apply, dry-run, upgrade,
// the restricted Pod Security level).
package incluster

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

// systemNamespace is where the manifests install the operator, its ServiceAccount and Leases.
const systemNamespace = "inferenceservice-system"

// env is shared by every test in the package: one cluster, one operator binary.
var env struct {
	cluster  *cluster.Cluster
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	root     string
	bin      string
	saConfig string
	dir      string
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "incluster setup:", err)
		teardown()
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "operator logs in", env.dir, "(kept with INCLUSTER_KEEP=1)")
	}
	teardown()
	return code
}

func setup(ctx context.Context) error {
	var err error
	if env.root, err = cluster.RepoRoot(); err != nil {
		return err
	}
	if env.dir, err = os.MkdirTemp("", "isvc-incluster-"); err != nil {
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
	env.saConfig, err = env.cluster.ServiceAccountKubeconfig(ctx, systemNamespace, "inferenceservice-operator")
	return err
}

func teardown() {
	if env.cluster != nil {
		if err := env.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cluster stop:", err)
		}
	}
	if env.dir != "" && os.Getenv("INCLUSTER_KEEP") == "" {
		_ = os.RemoveAll(env.dir)
	}
}
