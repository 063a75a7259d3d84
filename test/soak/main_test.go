// Package soak runs the operator through a long seeded mix of user actions and faults over many
// models, on the project's local cluster with two operator replicas under leader election, and
// checks that nothing is lost and every status ends true (issue 38). `make soak` runs the full
// hour; `make soak-ci` (SOAK_CI=1) the CI size, about 2 minutes of chaos over 30 models. Without
// either it is skipped, so a plain go test ./... starts no cluster for it.
package soak

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// env is the package's one cluster and operator binary.
var env struct {
	*testenv.Env
	cfg  config // read once: an unset SOAK_SEED is drawn from the clock
	skip bool   // neither SOAK_MINUTES nor SOAK_CI: not asked for
	// adapter is the default install's metrics adapter, serving the HPAs their queue metric.
	adapter *operator.MetricsAdapter
}

// config is one run's size and seed, read once from the environment.
type config struct {
	minutes float64 // of chaos, after the models are created
	models  int
	seed    uint64
}

// readConfig reads SOAK_MINUTES, SOAK_MODELS and SOAK_SEED; unset, the CI size and a seed
// from the clock (logged, so a failure replays with SOAK_SEED).
func readConfig() config {
	c := config{minutes: 2, models: 30, seed: uint64(time.Now().UnixNano() % 1_000_000)}
	if v, err := strconv.ParseFloat(os.Getenv("SOAK_MINUTES"), 64); err == nil && v > 0 {
		c.minutes = v
	}
	if v, err := strconv.Atoi(os.Getenv("SOAK_MODELS")); err == nil && v > 0 {
		c.models = v
	}
	if v, err := strconv.ParseUint(os.Getenv("SOAK_SEED"), 10, 64); err == nil {
		c.seed = v
	}
	return c
}

// replay is the command that runs the same schedule again.
func (c config) replay() string {
	return fmt.Sprintf("SOAK_SEED=%d SOAK_MINUTES=%g SOAK_MODELS=%d make soak", c.seed, c.minutes, c.models)
}

func TestMain(m *testing.M) {
	if os.Getenv("SOAK_MINUTES") == "" && os.Getenv("SOAK_CI") == "" {
		env.skip = true
		os.Exit(m.Run())
	}
	os.Exit(testenv.Suite{Name: "soak", Setup: setup,
		Teardown: func(keep bool) {
			if env.adapter != nil {
				env.adapter.Kill()
			}
			if env.Env != nil {
				env.Teardown(keep)
			}
		},
		Logs: func() string { return "operator logs in " + env.Dir },
	}.Run(m))
}

// setup starts the cluster sized for the soak's models and the metrics adapter.
func setup(ctx context.Context) error {
	cfg := readConfig()
	env.cfg = cfg
	var err error
	// Models have at most maxReplicas pods (the busy one, three), each a fake vLLM server
	// without a GPU. Room for all on the 4 nodes.
	nodePods := max(110, cfg.models*maxReplicas/4+60)
	if env.Env, err = testenv.Setup(ctx, cluster.Options{
		// Room for every GPU model's replicas on each node (a node lost or sick leaves three).
		ExtraArgs: []string{"--node-pods=" + strconv.Itoa(nodePods), "--node-gpus=" + strconv.Itoa(max(8, (cfg.models/gpuEvery+1)*maxReplicas)),
			"--node-monitor-grace-period=" + nodeGrace.String(), "--pod-eviction-seconds=" + strconv.Itoa(int(evictAfter.Seconds()))},
	}, "soak"); err != nil {
		return err
	}
	adapter, err := operator.InstallMetricsAdapter(ctx, env.Cluster, env.Dir, "--scrape-period=5s")
	if err != nil {
		return fmt.Errorf("the metrics adapter: %w", err)
	}
	env.adapter = adapter
	return nil
}
