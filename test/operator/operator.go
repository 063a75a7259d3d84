// Package operator builds the operator binary and runs it as a child process against the
// local cluster, so end-to-end tests exercise exactly what users run: the same flags, the same
// RBAC (through a ServiceAccount kubeconfig), metrics scraped over HTTP.
package operator

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/test/buildprogress"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/memcg"
)

// Build compiles the operator into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	return build(ctx, filepath.Join(dir, "inferenceservice-operator"), ".")
}

// build compiles the repository's package pkg, statically, to bin.
func build(ctx context.Context, bin, pkg string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	if err := buildprogress.Build(ctx, filepath.Base(bin), root, buildprogress.Env("CGO_ENABLED=0"), os.Stderr, "-o", bin, pkg); err != nil {
		return "", err
	}
	return bin, nil
}

// Process is one running operator.
type Process struct {
	cmd         *exec.Cmd
	MetricsAddr string
	ProbeAddr   string
	// WebhookAddr is set when the operator runs with --webhook-bind-address.
	WebhookAddr string
	done        chan struct{}
	mu          sync.Mutex
	log         *os.File
}

var servingRE = regexp.MustCompile(`"Serving" endpoint="(\w+)" address="([^"]+)"`)

// Start runs bin with args (metrics and probes on loopback ephemeral ports unless args set
// them), logging to logPath, and waits until both endpoints are listening.
func Start(ctx context.Context, bin, logPath string, args ...string) (*Process, error) {
	return StartEnv(ctx, nil, bin, logPath, args...)
}

// StartEnv is Start with env (NAME=value) added to the inherited environment.
func StartEnv(ctx context.Context, env []string, bin, logPath string, args ...string) (*Process, error) {
	return StartEnvIn(ctx, nil, env, bin, logPath, args...)
}

// StartEnvIn is StartEnv in memory cgroup g (nil: this process's own), as a container with a
// memory limit runs it.
func StartEnvIn(ctx context.Context, g *memcg.Group, env []string, bin, logPath string, args ...string) (*Process, error) {
	full := append([]string{"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"}, args...)
	cmd := exec.Command(bin, full...)
	cmd.Env = append(os.Environ(), env...)
	if g != nil {
		if err := g.Enter(cmd); err != nil {
			return nil, err
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), log: logf}
	addrs := make(chan [2]string, 4)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := servingRE.FindStringSubmatch(line); m != nil {
				addrs <- [2]string{m[1], m[2]}
			}
		}
		_, _ = io.Copy(logf, stderr)
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	deadline := time.After(30 * time.Second)
	wantWebhook := slices.ContainsFunc(args, func(a string) bool {
		return strings.HasPrefix(a, "--webhook-bind-address=") && a != "--webhook-bind-address="
	})
	for p.MetricsAddr == "" || p.ProbeAddr == "" || (wantWebhook && p.WebhookAddr == "") {
		select {
		case a := <-addrs:
			switch a[0] {
			case "metrics":
				p.MetricsAddr = a[1]
			case "webhook":
				p.WebhookAddr = a[1]
			default:
				p.ProbeAddr = a[1]
			}
		case <-p.done:
			return nil, fmt.Errorf("operator exited before serving; see %s", logPath)
		case <-deadline:
			p.Kill()
			return nil, fmt.Errorf("operator did not start serving in 30s; see %s", logPath)
		case <-ctx.Done():
			p.Kill()
			return nil, ctx.Err()
		}
	}
	return p, nil
}

// WaitReady polls /readyz until the caches have synced.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + p.ProbeAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("operator not ready after %s; log %s ends:\n%s", timeout, p.log.Name(), logTail(p.log.Name(), 30))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("operator exited; log %s ends:\n%s", p.log.Name(), logTail(p.log.Name(), 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits for a clean exit.
func (p *Process) Stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if s := p.cmd.ProcessState; s != nil && !s.Success() {
			return fmt.Errorf("operator exited with %v", s)
		}
		return nil
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("operator did not exit within %s of SIGTERM", timeout)
	}
}

