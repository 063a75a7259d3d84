// KServe's controller manager on the local cluster, in Standard (raw Deployment) mode, for
// -system=kserve: its CRDs, RBAC and inferenceservice-config from its module, our own webhook
// certificate, its webhooks registered by loopback URL, the process in its own network
// namespace (netns.go).

package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// KServeBinEnv names a prebuilt KServe manager; unset, test/kserve/build.sh builds (or reuses)
// test/kserve/bin/manager.
const KServeBinEnv = "KSERVE_BIN"

// Where the manager runs, as KServe's install names them.
const (
	kserveNamespace      = "kserve"
	kserveServiceAccount = "kserve-controller-manager"
	kserveConfigMap      = "inferenceservice-config"
	// Inside its network namespace; nothing outside can reach them but the bench.
	kserveMetricsAddr = "127.0.0.1:8080"
	kserveProbeAddr   = "127.0.0.1:8081"
	kserveWebhookPort = "9443"
)

// kserveModule finds the KServe module's sources (for its config/) and its manager binary.
func kserveModule(ctx context.Context, root string) (dir, bin string, err error) {
	mod := filepath.Join(root, "test", "kserve")
	bin = os.Getenv(KServeBinEnv)
	if bin == "" {
		bin = filepath.Join(mod, "bin", "manager")
		cmd := exec.CommandContext(ctx, filepath.Join(mod, "build.sh"), bin)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("test/kserve/build.sh: %w\n%s", err, out)
		}
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/kserve/kserve")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("locating the kserve module: %w", err)
	}
	return strings.TrimSpace(string(out)), bin, nil
}

// kserveProcess is one running KServe manager.
type kserveProcess struct {
	cmd     *exec.Cmd
	done    chan struct{}
	ns      *netns
	lns     []net.Listener // the bench's side of the bridges
	http    *http.Client   // to the manager's metrics and probes, inside its namespace
	LogPath string
	Webhook string // 127.0.0.1:port on the bench's side
}

// startKServe installs KServe's CRDs, RBAC and config on e's cluster, runs the manager with its
// ServiceAccount's token, registers its webhooks and waits until the API server reaches them.
func startKServe(ctx context.Context, e *testenv.Env, c Config) (*kserveProcess, error) {
	modDir, bin, err := kserveModule(ctx, e.Root)
	if err != nil {
		return nil, err
	}
	logf(c, "kserve manager %s, config from %s", bin, modDir)
	cfg := filepath.Join(modDir, "config")
	crds := filepath.Join(cfg, "crd", "full")
	// Server-side: the InferenceService CRD (2 MB) is too large for the last-applied annotation.
	apply := []string{"apply", "--server-side", "--force-conflicts"}
	for _, f := range []string{"serving.kserve.io_inferenceservices.yaml", "serving.kserve.io_trainedmodels.yaml",
		"serving.kserve.io_clusterservingruntimes.yaml", "serving.kserve.io_servingruntimes.yaml",
		"serving.kserve.io_inferencegraphs.yaml", "clusterstoragecontainer/serving.kserve.io_clusterstoragecontainers.yaml"} {
		apply = append(apply, "-f", filepath.Join(crds, f))
	}
	if _, _, err := e.Cluster.Kubectl(ctx, apply...); err != nil {
		return nil, fmt.Errorf("kserve CRDs: %w", err)
	}
	// kubectl wait fails, rather than waits, while a new CRD has no conditions yet.
	for deadline := time.Now().Add(time.Minute); ; {
		_, _, err := e.Cluster.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/inferenceservices.serving.kserve.io")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond): // poll interval
		}
	}
	cm, err := kserveConfig(filepath.Join(cfg, "configmap", "inferenceservice.yaml"))
	if err != nil {
		return nil, err
	}
	rbac := "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + kserveNamespace + "}\n---\n" +
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: " + kserveServiceAccount + ", namespace: " + kserveNamespace + "}\n---\n" +
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: kserve-manager-rolebinding}\n" +
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kserve-manager-role}\n" +
		"subjects: [{kind: ServiceAccount, name: " + kserveServiceAccount + ", namespace: " + kserveNamespace + "}]\n---\n" + cm
	path := filepath.Join(e.Dir, "kserve-install.yaml")
	if err := os.WriteFile(path, []byte(rbac), 0o600); err != nil {
		return nil, err
	}
	if _, _, err := e.Cluster.Kubectl(ctx, "apply", "-f", filepath.Join(cfg, "rbac", "role.yaml"), "-f", path); err != nil {
		return nil, fmt.Errorf("kserve RBAC and config: %w", err)
	}
	kubeconfig, err := e.Cluster.ServiceAccountKubeconfig(ctx, kserveNamespace, kserveServiceAccount)
	if err != nil {
		return nil, err
	}

	// controller-runtime reads its webhook certificate from $TMPDIR/k8s-webhook-server/serving-certs.
	tmp := filepath.Join(e.Dir, "kserve-tmp")
	certs, err := servingcert.EnsureDir(filepath.Join(tmp, "k8s-webhook-server", "serving-certs"), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		return nil, err
	}
	p := &kserveProcess{done: make(chan struct{}), LogPath: filepath.Join(e.Dir, "kserve.log")}
	if err := p.start(ctx, bin, kubeconfig, tmp, e.Cluster.Server()); err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, 2*time.Minute); err != nil {
		p.Stop(10 * time.Second)
		return nil, err
	}
	if err := p.registerWebhooks(ctx, e, filepath.Join(cfg, "webhook", "manifests.yaml"), certs.CA); err != nil {
		p.Stop(10 * time.Second)
		return nil, err
	}
	return p, nil
}

