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
	"time"

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
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var err error
	if env.Env, err = testenv.Setup(ctx, cluster.Options{
		// Room for TestLeaderFailoverUnderLoad's full size (FAILOVER_N=500 one-pod isvcs). These
		// suites prove the operator's install and failover, not serving (test/e2e does): pods
		// follow the kubelet's schedule model, and their GPU-less models stay cheap.
		ExtraArgs: []string{"--node-pods=250", "--kubelet-serve=false"},
	}, "incluster"); err != nil {
		fmt.Fprintln(os.Stderr, "incluster setup:", err)
		if env.Env != nil {
			env.Teardown(false)
		}
		return 1
	}
	url, ca, stopConverter, err := startConverter(env.Dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "incluster setup: converter:", err)
		env.Teardown(false)
		return 1
	}
	defer stopConverter()
	env.convertURL, env.convertCA = url, ca
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "operator logs in", env.Dir, "(kept with INCLUSTER_KEEP=1)")
	}
	env.Teardown(os.Getenv("INCLUSTER_KEEP") != "")
	return code
}
