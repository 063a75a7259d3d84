package operator

// A controller-runtime manager (Kueue's, LeaderWorkerSet's) run as a process on the test
// machine: its module's CRDs installed, its Configuration on loopback with our own webhook
// certificate, ready on its loopback probe, its module's webhook configurations registered by
// URL on loopback with our CA, and, stopped, its webhooks removed before the process.

import (
	"context"
	"encoding/base64"
	"encoding/json"
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
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/test/cluster"
)

// Manifests is where a manager's build.sh (test/kueue, test/lws) copies, from the module it
// builds bin from, the CRDs (crd/) and the webhook configurations (webhook.yaml).
func Manifests(bin string) string { return bin + "-manifests" }

// launch is what differs between the managers: the rest of a start is launchManager's.
type launch struct {
	name     string // file names, messages, the webhook configurations' names (as the releases name them)
	bin, dir string
	// ports is how many loopback ports to pick: the webhook's, the probe's, then config's own.
	ports int
	// config is the Configuration file's content for the ports picked, with our webhook
	// certificate (servingcert.CertFile, servingcert.KeyFile) in certDir.
	config func(ports []int, certDir string) string
	// prepare, when set, runs after the certificate is made and before the process starts.
	prepare func(ctx context.Context, certDir string) error
	// command runs bin with the Configuration file at config.
	command func(config string) *exec.Cmd
	// readyHint says what an exit before ready commonly means.
	readyHint string
	// probe is an object created as a server-side dry run, in probeArgs (kubectl create
	// arguments besides -f), that goes through the webhooks once the API server reaches them.
	probe     string
	probeArgs []string
	// scope narrows each webhook of the module's configurations (its service path given).
	scope func(hook map[string]any, path string)
}

// loopbackConfiguration is the Configuration every manager here runs with: every server on
// loopback (metrics off), no leader election, and our own webhook certificate in certDir
// instead of the internal certificate management (which writes a Secret and patches the
// webhook configurations of a Service we do not have). A manager appends its own fields.
func loopbackConfiguration(apiVersion string, webhookPort, probePort int, certDir string) string {
	return fmt.Sprintf(`apiVersion: %s
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
`, apiVersion, probePort, webhookPort, certDir)
}

// launchManager installs the module's CRDs, runs the manager with its Configuration, and
// registers its webhooks once it is ready; it returns the ports picked. A manager that fails
// to start is killed.
func launchManager(ctx context.Context, c *cluster.Cluster, l launch) (*Manager, []int, error) {
	manifests := Manifests(l.bin)
	// Server-side: LeaderWorkerSet's CRD embeds two pod templates' schemas, too large for the
	// last-applied annotation.
	if _, _, err := c.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(manifests, "crd")); err != nil {
		return nil, nil, fmt.Errorf("%s CRDs: %w", l.name, err)
	}
	if err := waitEstablished(ctx, c, filepath.Join(manifests, "crd"), time.Minute); err != nil {
		return nil, nil, fmt.Errorf("%s %w", l.name, err)
	}
	certDir := filepath.Join(l.dir, "certs")
	certs, err := servingcert.EnsureDir(certDir, []string{"127.0.0.1"}, time.Now())
	if err != nil {
		return nil, nil, err
	}
	if l.prepare != nil {
		if err := l.prepare(ctx, certDir); err != nil {
			return nil, nil, err
		}
	}
	ports, err := freeLoopbackPorts(l.ports)
	if err != nil {
		return nil, nil, err
	}
	m := &Manager{
		name: l.name, c: c, dir: l.dir, CAPEM: certs.CA,
		Webhook:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		Probe:      net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		mutating:   l.name + "-mutating-webhook-configuration",
		validating: l.name + "-validating-webhook-configuration",
	}
	config := filepath.Join(l.dir, l.name+"-config.yaml")
	if err := os.WriteFile(config, []byte(l.config(ports, certDir)), 0o600); err != nil {
		return nil, nil, err
	}
	if err := m.start(l.command(config)); err != nil {
		return nil, nil, err
	}
	probe := filepath.Join(l.dir, l.name+"-webhook-probe.yaml")
	err = m.waitReady(ctx, 2*time.Minute, l.readyHint)
	if err == nil {
		err = os.WriteFile(probe, []byte(l.probe), 0o600)
	}
	if err == nil {
		err = m.registerWebhooks(ctx, manifests, l.scope, append(l.probeArgs, "-f", probe)...)
	}
	if err != nil {
		m.Kill()
		return nil, nil, err
	}
	return m, ports, nil
}

// Runner is a running manager: Kueue, LWS.
type Runner interface {
	Stop(timeout time.Duration) error
	manager() *Manager
}

func (m *Manager) manager() *Manager { return m }

// RunForTest starts the manager that `make target` builds (its binary named by binEnv, see
// Bin) with start against c, its files in dir, and stops it when the test ends, after showing
// the end of its log if the test failed; ctx bounds the start.
func RunForTest[R Runner](ctx context.Context, t testing.TB, c *cluster.Cluster, binEnv, target, dir string, start func(context.Context, *cluster.Cluster, string, string) (R, error)) R {
	t.Helper()
	bin := Bin(t, binEnv, target)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r, err := start(ctx, c, bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	m := r.manager()
	t.Logf("%s installed and serving webhooks on %s in %.1fs (log %s)", target, m.Webhook, time.Since(began).Seconds(), m.LogPath)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- last lines of %s ----\n%s", m.LogPath, logTail(m.LogPath, 40))
		}
		if err := r.Stop(time.Minute); err != nil {
			t.Errorf("stopping %s: %v", target, err)
		}
	})
	return r
}