// kserveConfig is KServe's shipped inferenceservice-config with the two changes this run needs:
// Standard mode by default, and no Ingress or Istio VirtualService (neither is installed; the
// operator makes none either).
func kserveConfig(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(b, &cm); err != nil {
		return "", err
	}
	set := func(key string, fields map[string]any) error {
		var v map[string]any
		if err := json.Unmarshal([]byte(cm.Data[key]), &v); err != nil {
			return fmt.Errorf("%s %s: %w", path, key, err)
		}
		for k, f := range fields {
			v[k] = f
		}
		out, err := json.Marshal(v)
		cm.Data[key] = string(out)
		return err
	}
	if err := set("deploy", map[string]any{"defaultDeploymentMode": "Standard"}); err != nil {
		return "", err
	}
	if err := set("ingress", map[string]any{"disableIngressCreation": true, "disableIstioVirtualHost": true}); err != nil {
		return "", err
	}
	delete(cm.Data, "_example")
	cm.Namespace = kserveNamespace
	out, err := yaml.Marshal(cm)
	return string(out), err
}

// start runs the manager in a network namespace of its own, with a listener there at the API
// server's address that leads to the real one, and a loopback port here that leads to its
// webhook server.
func (p *kserveProcess) start(ctx context.Context, bin, kubeconfig, tmp, server string) error {
	u, err := url.Parse(server)
	if err != nil {
		return err
	}
	log, err := os.Create(p.LogPath)
	if err != nil {
		return err
	}
	// The shell brings the namespace's loopback up, says so, and waits for the bridge before
	// it becomes the manager (which reads its ConfigMap at once and exits if it cannot).
	p.cmd = exec.Command("unshare", "--net", "--", "sh", "-c", `ip link set lo up && echo up && read _ && exec "$@"`, "sh",
		bin, "--metrics-addr="+kserveMetricsAddr, "--health-probe-addr="+kserveProbeAddr, "--webhook-port="+kserveWebhookPort)
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "TMPDIR="+tmp, "POD_NAMESPACE="+kserveNamespace)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stderr = log
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go func() { _ = p.cmd.Wait(); log.Close(); close(p.done) }()
	sc := bufio.NewReader(stdout)
	line, err := sc.ReadString('\n')
	if err != nil || line != "up\n" {
		p.Kill()
		return fmt.Errorf("kserve's network namespace: %q %v; see %s", line, err, p.LogPath)
	}
	go func() { _, _ = sc.WriteTo(log) }()
	if p.ns, err = enterNetns(p.cmd.Process.Pid); err != nil {
		p.Kill()
		return err
	}
	api, err := p.ns.listen(u.Host)
	if err != nil {
		p.Kill()
		return err
	}
	hook, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.Kill()
		return err
	}
	p.lns = []net.Listener{api, hook}
	p.Webhook = hook.Addr().String()
	go forward(api, func() (net.Conn, error) { return net.Dial("tcp", u.Host) })
	go forward(hook, func() (net.Conn, error) { return p.ns.dial(net.JoinHostPort("127.0.0.1", kserveWebhookPort)) })
	p.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil,
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) { return p.ns.dial(addr) }}}
	if _, err := stdin.Write([]byte("\n")); err != nil {
		p.Kill()
		return err
	}
	return nil
}

