package operator

import (
	"context"
	"crypto/tls"
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

	dto "github.com/prometheus/client_model/go"

	"github.com/example/inferenceservice-operator/test/cluster"
)

// BuildMetricsAdapter compiles the metrics adapter (the image's second binary) into dir.
func BuildMetricsAdapter(ctx context.Context, dir string) (string, error) {
	return build(ctx, filepath.Join(dir, "inferenceservice-metrics-adapter"), "./metrics/adapter")
}

// InstallMetricsAdapter runs the metrics adapter as manifests/metrics-adapter does (its
// ServiceAccount and RBAC, the APIServices it registers itself), reached through an
// ExternalName Service on 127.0.0.1 (the local cluster's pods have no network, and
// EndpointSlices refuse loopback addresses), and waits until the aggregator serves
// custom.metrics.k8s.io through it. Its files go in dir; args are added to its flags.
func InstallMetricsAdapter(ctx context.Context, c *cluster.Cluster, dir string, args ...string) (*MetricsAdapter, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"service_account.yaml", "rbac.yaml"} {
		if _, _, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(root, "manifests", "metrics-adapter", f)); err != nil {
			return nil, err
		}
	}
	bin, err := BuildMetricsAdapter(ctx, dir)
	if err != nil {
		return nil, err
	}
	sa, err := c.ServiceAccountKubeconfig(ctx, "inferenceservice-system", "inferenceservice-metrics-adapter")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	svc := filepath.Join(dir, "adapter-service.yaml")
	if err := os.WriteFile(svc, []byte(fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: inferenceservice-metrics-adapter, namespace: inferenceservice-system}\nspec:\n  type: ExternalName\n  externalName: 127.0.0.1\n  ports: [{name: https, port: %d}]\n", port)), 0o600); err != nil {
		return nil, err
	}
	if _, _, err := c.Kubectl(ctx, "apply", "-f", svc); err != nil {
		return nil, err
	}
	a, err := StartMetricsAdapter(ctx, bin, filepath.Join(dir, "metrics-adapter.log"), sa, filepath.Join(dir, "adapter-certs"), port,
		append([]string{fmt.Sprintf("--apiservice-port=%d", port)}, args...)...)
	if err != nil {
		return nil, err
	}
	if _, _, err := c.Kubectl(ctx, "wait", "--for=condition=Available", "apiservice/v1beta2.custom.metrics.k8s.io", "--timeout=120s"); err != nil {
		a.Kill()
		return nil, err
	}
	return a, nil
}

// MetricsAdapter is one running metrics adapter, serving on Addr (127.0.0.1:port) over HTTPS.
type MetricsAdapter struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
	// again starts the same adapter anew (same port, certificates, flags and log).
	again func(context.Context) (*MetricsAdapter, error)
}

// Restart starts a killed adapter again as it was started, as its Deployment's controller
// would, and waits until it serves.
func (a *MetricsAdapter) Restart(ctx context.Context) (*MetricsAdapter, error) {
	return a.again(ctx)
}

// StartMetricsAdapter runs bin serving on 127.0.0.1:port with kubeconfig for every client (lister,
// delegated authentication and authorization), its certificates in certDir, and waits until
// /readyz answers. It runs as the default install's pod: in inferenceservice-system.
func StartMetricsAdapter(ctx context.Context, bin, logPath, kubeconfig, certDir string, port int, args ...string) (*MetricsAdapter, error) {
	return StartMetricsAdapterEnv(ctx, []string{"POD_NAMESPACE=inferenceservice-system"}, bin, logPath, kubeconfig, certDir, port, args...)
}

// StartMetricsAdapterEnv is StartMetricsAdapter with env (NAME=value, e.g. the pod's downward API) added to
// the inherited environment.
func StartMetricsAdapterEnv(ctx context.Context, env []string, bin, logPath, kubeconfig, certDir string, port int, args ...string) (*MetricsAdapter, error) {
	full := append([]string{
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + certDir,
		"--lister-kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
	}, args...)
	// Appended to: a restarted adapter (Restart) keeps its earlier runs' lines.
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, full...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &MetricsAdapter{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{}), log: logf,
		again: func(ctx context.Context) (*MetricsAdapter, error) {
			return StartMetricsAdapterEnv(ctx, env, bin, logPath, kubeconfig, certDir, port, args...)
		}}
	go func() { _ = cmd.Wait(); close(a.done) }()
	// Its own self-signed certificate, as the aggregator sees it (insecureSkipTLSVerify).
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := c.Get("https://" + a.Addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return a, nil
			}
		}
		select {
		case <-a.done:
			return nil, fmt.Errorf("metrics adapter exited before serving; see %s", logPath)
		case <-ctx.Done():
			a.Kill()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			a.Kill()
			return nil, fmt.Errorf("metrics adapter not ready in 60s; see %s", logPath)
		}
	}
}

// Kill stops the adapter at once, as a node loss would.
func (a *MetricsAdapter) Kill() {
	_ = a.cmd.Process.Kill()
	<-a.done
	a.log.Close()
}

// Pid is the adapter's process id.
func (a *MetricsAdapter) Pid() int { return a.cmd.Process.Pid }

// RSSBytes and RSSAnonBytes are the adapter's resident and anonymous resident memory.
func (a *MetricsAdapter) RSSBytes() (int64, error)     { return procStatusBytes(a.Pid(), "VmRSS:") }
func (a *MetricsAdapter) RSSAnonBytes() (int64, error) { return procStatusBytes(a.Pid(), "RssAnon:") }

// CPUSeconds is the adapter's user and system CPU time so far (/proc/PID/stat, in clock ticks
// of 1/100 s, as Linux reports them to user space).
func (a *MetricsAdapter) CPUSeconds() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.Pid()))
	if err != nil {
		return 0, err
	}
	// The fields after the command's closing parenthesis: state is the 3rd field, utime the 14th.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat: %q", s)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc stat: %q", s)
	}
	return (utime + stime) / 100, nil
}

// Scrape reads the adapter's /metrics with tlsCfg's client certificate (the adapter's
// delegated authentication accepts the cluster's client CA).
func (a *MetricsAdapter) Scrape(tlsCfg *tls.Config) (map[string]*dto.MetricFamily, error) {
	c := tlsCfg.Clone()
	c.InsecureSkipVerify = true // the adapter's self-signed serving certificate
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: c}}
	return Scrape(client, "https://"+a.Addr+"/metrics")
}
