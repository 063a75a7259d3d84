package operator

// LeaderWorkerSet's controller manager, built from its module by test/lws/build.sh, run against
// the local cluster as the release runs it (its CRD, its webhook configurations with the
// release's pod objectSelector, its Configuration), with the differences a process on the test
// machine needs: the webhooks listen on 127.0.0.1 and the API server calls them by URL with our
// own CA, internal certificate management and leader election are off, metrics are off.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/crd/webhook"
	"github.com/example/inferenceservice-operator/test/cluster"
)

// LWSBinEnv names the LeaderWorkerSet binary built by test/lws/build.sh (make lws); its
// manifests are in the directory next to it, LWSManifests(bin).
const LWSBinEnv = "LWS_BIN"

// LWSNameLabel is on every pod of a LeaderWorkerSet (its value the LWS's name); the release's
// pod webhooks select on it, so other pods never reach LWS.
const LWSNameLabel = "leaderworkerset.sigs.k8s.io/name"

// Names of the webhook configurations, as the release manifests name them.
const (
	lwsMutatingWebhooks   = "lws-mutating-webhook-configuration"
	lwsValidatingWebhooks = "lws-validating-webhook-configuration"
)

// LWSManifests is where build.sh copies the module's CRDs (crd/) and webhook configurations
// (webhook.yaml) for the binary bin.
func LWSManifests(bin string) string { return bin + "-manifests" }

// LWS is one running LeaderWorkerSet controller manager.
type LWS struct {
	*Manager
}

// StartLWS installs LeaderWorkerSet's CRD, runs bin against c with its scratch files in dir,
// registers its webhooks by URL on loopback once it is ready, and checks that the API server
// reaches them. The manager runs with the cluster admin's kubeconfig (the release's RBAC is not
// what this exercises).
func StartLWS(ctx context.Context, c *cluster.Cluster, bin, dir string) (*LWS, error) {
	manifests := LWSManifests(bin)
	// Server-side: the CRD embeds two pod templates' schemas, too large for the
	// last-applied annotation.
	if _, _, err := c.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(manifests, "crd")); err != nil {
		return nil, fmt.Errorf("lws CRDs: %w", err)
	}
	if err := waitEstablished(ctx, c, filepath.Join(manifests, "crd"), time.Minute); err != nil {
		return nil, err
	}

	certDir := filepath.Join(dir, "certs")
	certs, err := webhook.EnsureCerts(certDir, []string{"127.0.0.1"}, time.Now())
	if err != nil {
		return nil, err
	}
	ports, err := freeLoopbackPorts(2)
	if err != nil {
		return nil, err
	}
	l := &LWS{&Manager{
		name: "lws", c: c, dir: dir, CAPEM: certs.CAPEM,
		Webhook:  net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		Probe:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		mutating: lwsMutatingWebhooks, validating: lwsValidatingWebhooks,
	}}
	config := filepath.Join(dir, "lws-config.yaml")
	if err := os.WriteFile(config, []byte(lwsConfiguration(ports[0], ports[1], certDir)), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config="+config, "--zap-log-level=2")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
	if err := l.start(cmd); err != nil {
		return nil, err
	}
	// LWS answers /readyz as soon as the manager runs (a ping), not when its webhooks listen:
	// the webhooks' dry run is what proves those.
	if err := l.waitReady(ctx, 2*time.Minute, ""); err != nil {
		l.Kill()
		return nil, err
	}
	probe := filepath.Join(dir, "lws-webhook-probe.yaml")
	if err := os.WriteFile(probe, []byte(lwsWebhookProbe), 0o600); err != nil {
		l.Kill()
		return nil, err
	}
	// The pod webhooks get the objectSelector the release adds with its kustomize patches
	// (config/webhook/*-patch.yaml), so only LWS's own pods go through them; a dry run of a
	// LeaderWorkerSet goes through both configurations.
	scope := func(hook map[string]any, path string) {
		if strings.HasSuffix(path, "-v1-pod") {
			hook["objectSelector"] = map[string]any{"matchExpressions": []any{
				map[string]any{"key": LWSNameLabel, "operator": "Exists"},
			}}
		}
	}
	if err := l.registerWebhooks(ctx, manifests, scope, "-n", "default", "-f", probe); err != nil {
		l.Kill()
		return nil, err
	}
	return l, nil
}

// waitEstablished polls until every CRD in crds is Established. Not `kubectl wait`: right after
// the apply a CRD may have no status.conditions yet, and kubectl wait then fails at once
// (".status.conditions accessor error: <nil>") instead of waiting.
func waitEstablished(ctx context.Context, c *cluster.Cluster, crds string, timeout time.Duration) error {
	type crd struct {
		Metadata struct{ Name string }
		Status   struct {
			Conditions []struct{ Type, Status string }
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		var pending []string
		out, _, err := c.Kubectl(ctx, "get", "-f", crds, "-o", "json")
		if err == nil {
			// One object comes back as itself, several as a List.
			var got struct {
				Kind  string
				Items []crd
			}
			var one crd
			if err = json.Unmarshal([]byte(out), &got); err == nil && got.Kind != "List" {
				err = json.Unmarshal([]byte(out), &one)
				got.Items = []crd{one}
			}
			for _, it := range got.Items {
				established := false
				for _, cond := range it.Status.Conditions {
					established = established || cond.Type == "Established" && cond.Status == "True"
				}
				if !established {
					pending = append(pending, it.Metadata.Name)
				}
			}
		}
		if err == nil && len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lws CRDs not Established in %s: %v %v", timeout, pending, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lwsConfiguration is the manager's Configuration: every server on loopback (metrics off), no
// leader election, and our own webhook certificate in certDir instead of the internal
// certificate management (which writes a Secret and patches the webhook configurations of a
// Service we do not have).
func lwsConfiguration(webhookPort, probePort int, certDir string) string {
	return fmt.Sprintf(`apiVersion: config.lws.x-k8s.io/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
`, probePort, webhookPort, certDir)
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
