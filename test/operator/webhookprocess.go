package operator

// What Kueue's and LeaderWorkerSet's harnesses share: a controller manager run on the test
// machine whose webhooks the API server calls by URL on loopback with our own CA, its readiness,
// the registration of the module's webhook configurations rewritten for that, and its stop.

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

// webhookProcess is one such controller manager.
type webhookProcess struct {
	name     string // kueue, lws: in messages and file names
	cmd      *exec.Cmd
	done     chan struct{}
	log      *os.File
	LogPath  string
	c        *cluster.Cluster
	dir      string
	Webhook  string // 127.0.0.1:port, HTTPS with CAPEM
	Probe    string // 127.0.0.1:port, /healthz and /readyz
	CAPEM    []byte
	Manifest string // the webhook configurations applied
	// mutating and validating name the webhook configurations, as the release names them.
	mutating, validating string
	// exitHint is added when the process exits before it is ready.
	exitHint string
}

// start runs cmd with its output in LogPath and waits for /readyz.
func (w *webhookProcess) start(ctx context.Context, cmd *exec.Cmd) error {
	var err error
	if w.log, err = os.Create(w.LogPath); err != nil {
		return err
	}
	w.cmd, w.done = cmd, make(chan struct{})
	w.cmd.Env = append(os.Environ(), "KUBECONFIG="+w.c.KubeconfigPath())
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		w.log.Close()
		return err
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	if err := w.waitReady(ctx, 2*time.Minute); err != nil {
		w.Kill()
		return err
	}
	return nil
}

// waitReady polls /readyz.
func (w *webhookProcess) waitReady(ctx context.Context, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := hc.Get("http://" + w.Probe + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-w.done:
			return fmt.Errorf("%s exited before ready%s; log %s ends:\n%s", w.name, w.exitHint, w.LogPath, logTail(w.LogPath, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready in %s; see %s", w.name, timeout, w.LogPath)
		}
	}
}

// registerWebhooks applies the module's webhook configurations with each service reference
// replaced by the loopback URL and our CA (and adjust's changes to each webhook, by its path),
// and waits until the API server gets answers: a server-side dry run of probe (created with
// probeArgs) goes through the webhooks.
func (w *webhookProcess) registerWebhooks(ctx context.Context, manifests string, adjust func(hook map[string]any, path string), probe string, probeArgs ...string) error {
	raw, err := os.ReadFile(filepath.Join(manifests, "webhook.yaml"))
	if err != nil {
		return err
	}
	var docs []string
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		out, err := w.webhookConfiguration([]byte(doc), adjust)
		if err != nil {
			return err
		}
		docs = append(docs, out)
	}
	w.Manifest = strings.Join(docs, "---\n")
	if err := applyFile(ctx, w.c, filepath.Join(w.dir, w.name+"-webhooks.yaml"), w.Manifest); err != nil {
		return fmt.Errorf("%s webhooks: %w", w.name, err)
	}
	path := filepath.Join(w.dir, w.name+"-webhook-probe.yaml")
	if err := os.WriteFile(path, []byte(probe), 0o600); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, err := w.c.Kubectl(ctx, append(append([]string{"create", "--dry-run=server"}, probeArgs...), "-f", path)...)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server does not reach %s's webhooks: %w", w.name, err)
		}
		select {
		case <-w.done:
			return fmt.Errorf("%s exited; see %s", w.name, w.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// webhookConfiguration rewrites one webhook configuration of the module's manifests.
func (w *webhookProcess) webhookConfiguration(doc []byte, adjust func(hook map[string]any, path string)) (string, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return "", err
	}
	meta, _ := obj["metadata"].(map[string]any)
	switch kind := obj["kind"]; kind {
	case "MutatingWebhookConfiguration":
		meta["name"] = w.mutating
	case "ValidatingWebhookConfiguration":
		meta["name"] = w.validating
	default:
		return "", fmt.Errorf("unexpected kind %v in %s's webhook manifests", kind, w.name)
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
			"url":      "https://" + w.Webhook + path,
			"caBundle": base64.StdEncoding.EncodeToString(w.CAPEM),
		}
		adjust(hook, path)
	}
	out, err := yaml.Marshal(obj)
	return string(out), err
}

// Stop removes the webhook configurations (with failurePolicy Fail, a stopped manager would
// refuse what they match) and then the process, with SIGTERM.
func (w *webhookProcess) Stop(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, _, werr := w.c.Kubectl(ctx, "delete", "--ignore-not-found",
		"mutatingwebhookconfiguration/"+w.mutating, "validatingwebhookconfiguration/"+w.validating)
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-ctx.Done():
		w.Kill()
		return errors.Join(werr, fmt.Errorf("%s did not stop in %s", w.name, timeout))
	}
	w.log.Close()
	return werr
}

// Kill stops the process at once.
func (w *webhookProcess) Kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
	w.log.Close()
}

// Exited is closed when the process has exited.
func (w *webhookProcess) Exited() <-chan struct{} { return w.done }
