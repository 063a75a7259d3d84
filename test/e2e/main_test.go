// Package e2e proves the operator against the project's real local cluster: a real
// kube-apiserver, controller-manager, scheduler and garbage collector, driven with kubectl.
// The operator runs as a child process with the ServiceAccount token the manifests' RBAC
// grants, so a missing rule fails a test.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// env is shared by every test in the package: one cluster, one operator, one gateway.
//
// Most tests run one after another, because they change what every test sees (the CRD and
// its webhook, the operator process or its flags, the metrics adapter's APIServices, nodes'
// taints and faults, the gateway's health) or measure what the operator does as a whole
// (writesSettle, quiesce, counters summed over every model). A test that calls t.Parallel
// creates its own objects in its own namespace and reads only those: go test starts such tests
// once every serial test of the package has finished, so they overlap only each other, at
// most -parallel at a time (the Makefile's E2E_PARALLEL; the GPUs they ask for together stay
// within the cluster's 32).
var env struct {
	*testenv.Env
	gateway *fakeGateway
	op      *operator.Process
	resync  time.Duration
	// execImages: the cluster's kubelet runs the endpoint picker's image from EPP_BIN.
	execImages bool
	// activatorBin runs for operator.ActivatorImage, whatever EPP_BIN says.
	activatorBin string
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if err := applyShard(func() string { return flag.Lookup("test.run").Value.String() }, func(p string) error { return flag.Set("test.run", p) }); err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		return 2
	}
	var actDir string
	return testenv.Suite{Name: "e2e", Setup: func(ctx context.Context) error {
		var opts cluster.Options
		if bin := os.Getenv(operator.EPPBinEnv); bin != "" {
			opts.ExtraArgs = []string{"--exec-image=" + operator.EPPImageRepository + "=" + bin}
			env.execImages = true
		}
		// The activator runs as the manifests' Deployment does, its binary for its image.
		var err error
		actDir, err = os.MkdirTemp("", "isvc-activator-")
		if err == nil {
			env.activatorBin, err = operator.BuildActivator(ctx, actDir)
		}
		if err != nil {
			return fmt.Errorf("activator: %w", err)
		}
		opts.ExtraArgs = append(opts.ExtraArgs, "--exec-image="+operator.ActivatorImage+"="+env.activatorBin)
		// A tenant's ordinary pod: a shell and this machine's curl (hostile_network_test.go).
		opts.ExtraArgs = append(opts.ExtraArgs, "--exec-image="+tenantShellImage+"=/bin/sh")
		if env.Env, err = testenv.Setup(ctx, opts, "e2e"); err != nil {
			return err
		}
		env.gateway = newFakeGateway()
		env.resync = 2 * time.Second
		return startOperator(ctx)
	}, Teardown: func(keep bool) {
		teardown(keep)
		if actDir != "" {
			os.RemoveAll(actDir)
		}
	}, Logs: func() string { return "operator log: " + filepath.Join(env.Dir, "operator.log") }}.Run(m)
}

// startOperator starts the shared operator with the suite's flags plus extra.
func startOperator(ctx context.Context, extra ...string) error {
	var err error
	env.op, err = operator.Start(ctx, env.Bin, filepath.Join(env.Dir, "operator.log"), append([]string{
		"--kubeconfig=" + env.SAKubeconfig,
		"--gateway-url=" + env.gateway.URL(),
		"--resync=" + env.resync.String(),
		"--backoff-max=2s",
		"--creating-evidence-after=5s",
		"-v=2",
	}, extra...)...)
	if err != nil {
		return err
	}
	return env.op.WaitReady(ctx, 60*time.Second)
}

func teardown(keep bool) {
	if env.op != nil {
		if err := env.op.Stop(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "operator stop:", err)
		}
	}
	if env.gateway != nil {
		env.gateway.Close()
	}
	if env.Env != nil {
		env.Teardown(keep)
	}
}
