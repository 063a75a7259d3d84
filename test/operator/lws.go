package operator

// LeaderWorkerSet's controller manager, built from its module by test/lws/build.sh, run against
// the local cluster as the release runs it (its CRD, its webhook configurations with the
// release's pod objectSelector, its Configuration), with the differences a process on the test
// machine needs: the webhooks listen on 127.0.0.1 and the API server calls them by URL with our
// own CA, internal certificate management and leader election are off, metrics are off.

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/test/cluster"
)

// LWSBinEnv names the LeaderWorkerSet binary built by test/lws/build.sh (make lws); its
// manifests are in the directory next to it, Manifests(bin).
const LWSBinEnv = "LWS_BIN"

// LWSNameLabel is on every pod of a LeaderWorkerSet (its value the LWS's name); the release's
// pod webhooks select on it, so other pods never reach LWS.
const LWSNameLabel = "leaderworkerset.sigs.k8s.io/name"

// LWS is one running LeaderWorkerSet controller manager.
type LWS struct {
	*Manager
}

// StartLWS installs LeaderWorkerSet's CRD, runs bin against c with its scratch files in dir,
// registers its webhooks by URL on loopback once it is ready, and checks that the API server
// reaches them. The manager runs with the cluster admin's kubeconfig (the release's RBAC is not
// what this exercises).
func StartLWS(ctx context.Context, c *cluster.Cluster, bin, dir string) (*LWS, error) {
	m, _, err := launchManager(ctx, c, launch{
		name: "lws", bin: bin, dir: dir, ports: 2,
		config: func(ports []int, certDir string) string {
			return loopbackConfiguration("config.lws.x-k8s.io/v1alpha1", ports[0], ports[1], certDir)
		},
		command: func(config string) *exec.Cmd {
			cmd := exec.Command(bin, "--config="+config, "--zap-log-level=2")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
			return cmd
		},
		// LWS answers /readyz as soon as the manager runs (a ping), not when its webhooks
		// listen: the webhooks' dry run is what proves those, through both configurations.
		probe: lwsWebhookProbe, probeArgs: []string{"-n", "default"},
		// The pod webhooks get the objectSelector the release adds with its kustomize patches
		// (config/webhook/*-patch.yaml), so only LWS's own pods go through them.
		scope: func(hook map[string]any, path string) {
			if strings.HasSuffix(path, "-v1-pod") {
				hook["objectSelector"] = map[string]any{"matchExpressions": []any{
					map[string]any{"key": LWSNameLabel, "operator": "Exists"},
				}}
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return &LWS{m}, nil
}

// lwsWebhookProbe is the smallest LeaderWorkerSet, only ever created as a dry run.
const lwsWebhookProbe = `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: lws-webhook-probe}
spec:
  leaderWorkerTemplate:
    size: 1
    workerTemplate:
      spec:
        containers: [{name: c, image: kubelet.fake/ready}]
`

// Stop removes the webhook configurations (with failurePolicy Fail, a stopped LWS would refuse
// every LeaderWorkerSet and its pods) and then the process, with SIGTERM.
func (l *LWS) Stop(timeout time.Duration) error { return l.stop(timeout) }