// Kill sends SIGKILL and waits.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Scrape fetches and parses /metrics.
func (p *Process) Scrape() (map[string]*dto.MetricFamily, error) {
	return Scrape(nil, "http://"+p.MetricsAddr+"/metrics")
}

// Writes sums the operator's mutating API requests (POST, PUT, PATCH, DELETE) from
// client-go's rest_client_requests_total.
func (p *Process) Writes() (float64, error) {
	fams, err := p.Scrape()
	if err != nil {
		return 0, err
	}
	return SumCounter(fams, "rest_client_requests_total", func(labels map[string]string) bool {
		switch strings.ToUpper(labels["method"]) {
		case "POST", "PUT", "PATCH", "DELETE":
			return true
		}
		return false
	}), nil
}

// SumCounter adds up the samples of a counter or gauge family whose labels match.
func SumCounter(fams map[string]*dto.MetricFamily, name string, match func(map[string]string) bool) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if match != nil && !match(labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.GetSummary().GetSampleCount())
		}
	}
	return sum
}

// Pid is the operator's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// RSSBytes reads the process's resident set size from /proc.
func (p *Process) RSSBytes() (int64, error) { return p.statusBytes("VmRSS:") }

// RSSAnonBytes reads the anonymous part of the resident set (the heap, stacks and runtime; the
// rest is the binary's pages, which the kernel can drop and read back).
func (p *Process) RSSAnonBytes() (int64, error) { return p.statusBytes("RssAnon:") }

// PeakRSSBytes reads the most the resident set has been since the process started.
func (p *Process) PeakRSSBytes() (int64, error) { return p.statusBytes("VmHWM:") }

func (p *Process) statusBytes(field string) (int64, error) { return procStatusBytes(p.Pid(), field) }

// procStatusBytes reads a kB field of /proc/PID/status in bytes.
func procStatusBytes(pid int, field string) (int64, error) {
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
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// ManifestEnv reads the literal env values the shipped Deployment (manifests/operator/
// deployment.yaml under root) gives the operator container, as NAME=value: runs that measure
// the operator run it as deployed.
func ManifestEnv(root string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "manifests", "operator", "deployment.yaml"))
	if err != nil {
		return nil, err
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(b, &d); err != nil {
		return nil, err
	}
	var env []string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "operator" {
			continue
		}
		for _, e := range c.Env {
			switch ref := e.ValueFrom; {
			case ref == nil:
				env = append(env, e.Name+"="+e.Value)
			case ref.ResourceFieldRef != nil:
				// As the kubelet resolves it from the container's own resources.
				v, err := resourceFieldValue(ref.ResourceFieldRef, &c)
				if err != nil {
					return nil, fmt.Errorf("env %s: %w", e.Name, err)
				}
				env = append(env, e.Name+"="+v)
			}
		}
	}
	return env, nil
}

// resourceFieldValue resolves a downward API resourceFieldRef to a limit of the container, as
// the kubelet does (rounded up to the divisor); only the limits the manifest uses.
func resourceFieldValue(ref *corev1.ResourceFieldSelector, c *corev1.Container) (string, error) {
	var q resource.Quantity
	switch ref.Resource {
	case "limits.memory":
		q = c.Resources.Limits[corev1.ResourceMemory]
	case "limits.cpu":
		q = c.Resources.Limits[corev1.ResourceCPU]
	default:
		return "", fmt.Errorf("resourceFieldRef %s not resolved by the harness", ref.Resource)
	}
	if q.IsZero() {
		return "", fmt.Errorf("resourceFieldRef %s: no limit in the manifest", ref.Resource)
	}
	div := int64(1)
	if !ref.Divisor.IsZero() {
		div = ref.Divisor.Value()
	}
	return strconv.FormatInt((q.Value()+div-1)/div, 10), nil
}

// HeapProfile saves the operator's heap profile (it must run with --pprof) to path.
func (p *Process) HeapProfile(path string) error {
	resp, err := http.Get("http://" + p.ProbeAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
