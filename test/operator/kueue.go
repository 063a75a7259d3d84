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

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/test/cluster"
)

// KueueBinEnv names the Kueue binary built by test/kueue/build.sh (make kueue); its manifests
// are in the directory next to it, Manifests(bin).
const KueueBinEnv = "KUEUE_BIN"

// KueueNamespaceLabel marks the namespaces Kueue manages (its managedJobsNamespaceSelector and
// every webhook's namespaceSelector): pods elsewhere in a shared cluster never reach it.
const KueueNamespaceLabel = "kueue.e2e/managed"

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
	// With internal certificate management off, kueue reads its metrics certificate from a
	// fixed path, /etc/kueue/metrics/certs, at start (the metrics server is off here, but the
	// read is not): the process sees our certificate there through an overlay of /etc in its
	// own mount namespace, so nothing on the machine is written.
	etc := filepath.Join(dir, "etc")
	m, ports, err := launchManager(ctx, c, launch{
		name: "kueue", bin: bin, dir: dir, ports: 3, // the webhook, the probe, the visibility API server
		config: func(ports []int, certDir string) string {
			return kueueConfiguration(ports[0], ports[1], ports[2], certDir)
		},
		prepare: func(ctx context.Context, certDir string) error {
			// The Configuration's namespace (events, leader election when enabled).
			if err := applyFile(ctx, c, filepath.Join(dir, "kueue-namespace.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata: {name: kueue-system}\n"); err != nil {
				return err
			}
			metricsCerts := filepath.Join(etc, "kueue", "metrics", "certs")
			if err := os.MkdirAll(metricsCerts, 0o755); err != nil {
				return err
			}
			if err := copyFiles(certDir, metricsCerts, servingcert.CertFile, servingcert.KeyFile); err != nil {
				return err
			}
			// The visibility API server's certificate, where build.sh points it: visibility/ in
			// the working directory.
			return copyFiles(certDir, filepath.Join(dir, "visibility"), servingcert.CertFile, servingcert.KeyFile)
		},
		command: func(config string) *exec.Cmd {
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
			return cmd
		},
		// Kueue answers /readyz once its webhook server listens.
		readyHint: " (its own mount namespace needs unshare and mount rights: root, or unprivileged user namespaces)",
		// A dry run of a ResourceFlavor goes through Kueue's webhooks.
		probe: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: kueue-webhook-probe}\n",
		// Every webhook only in the namespaces Kueue manages; ignored for cluster-scoped objects
		// (Kueue's queues and flavors), so every webhook can carry it.
		scope: func(hook map[string]any, _ string) {
			hook["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{KueueNamespaceLabel: "true"}}
		},
	})
	if err != nil {
		return nil, err
	}
	k := &Kueue{Manager: m, Visibility: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2]))}
	if err := k.registerVisibility(ctx); err != nil {
		k.Kill()
		return nil, err
	}
	return k, nil
}

// kueueConfiguration is the manager's Configuration: loopbackConfiguration's, with the
// Deployment integration (which implies pod: Kueue gates and admits a Deployment's pods one
// by one) and batch/job, only in namespaces with KueueNamespaceLabel, and the visibility API
// server on loopback too (it otherwise listens on every address).
func kueueConfiguration(webhookPort, probePort, visibilityPort int, certDir string) string {
	return loopbackConfiguration("config.kueue.x-k8s.io/v1beta2", webhookPort, probePort, certDir) + fmt.Sprintf(`namespace: kueue-system
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
`, KueueNamespaceLabel, visibilityPort)
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