// waitReady polls /readyz, which answers once the webhook server is listening.
func (p *kserveProcess) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := p.http.Get("http://" + kserveProbeAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kserve not ready in %s; see %s", timeout, p.LogPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("kserve exited; see %s", p.LogPath)
		case <-time.After(200 * time.Millisecond): // poll interval
		}
	}
}

// registerWebhooks applies KServe's webhook configurations with each service reference turned
// into our loopback URL and CA, and waits until the API server gets answers from them.
func (p *kserveProcess) registerWebhooks(ctx context.Context, e *testenv.Env, manifests string, ca []byte) error {
	raw, err := os.ReadFile(manifests)
	if err != nil {
		return err
	}
	var docs []string
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.TrimSpace(doc) == "" || strings.TrimSpace(doc) == "---" {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return err
		}
		hooks, _ := obj["webhooks"].([]any)
		for _, h := range hooks {
			hook := h.(map[string]any)
			cc, _ := hook["clientConfig"].(map[string]any)
			svc, _ := cc["service"].(map[string]any)
			path, _ := svc["path"].(string)
			if path == "" {
				return fmt.Errorf("webhook %v has no service path", hook["name"])
			}
			hook["clientConfig"] = map[string]any{"url": "https://" + p.Webhook + path, "caBundle": base64.StdEncoding.EncodeToString(ca)}
		}
		out, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		docs = append(docs, string(out))
	}
	path := filepath.Join(e.Dir, "kserve-webhooks.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		return err
	}
	if _, _, err := e.Cluster.Kubectl(ctx, "apply", "-f", path); err != nil {
		return fmt.Errorf("kserve webhooks: %w", err)
	}
	// A server-side dry run of an InferenceService goes through the defaulter and validator.
	probe := filepath.Join(e.Dir, "kserve-webhook-probe.yaml")
	if err := os.WriteFile(probe, []byte("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: probe, namespace: "+kserveNamespace+"}\n"+
		"spec: {predictor: {containers: [{name: kserve-container, image: probe}]}}\n"), 0o600); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, err := e.Cluster.Kubectl(ctx, "create", "--dry-run=server", "-f", probe)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server does not reach kserve's webhooks: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("kserve exited; see %s", p.LogPath)
		case <-time.After(200 * time.Millisecond): // poll interval
		}
	}
}

// Scrape fetches and parses the manager's /metrics.
func (p *kserveProcess) Scrape() (map[string]*dto.MetricFamily, error) {
	return operator.Scrape(p.http, "http://"+kserveMetricsAddr+"/metrics")
}

// Writes sums the manager's mutating API requests, as the operator's are counted.
func (p *kserveProcess) Writes() (float64, error) {
	fams, err := p.Scrape()
	if err != nil {
		return 0, err
	}
	return writesIn(fams), nil
}

// RSSBytes reads the manager's resident set size (the shell exec'd into it: same pid).
func (p *kserveProcess) RSSBytes() (int64, error) { return procStatusKB(p.cmd.Process.Pid, "VmRSS:") }

// RSSAnonBytes reads the anonymous part of its resident set.
func (p *kserveProcess) RSSAnonBytes() (int64, error) {
	return procStatusKB(p.cmd.Process.Pid, "RssAnon:")
}

// PeakRSSBytes reads the most its resident set has been.
func (p *kserveProcess) PeakRSSBytes() (int64, error) {
	return procStatusKB(p.cmd.Process.Pid, "VmHWM:")
}

// procStatusKB reads a kB field of /proc/PID/status in bytes.
func procStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			var kb int64
			_, err := fmt.Sscan(f[1], &kb)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// writesIn sums mutating requests (POST, PUT, PATCH, DELETE) in client-go's
// rest_client_requests_total, as test/operator counts the operator's.
func writesIn(fams map[string]*dto.MetricFamily) float64 {
	return operator.SumCounter(fams, "rest_client_requests_total", func(l map[string]string) bool {
		switch strings.ToUpper(l["method"]) {
		case "POST", "PUT", "PATCH", "DELETE":
			return true
		}
		return false
	})
}

// Stop ends the process with SIGTERM (its webhook configurations go with the run's cluster).
func (p *kserveProcess) Stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	defer p.closeBridges()
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("kserve did not exit within %s of SIGTERM", timeout)
	}
}

// Kill ends the process at once.
func (p *kserveProcess) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	p.closeBridges()
}

func (p *kserveProcess) closeBridges() {
	for _, ln := range p.lns {
		ln.Close()
	}
	p.lns = nil
	if p.ns != nil {
		p.ns.close()
		p.ns = nil
	}
}
