package operator

// LeaderWorkerSet's controller manager, built from its module by test/lws/build.sh, run against
// the local cluster as the release runs it (its CRD, its webhook configurations with the
// release's pod objectSelector, its Configuration), with the differences a process on the test
// machine needs: the webhooks listen on 127.0.0.1 and the API server calls them by URL with our
// own CA, internal certificate management and leader election are off, metrics are off.

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
	"time"

	"sigs.k8s.io/yaml"

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
	l := &LWS{
		c: c, dir: dir, CAPEM: certs.CAPEM, done: make(chan struct{}),
		Webhook: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		Probe:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		LogPath: filepath.Join(dir, "lws.log"),
	}
	config := filepath.Join(dir, "lws-config.yaml")
	if err := os.WriteFile(config, []byte(lwsConfiguration(ports[0], ports[1], certDir)), 0o600); err != nil {
		return nil, err
	}
	if l.log, err = os.Create(l.LogPath); err != nil {
		return nil, err
	}
	l.cmd = exec.Command(bin, "--config="+config, "--zap-log-level=2")
	l.cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
	l.cmd.Stdout, l.cmd.Stderr = l.log, l.log
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := l.cmd.Start(); err != nil {
		l.log.Close()
		return nil, err
	}
	go func() { _ = l.cmd.Wait(); close(l.done) }()
	if err := l.waitReady(ctx, 2*time.Minute); err != nil {
		l.Kill()
		return nil, err
	}
	if err := l.registerWebhooks(ctx, manifests); err != nil {
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

// waitReady polls /readyz. LWS answers it as soon as the manager runs (a ping), not when its
// webhooks listen: registerWebhooks is what proves those.
func (l *LWS) waitReady(ctx context.Context, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := hc.Get("http://" + l.Probe + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-l.done:
			return fmt.Errorf("lws exited before ready; log %s ends:\n%s", l.LogPath, logTail(l.LogPath, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lws not ready in %s; see %s", timeout, l.LogPath)
		}
	}
}

// registerWebhooks applies the module's webhook configurations with each service reference
// replaced by the loopback URL and our CA, and waits until the API server gets answers: a
// server-side dry run of a LeaderWorkerSet goes through both LWS webhooks.
func (l *LWS) registerWebhooks(ctx context.Context, manifests string) error {
	raw, err := os.ReadFile(filepath.Join(manifests, "webhook.yaml"))
	if err != nil {
		return err
	}
	var docs []string
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		out, err := l.webhookConfiguration([]byte(doc))
		if err != nil {
			return err
		}
		docs = append(docs, out)
	}
	l.Manifest = strings.Join(docs, "---\n")
	path := filepath.Join(l.dir, "lws-webhooks.yaml")
	if err := os.WriteFile(path, []byte(l.Manifest), 0o600); err != nil {
		return err
	}
	if _, _, err := l.c.Kubectl(ctx, "apply", "-f", path); err != nil {
		return fmt.Errorf("lws webhooks: %w", err)
	}
	probe := filepath.Join(l.dir, "lws-webhook-probe.yaml")
	if err := os.WriteFile(probe, []byte(lwsWebhookProbe), 0o600); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, err := l.c.Kubectl(ctx, "create", "--dry-run=server", "-n", "default", "-f", probe)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server does not reach lws's webhooks: %w", err)
		}
		select {
		case <-l.done:
			return fmt.Errorf("lws exited; see %s", l.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
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

// webhookConfiguration rewrites one webhook configuration of the module's manifests. The pod
// webhooks get the objectSelector the release adds with its kustomize patches
// (config/webhook/*-patch.yaml), so only LWS's own pods go through them.
func (l *LWS) webhookConfiguration(doc []byte) (string, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return "", err
	}
	meta, _ := obj["metadata"].(map[string]any)
	switch kind := obj["kind"]; kind {
	case "MutatingWebhookConfiguration":
		meta["name"] = lwsMutatingWebhooks
	case "ValidatingWebhookConfiguration":
		meta["name"] = lwsValidatingWebhooks
	default:
		return "", fmt.Errorf("unexpected kind %v in lws's webhook manifests", kind)
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
			"url":      "https://" + l.Webhook + path,
			"caBundle": base64.StdEncoding.EncodeToString(l.CAPEM),
		}
		if strings.HasSuffix(path, "-v1-pod") {
			hook["objectSelector"] = map[string]any{"matchExpressions": []any{
				map[string]any{"key": LWSNameLabel, "operator": "Exists"},
			}}
		}
	}
	out, err := yaml.Marshal(obj)
	return string(out), err
}

// Stop removes the webhook configurations (with failurePolicy Fail, a stopped LWS would refuse
// every LeaderWorkerSet and its pods) and then the process, with SIGTERM.
func (l *LWS) Stop(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, _, werr := l.c.Kubectl(ctx, "delete", "--ignore-not-found",
		"mutatingwebhookconfiguration/"+lwsMutatingWebhooks, "validatingwebhookconfiguration/"+lwsValidatingWebhooks)
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.done:
	case <-ctx.Done():
		l.Kill()
		return errors.Join(werr, fmt.Errorf("lws did not stop in %s", timeout))
	}
	l.log.Close()
	return werr
}

// Kill stops the process at once.
func (l *LWS) Kill() {
	_ = l.cmd.Process.Kill()
	<-l.done
	l.log.Close()
}

// Exited is closed when the process has exited.
func (l *LWS) Exited() <-chan struct{} { return l.done }
