package operator

// A controller-runtime manager (Kueue's, LeaderWorkerSet's) run as a process on the test
// machine: ready on its loopback probe, its module's webhook configurations registered by URL
// on loopback with our CA, and, stopped, its webhooks removed before the process.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/test/cluster"
)

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
	var err error
	m.done, m.LogPath = make(chan struct{}), filepath.Join(m.dir, m.name+".log")
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
