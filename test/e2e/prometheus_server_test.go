package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/test/testenv"
)

// promServer is a real Prometheus scraping the operator under test every second, with the
// project's rules loaded.
type promServer struct {
	addr string
}

// scrapeJobs is Prometheus's scrape_configs for the operator at target: the job of
// manifests/monitoring/prometheus_scrape_config.yaml (HTTPS, a bearer token, the self-signed
// certificate not verified) with a static target for its pod discovery and tokenFile for the
// in-cluster ServiceAccount token; and the same job without a token, named unauthenticated,
// which the operator must refuse.
func scrapeJobs(t *testing.T, target, tokenFile string) []any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.Root, "manifests", "monitoring", "prometheus_scrape_config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var example struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &example); err != nil || len(example.ScrapeConfigs) != 1 {
		t.Fatalf("prometheus_scrape_config.yaml: %v, %d jobs", err, len(example.ScrapeConfigs))
	}
	job := example.ScrapeConfigs[0]
	auth, _ := job["authorization"].(map[string]any)
	if job["scheme"] != "https" || auth == nil || auth["credentials_file"] == nil {
		t.Fatalf("prometheus_scrape_config.yaml's job does not scrape with HTTPS and a token: %v", job)
	}
	// Pod discovery and its relabelling need pods Prometheus can reach; the target is static.
	delete(job, "kubernetes_sd_configs")
	delete(job, "relabel_configs")
	job["static_configs"] = []any{map[string]any{"targets": []any{target}}}
	auth["credentials_file"] = tokenFile
	anonymous := map[string]any{}
	for k, v := range job {
		anonymous[k] = v
	}
	delete(anonymous, "authorization")
	anonymous["job_name"] = "unauthenticated"
	return []any{job, anonymous}
}

// startPrometheus runs prometheus against env.op's metrics endpoint, served with
// --metrics-secure, until the test ends; token is the ServiceAccount token it scrapes with.
func startPrometheus(t *testing.T, token string) *promServer {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join(env.Root, "manifests", "monitoring", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return runPrometheus(t, dir, map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files":     []any{rules},
		"scrape_configs": scrapeJobs(t, env.op.MetricsAddr, tokenFile),
	})
}

// runPrometheus runs Debian's prometheus with config, its files in dir, on a loopback port
// until the test ends, and waits until it is ready.
func runPrometheus(t *testing.T, dir string, config map[string]any) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not on PATH: install it with `apt-get install -y prometheus` (Debian; .ci/run does so in CI)")
	}
	b, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--web.console.templates="+dir, "--web.console.libraries="+dir,
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	// Registered after TempDir, so it runs first: the process is gone before its data dir.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("prometheus log:\n%s", b)
			}
		}
		logf.Close()
	})
	p := &promServer{addr: addr}
	testenv.Eventually(t, 30*time.Second, "prometheus ready", func() error {
		select {
		case <-done:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus exited:\n%s", b)
		default:
		}
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	})
	return p
}

// freeLoopbackAddr picks a free loopback port (Prometheus cannot report the one it chose).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// sample is one element of an instant vector.
type sample struct {
	Labels map[string]string
	Value  float64
}

// query runs an instant PromQL query through the HTTP API.
func (p *promServer) query(q string) ([]sample, error) {
	resp, err := http.Get("http://" + p.addr + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status, Error string
		Data          struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", q, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: result type %s", q, body.Data.ResultType)
	}
	out := make([]sample, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v: %w", q, r.Value[1], err)
		}
		out = append(out, sample{r.Metric, v})
	}
	return out, nil
}

// scalar runs a query that must return exactly one sample.
func (p *promServer) scalar(q string) (float64, error) {
	s, err := p.query(q)
	if err != nil {
		return 0, err
	}
	if len(s) != 1 {
		return 0, fmt.Errorf("%s: %d samples, want 1: %v", q, len(s), s)
	}
	return s[0].Value, nil
}

// target returns the health and last scrape error of job's one target.
func (p *promServer) target(job string) (health, lastError string, err error) {
	resp, err := http.Get("http://" + p.addr + "/api/v1/targets?state=active")
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			ActiveTargets []struct {
				ScrapePool string `json:"scrapePool"`
				Health     string `json:"health"`
				LastError  string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", "", err
	}
	for _, tg := range body.Data.ActiveTargets {
		if tg.ScrapePool == job {
			return tg.Health, tg.LastError, nil
		}
	}
	return "", "", fmt.Errorf("no target of job %s", job)
}

// labelValues is what Grafana's label_values(match, label) lists: the values of label among
// the series match selects.
func (p *promServer) labelValues(label, match string) ([]string, error) {
	resp, err := http.Get("http://" + p.addr + "/api/v1/label/" + url.PathEscape(label) + "/values?" + url.Values{"match[]": {match}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status, Error string
		Data          []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("label_values(%s, %s): %w", match, label, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("label_values(%s, %s): %s", match, label, body.Error)
	}
	return body.Data, nil
}
