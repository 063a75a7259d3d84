package operator

// Kueue's controller manager, built from its module by test/kueue/build.sh, run against the
// local cluster as the real install runs it (its CRDs, its webhook configurations, its
// Configuration), with the differences a process on the test machine needs: the webhooks
// listen on 127.0.0.1 and the API server calls them by URL with our own CA, and Kueue
// manages only the namespaces carrying KueueNamespaceLabel.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

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
	cmd     *exec.Cmd
	done    chan struct{}
	log     *os.File
	LogPath string
	c       *cluster.Cluster
	dir     string
	Webhook string // 127.0.0.1:port, HTTPS with CAPEM
	Probe   string // 127.0.0.1:port, /healthz and /readyz
	// Visibility is the visibility API server (pending workloads and their positions),
	// 127.0.0.1:port, registered as KueueVisibilityAPIService.
	Visibility string
	CAPEM      []byte
	Manifest   string // the webhook configurations applied
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
	k := &Kueue{
		c: c, dir: dir, CAPEM: certs.CAPEM, done: make(chan struct{}),
		Webhook:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		Probe:      net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		Visibility: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2])),
		LogPath:    filepath.Join(dir, "kueue.log"),
	}
	config := filepath.Join(dir, "kueue-config.yaml")
	if err := os.WriteFile(config, []byte(kueueConfiguration(ports[0], ports[1], ports[2], certDir)), 0o600); err != nil {
		return nil, err
	}
	if k.log, err = os.Create(k.LogPath); err != nil {
		return nil, err
	}
	unshare := []string{"unshare", "--mount"}
	if os.Geteuid() != 0 {
		unshare = append(unshare, "--user", "--map-root-user")
	}
	args := append(unshare, "--", "sh", "-c", `mount -t overlay overlay -o lowerdir="$1":/etc /etc && shift && exec "$@"`,
		"sh", etc, bin, "--config="+config, "--kubeconfig="+c.KubeconfigPath(), "--zap-log-level=2")
	k.cmd = exec.Command(args[0], args[1:]...)
	k.cmd.Dir = dir
	k.cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
	k.cmd.Stdout, k.cmd.Stderr = k.log, k.log
	// unshare and sh exec in place: the signal reaches kueue itself.
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		k.log.Close()
		return nil, err
	}
	go func() { _ = k.cmd.Wait(); close(k.done) }()
	if err := k.waitReady(ctx, 2*time.Minute); err != nil {
		k.Kill()
		return nil, err
	}
	if err := k.registerWebhooks(ctx, manifests); err != nil {
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

// waitReady polls /readyz, which Kueue answers once its webhook server is listening.
func (k *Kueue) waitReady(ctx context.Context, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := hc.Get("http://" + k.Probe + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-k.done:
			return fmt.Errorf("kueue exited before ready (its own mount namespace needs unshare and mount rights: root, or unprivileged user namespaces); log %s ends:\n%s", k.LogPath, logTail(k.LogPath, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kueue not ready in %s; see %s", timeout, k.LogPath)
		}
	}
}

// registerWebhooks applies the module's webhook configurations with each service reference
// replaced by the loopback URL and our CA, and waits until the API server gets answers: a
// server-side dry run of a ResourceFlavor goes through Kueue's webhooks.
func (k *Kueue) registerWebhooks(ctx context.Context, manifests string) error {
	raw, err := os.ReadFile(filepath.Join(manifests, "webhook.yaml"))
	if err != nil {
		return err
	}
	var docs []string
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		out, err := k.webhookConfiguration([]byte(doc))
		if err != nil {
			return err
		}
		docs = append(docs, out)
	}
	k.Manifest = strings.Join(docs, "---\n")
	path := filepath.Join(k.dir, "kueue-webhooks.yaml")
	if err := os.WriteFile(path, []byte(k.Manifest), 0o600); err != nil {
		return err
	}
	if _, _, err := k.c.Kubectl(ctx, "apply", "-f", path); err != nil {
		return fmt.Errorf("kueue webhooks: %w", err)
	}
	probe := filepath.Join(k.dir, "kueue-webhook-probe.yaml")
	if err := os.WriteFile(probe, []byte("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: kueue-webhook-probe}\n"), 0o600); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, err := k.c.Kubectl(ctx, "create", "--dry-run=server", "-f", probe)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server does not reach kueue's webhooks: %w", err)
		}
		select {
		case <-k.done:
			return fmt.Errorf("kueue exited; see %s", k.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// webhookConfiguration rewrites one webhook configuration of the release manifests.
func (k *Kueue) webhookConfiguration(doc []byte) (string, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return "", err
	}
	meta, _ := obj["metadata"].(map[string]any)
	switch kind := obj["kind"]; kind {
	case "MutatingWebhookConfiguration":
		meta["name"] = kueueMutatingWebhooks
	case "ValidatingWebhookConfiguration":
		meta["name"] = kueueValidatingWebhooks
	default:
		return "", fmt.Errorf("unexpected kind %v in kueue's webhook manifests", kind)
	}
	hooks, _ := obj["webhooks"].([]any)
	for _, h := range hooks {
		hook := h.(map[string]any)
		cc, _ := hook["clientConfig"].(map[string]any)
		svc, _ := cc["service"].(map[string]any)
		path, _ := svc["path"].(string)
		if path == "" {
			return "", fmt.Errorf("webhook %v has no service path", hook["name"])
		}
		hook["clientConfig"] = map[string]any{
			"url":      "https://" + k.Webhook + path,
			"caBundle": base64.StdEncoding.EncodeToString(k.CAPEM),
		}
		// Ignored for cluster-scoped objects (Kueue's queues and flavors), so every webhook
		// can carry it.
		hook["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{KueueNamespaceLabel: "true"}}
	}
	out, err := yaml.Marshal(obj)
	return string(out), err
}

// Stop removes the webhook configurations (a stopped Kueue must not refuse the pods of
// managed namespaces) and the visibility APIService, then the process, with SIGTERM.
func (k *Kueue) Stop(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// An APIService left pointing at a stopped server fails every client's discovery.
	_, _, werr := k.c.Kubectl(ctx, "delete", "--ignore-not-found",
		"mutatingwebhookconfiguration/"+kueueMutatingWebhooks, "validatingwebhookconfiguration/"+kueueValidatingWebhooks,
		"apiservice/"+KueueVisibilityAPIService)
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-ctx.Done():
		k.Kill()
		return errors.Join(werr, fmt.Errorf("kueue did not stop in %s", timeout))
	}
	k.log.Close()
	return werr
}

// Kill stops the process at once.
func (k *Kueue) Kill() {
	_ = k.cmd.Process.Kill()
	<-k.done
	k.log.Close()
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

// Exited is closed when the process has exited.
func (k *Kueue) Exited() <-chan struct{} { return k.done }

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
