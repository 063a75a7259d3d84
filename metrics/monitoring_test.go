package metrics

// Tests of manifests/monitoring: the rule files pass promtool's check and unit tests, the
// PrometheusRule carries exactly rules.yaml, and every metric the rules and the dashboard
// query is one this package exports.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const monitoringDir = "../manifests/monitoring"

// promtool returns promtool's path; without it the rule tests skip (CI installs it: .ci/run).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH: apt-get install -y prometheus (Debian) to run the rule tests; CI installs it")
	}
	return p
}

func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestRulesPromtool(t *testing.T) {
	t.Log(runPromtool(t, monitoringDir, "check", "rules", "rules.yaml"))
	t.Log(runPromtool(t, monitoringDir, "test", "rules", "rules_test.yaml"))
}

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Record string `json:"record"`
			Alert  string `json:"alert"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

func readYAML(t *testing.T, name string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	var plain map[string]any
	var cr struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	readYAML(t, "rules.yaml", &plain)
	readYAML(t, "prometheus_rule.yaml", &cr)
	if cr.Kind != "PrometheusRule" || !reflect.DeepEqual(plain, cr.Spec) {
		t.Fatal("prometheus_rule.yaml's spec differs from rules.yaml: copy rules.yaml's groups under spec")
	}
}

// dashboardExprs returns every query of the Grafana dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir, "grafana_dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	if len(out) < 20 {
		t.Fatalf("dashboard has %d queries", len(out))
	}
	return out
}

// TestDashboardQueriesParse has promtool parse every dashboard query, Grafana's variables
// replaced, as recording rules.
func TestDashboardQueriesParse(t *testing.T) {
	promtool(t)
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$namespace", ".*")
	var b strings.Builder
	b.WriteString("groups:\n- name: dashboard\n  rules:\n")
	for i, e := range dashboardExprs(t) {
		q, _ := json.Marshal(vars.Replace(e))
		fmt.Fprintf(&b, "  - record: dashboard_query_%d\n    expr: %s\n", i, q)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard_rules.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, dir, "check", "rules", "dashboard_rules.yaml")
}

var (
	metricRE    = regexp.MustCompile(`\b(?:inferenceservice|controller_runtime|workqueue|rest_client|leader_election)_[a-z_]+\b`)
	recordingRE = regexp.MustCompile(`\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b`)
)

// TestMonitoringUsesExportedMetrics catches a renamed metric that would leave a panel or an
// alert silently empty.
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	reg, _ := fullRegistry(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[mf.GetName()+s] = true
			}
		}
	}
	var rules ruleGroups
	readYAML(t, "rules.yaml", &rules)
	recorded := map[string]bool{}
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
			exprs = append(exprs, r.Expr)
		}
	}
	exprs = append(exprs, dashboardExprs(t)...)
	missing := map[string]bool{}
	for _, e := range exprs {
		for _, rec := range recordingRE.FindAllString(e, -1) {
			if !recorded[rec] {
				missing[rec] = true
			}
		}
		for _, name := range metricRE.FindAllString(recordingRE.ReplaceAllString(e, ""), -1) {
			if !exported[name] {
				missing[name] = true
			}
		}
	}
	if len(missing) > 0 {
		var names []string
		for n := range missing {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Fatalf("rules or dashboard query metrics nobody exports: %v", names)
	}
}

// TestScrapersMatchTheInstall: the ServiceMonitor scrapes the metrics Service's port, and it,
// the plain scrape config and the pod annotations use HTTPS with a token exactly when the
// Deployment passes --metrics-secure (the default install), so no scraper sends its token in
// clear or talks plain HTTP to a TLS port.
func TestScrapersMatchTheInstall(t *testing.T) {
	var deploy struct {
		Spec struct {
			Template struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
				Spec struct {
					Containers []struct {
						Args  []string `json:"args"`
						Ports []struct {
							Name          string `json:"name"`
							ContainerPort int    `json:"containerPort"`
						} `json:"ports"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	var svc struct {
		Spec struct {
			Ports []struct {
				Name       string `json:"name"`
				TargetPort string `json:"targetPort"`
			} `json:"ports"`
		} `json:"spec"`
	}
	var sm struct {
		Spec struct {
			Endpoints []map[string]any `json:"endpoints"`
		} `json:"spec"`
	}
	var scrape struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	readYAML(t, "../operator/deployment.yaml", &deploy)
	readYAML(t, "../operator/metrics_service.yaml", &svc)
	readYAML(t, "servicemonitor.yaml", &sm)
	readYAML(t, "prometheus_scrape_config.yaml", &scrape)
	c := deploy.Spec.Template.Spec.Containers[0]
	secure := false
	for _, a := range c.Args {
		secure = secure || a == "--metrics-secure"
	}
	if !secure {
		t.Fatal("manifests/operator/deployment.yaml does not pass --metrics-secure: the default install must serve /metrics securely")
	}
	ann := deploy.Spec.Template.Metadata.Annotations
	ep := sm.Spec.Endpoints[0]
	job := scrape.ScrapeConfigs[0]
	auth, _ := job["authorization"].(map[string]any)
	for what, ok := range map[string]bool{
		"the Service's port is the container's metrics port": len(svc.Spec.Ports) == 1 && len(c.Ports) > 0 && svc.Spec.Ports[0].TargetPort == c.Ports[0].Name,
		"the ServiceMonitor scrapes the Service's port":      ep["port"] == svc.Spec.Ports[0].Name,
		"the ServiceMonitor: https, a token, TLS settings":   ep["scheme"] == "https" && ep["bearerTokenFile"] != nil && ep["tlsConfig"] != nil,
		"the scrape config: https, a token, TLS settings":    job["scheme"] == "https" && auth["credentials_file"] != nil && job["tls_config"] != nil,
		"annotations: scheme https, the metrics port":        ann["prometheus.io/scheme"] == "https" && ann["prometheus.io/port"] == fmt.Sprint(c.Ports[0].ContainerPort),
	} {
		if !ok {
			t.Errorf("not %s", what)
		}
	}
}