// Manager is one running controller manager.
type Manager struct {
	name    string // in file names and messages
	cmd     *exec.Cmd
	done    chan struct{}
	log     *os.File
	LogPath string
	c       *cluster.Cluster
	dir     string
	Webhook string // 127.0.0.1:port, HTTPS with CAPEM
	Probe   string // 127.0.0.1:port, /healthz and /readyz
	CAPEM   []byte
	// Manifest is the webhook configurations applied, named mutating and validating.
	Manifest             string
	mutating, validating string
}

// start runs cmd with its output in the manager's log; the process dies with the test's.
func (m *Manager) start(cmd *exec.Cmd) error {
	return m.startLog(cmd, filepath.Join(m.dir, m.name+".log"))
}

// startLog starts cmd with its output in logPath.
func (m *Manager) startLog(cmd *exec.Cmd, logPath string) error {
	var err error
	m.done, m.LogPath = make(chan struct{}), logPath
	if m.log, err = os.Create(m.LogPath); err != nil {
		return err
	}
	m.cmd = cmd
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		m.log.Close()
		return err
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	return nil
}

// waitReady polls /readyz; hint says what an exit before it commonly means.
func (m *Manager) waitReady(ctx context.Context, timeout time.Duration, hint string) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := hc.Get("http://" + m.Probe + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-m.done:
			return fmt.Errorf("%s exited before ready%s; log %s ends:\n%s", m.name, hint, m.LogPath, logTail(m.LogPath, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready in %s; see %s", m.name, timeout, m.LogPath)
		}
	}
}

// registerWebhooks applies the module's webhook configurations (webhook.yaml in manifests)
// with each service reference replaced by the loopback URL and our CA, each webhook then
// passed to scope (its service path given), and waits until the API server gets answers: a
// server-side dry run of probe (kubectl create arguments) goes through them.
func (m *Manager) registerWebhooks(ctx context.Context, manifests string, scope func(hook map[string]any, path string), probe ...string) error {
	raw, err := os.ReadFile(filepath.Join(manifests, "webhook.yaml"))
	if err != nil {
		return err
	}
	var docs []string
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		out, err := m.webhookConfiguration([]byte(doc), scope)
		if err != nil {
			return err
		}
		docs = append(docs, out)
	}
	m.Manifest = strings.Join(docs, "---\n")
	path := filepath.Join(m.dir, m.name+"-webhooks.yaml")
	if err := os.WriteFile(path, []byte(m.Manifest), 0o600); err != nil {
		return err
	}
	if _, _, err := m.c.Kubectl(ctx, "apply", "-f", path); err != nil {
		return fmt.Errorf("%s webhooks: %w", m.name, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, err := m.c.Kubectl(ctx, append([]string{"create", "--dry-run=server"}, probe...)...)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server does not reach %s's webhooks: %w", m.name, err)
		}
		select {
		case <-m.done:
			return fmt.Errorf("%s exited; see %s", m.name, m.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// webhookConfiguration rewrites one webhook configuration of the module's manifests.
func (m *Manager) webhookConfiguration(doc []byte, scope func(hook map[string]any, path string)) (string, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return "", err
	}
	meta, _ := obj["metadata"].(map[string]any)
	switch kind := obj["kind"]; kind {
	case "MutatingWebhookConfiguration":
		meta["name"] = m.mutating
	case "ValidatingWebhookConfiguration":
		meta["name"] = m.validating
	default:
		return "", fmt.Errorf("unexpected kind %v in %s's webhook manifests", kind, m.name)
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
			"url":      "https://" + m.Webhook + path,
			"caBundle": base64.StdEncoding.EncodeToString(m.CAPEM),
		}
		scope(hook, path)
	}
	out, err := yaml.Marshal(obj)
	return string(out), err
}

// stop removes the webhook configurations (with failurePolicy Fail, a stopped manager would
// refuse what they match) and the other objects named, then the process, with SIGTERM.
func (m *Manager) stop(timeout time.Duration, also ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, _, werr := m.c.Kubectl(ctx, append([]string{"delete", "--ignore-not-found",
		"mutatingwebhookconfiguration/" + m.mutating, "validatingwebhookconfiguration/" + m.validating}, also...)...)
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-ctx.Done():
		m.Kill()
		return errors.Join(werr, fmt.Errorf("%s did not stop in %s", m.name, timeout))
	}
	m.log.Close()
	return werr
}

// Kill stops the process at once.
func (m *Manager) Kill() {
	_ = m.cmd.Process.Kill()
	<-m.done
	m.log.Close()
}

// Exited is closed when the process has exited.
func (m *Manager) Exited() <-chan struct{} { return m.done }

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
			return fmt.Errorf("CRDs not Established in %s: %v %v", timeout, pending, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
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
