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
	"testing"

	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// systemNamespace is where the manifests install the operator, its ServiceAccount and Leases.
const systemNamespace = testenv.SystemNamespace

// env is shared by every test in the package: one cluster, one operator binary.
var env struct {
	*testenv.Env
	// convertURL and convertCA: the suite's conversion webhook on loopback (startConverter).
	convertURL string
	convertCA  []byte
}

func TestMain(m *testing.M) {
	var stopConverter func()
	os.Exit(testenv.Suite{Name: "incluster",
		Setup: func(ctx context.Context) error {
			var err error
			if env.Env, err = testenv.Setup(ctx, cluster.Options{
				// Room for TestLeaderFailoverUnderLoad's full size (FAILOVER_N=500 one-pod isvcs). These
				// suites prove the operator's install and failover, not serving (test/e2e does): pods
				// follow the kubelet's schedule model, and their GPU-less models stay cheap.
				ExtraArgs: []string{"--node-pods=250", "--kubelet-serve=false"},
			}, "incluster"); err != nil {
				return err
			}
			url, ca, stop, err := startConverter(env.Dir)
			if err != nil {
				return fmt.Errorf("converter: %w", err)
			}
			env.convertURL, env.convertCA, stopConverter = url, ca, stop
			return nil
		},
		Teardown: func(keep bool) {
			if env.Env != nil {
				env.Teardown(keep)
			}
			if stopConverter != nil {
				stopConverter()
			}
		},
		Logs: func() string { return "operator logs in " + env.Dir },
	}.Run(m))
}
