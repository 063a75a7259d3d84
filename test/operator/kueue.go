package operator

// Kueue's controller manager, built from its module by test/kueue/build.sh, run against the
// local cluster as the real install runs it (its CRDs, its webhook configurations, its
// Configuration), with the differences a process on the test machine needs: the webhooks
// listen on 127.0.0.1 and the API server calls them by URL with our own CA, and Kueue
// manages only the namespaces carrying KueueNamespaceLabel.

import (
	"context"
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

// KueueBinEnv names the Kueue binary built by test/kueue/build.sh (make kueue); its manifests
// are in the directory next to it, KueueManifests(bin).
const KueueBinEnv = "KUEUE_BIN"

// KueueNamespaceLabel marks the namespaces Kueue manages (its managedJobsNamespaceSelector and
// every webhook's namespaceSelector): pods elsewhere in a shared cluster never reach it.
const KueueNamespaceLabel = "kueue.e2e/managed"

// Names of the webhook configurations, as the release manifests name them.
const (
	kueueMutatingWebhooks   = "kueue-mutating-webhook-configuration"
	kueueValidatingWebhooks = "kueue-validating-webhook-configuration"
)

// KueueManifests is where build.sh copies the module's CRDs (crd/) and webhook
// configurations (webhook.yaml) for the binary bin.
func KueueManifests(bin string) string { return bin + "-manifests" }

// Kueue is one running Kueue controller manager.
type Kueue struct {
	*Manager
	// Visibility is the visibility API server (pending workloads and their positions),
	// 127.0.0.1:port, registered as KueueVisibilityAPIService.
	Visibility string
}

// StartKueue installs Kueue's CRDs, runs bin against c with its scratch files in dir,
// registers its webhooks by URL on loopback once it is ready, and checks that the API server
// reaches them. The manager runs with the cluster admin's kubeconfig (the release's RBAC is
// not what this exercises).
func StartKueue(ctx context.Context, c *cluster.Cluster, bin, dir string) (*Kueue, error) {
	manifests := KueueManifests(bin)
	if _, _, err := c.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(manifests, "crd")); err != nil {
		return nil, fmt.Errorf("kueue CRDs: %w", err)
	}
	if _, _, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "-f", filepath.Join(manifests, "crd")); err != nil {
		return nil, fmt.Errorf("kueue CRDs established: %w", err)
	}
	// The Configuration's namespace (events, leader election when enabled).
	if err := applyFile(ctx, c, filepath.Join(dir, "kueue-namespace.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata: {name: kueue-system}\n"); err != nil {
		return nil, err
	}

	certDir := filepath.Join(dir, "certs")
	certs, err := webhook.EnsureCerts(certDir, []string{"127.0.0.1"}, time.Now())
	if err != nil {
		return nil, err
	}
	// With internal certificate management off, kueue reads its metrics certificate from a
	// fixed path, /etc/kueue/metrics/certs, at start (the metrics server is off here, but the
	// read is not): the process sees our certificate there through an overlay of /etc in its
	// own mount namespace, so nothing on the machine is written.
	etc := filepath.Join(dir, "etc")
	metricsCerts := filepath.Join(etc, "kueue", "metrics", "certs")
	if err := os.MkdirAll(metricsCerts, 0o755); err != nil {
		return nil, err
	}
	if err := copyFiles(certDir, metricsCerts, webhook.CertFile, webhook.KeyFile); err != nil {
		return nil, err
	}

	// The visibility API server's certificate, where build.sh points it: visibility/ in the
	// working directory.
	if err := copyFiles(certDir, filepath.Join(dir, "visibility"), webhook.CertFile, webhook.KeyFile); err != nil {
		return nil, err
	}

	ports, err := freeLoopbackPorts(3)
	if err != nil {
		return nil, err
	}
	k := &Kueue{Manager: &Manager{
		name: "kueue", c: c, dir: dir, CAPEM: certs.CAPEM,
		Webhook:  net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		Probe:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		mutating: kueueMutatingWebhooks, validating: kueueValidatingWebhooks,
	}, Visibility: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2]))}
	config := filepath.Join(dir, "kueue-config.yaml")
	if err := os.WriteFile(config, []byte(kueueConfiguration(ports[0], ports[1], ports[2], certDir)), 0o600); err != nil {
		return nil, err
	}
	unshare := []string{"unshare", "--mount"}
	if os.Geteuid() != 0 {
		unshare = append(unshare, "--user", "--map-root-user")
	}
	args := append(unshare, "--", "sh", "-c", `mount -t overlay overlay -o lowerdir="$1":/etc /etc && shift && exec "$@"`,
		"sh", etc, bin, "--config="+config, "--kubeconfig="+c.KubeconfigPath(), "--zap-log-level=2")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
	// unshare and sh exec in place: signals reach kueue itself.
	if err := k.start(cmd); err != nil {
		return nil, err
	}
	// Kueue answers /readyz once its webhook server listens.
	if err := k.waitReady(ctx, 2*time.Minute, " (its own mount namespace needs unshare and mount rights: root, or unprivileged user namespaces)"); err != nil {
		k.Kill()
		return nil, err
	}
	probe := filepath.Join(dir, "kueue-webhook-probe.yaml")
	if err := os.WriteFile(probe, []byte("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: kueue-webhook-probe}\n"), 0o600); err != nil {
		k.Kill()
		return nil, err
	}
	// Every webhook only in the namespaces Kueue manages; ignored for cluster-scoped objects
	// (Kueue's queues and flavors), so every webhook can carry it. A dry run of a
	// ResourceFlavor goes through Kueue's webhooks.
	scope := func(hook map[string]any, _ string) {
		hook["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{KueueNamespaceLabel: "true"}}
	}
	if err := k.registerWebhooks(ctx, manifests, scope, "-f", probe); err != nil {
		k.Kill()
		return nil, err
	}
	if err := k.registerVisibility(ctx); err != nil {
		k.Kill()
		return nil, err
	}
	return k, nil
}

// kueueConfiguration is the manager's Configuration: the Deployment integration (which
// implies pod: Kueue gates and admits a Deployment's pods one by one) and batch/job, only in
// namespaces with KueueNamespaceLabel, every server on loopback (the visibility API server
// too, which otherwise listens on every address), no leader election, and our own webhook
// certificate in certDir.
func kueueConfiguration(webhookPort, probePort, visibilityPort int, certDir string) string {
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
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
manageJobsWithoutQueueName: false
managedJobsNamespaceSelector:
  matchLabels:
    %s: "true"
visibilityServer:
  bindAddress: 127.0.0.1
  bindPort: %d
integrations:
  frameworks:
  - batch/job
  - deployment
  - pod
`, probePort, webhookPort, certDir, KueueNamespaceLabel, visibilityPort)
}

// Stop removes the webhook configurations (a stopped Kueue must not refuse the pods of
// managed namespaces) and the visibility APIService, then the process, with SIGTERM.
func (k *Kueue) Stop(timeout time.Duration) error {
	// An APIService left pointing at a stopped server fails every client's discovery.
	return k.stop(timeout, "apiservice/"+KueueVisibilityAPIService)
}

// KueueVisibilityAPIService is the APIService of Kueue's visibility API, as its release names it.
const KueueVisibilityAPIService = "v1beta2.visibility.kueue.x-k8s.io"

// registerVisibility registers the visibility API server with the aggregator, as the release
// does (insecureSkipTLSVerify), through an ExternalName Service on 127.0.0.1 (EndpointSlices
// refuse loopback addresses), and waits until the aggregator serves it.
func (k *Kueue) registerVisibility(ctx context.Context) error {
	_, port, _ := net.SplitHostPort(k.Visibility)
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: visibility-server, namespace: kueue-system}
spec:
  type: ExternalName
  externalName: 127.0.0.1
  ports: [{name: https, port: %s}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: %s}
spec:
  group: visibility.kueue.x-k8s.io
  version: v1beta2
  groupPriorityMinimum: 100
  versionPriority: 100
  insecureSkipTLSVerify: true
  service: {name: visibility-server, namespace: kueue-system, port: %s}
`, port, KueueVisibilityAPIService, port)
	if err := applyFile(ctx, k.c, filepath.Join(k.dir, "kueue-visibility.yaml"), manifest); err != nil {
		return fmt.Errorf("kueue visibility APIService: %w", err)
	}
	if _, _, err := k.c.Kubectl(ctx, "wait", "--for=condition=Available", "apiservice/"+KueueVisibilityAPIService, "--timeout=90s"); err != nil {
		return fmt.Errorf("kueue's visibility API not served (log %s ends:\n%s): %w", k.LogPath, logTail(k.LogPath, 10), err)
	}
	return nil
}

// logTail is the last n lines of the file at path.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// applyFile writes manifest to path and applies it.
func applyFile(ctx context.Context, c *cluster.Cluster, path, manifest string) error {
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		return err
	}
	_, _, err := c.Kubectl(ctx, "apply", "-f", path)
	return err
}

// copyFiles copies the named files from one directory into another, made if absent.
func copyFiles(from, to string, names ...string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(from, n))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, n), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// freeLoopbackPorts returns n ports that were free on 127.0.0.1 a moment ago.
func freeLoopbackPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
