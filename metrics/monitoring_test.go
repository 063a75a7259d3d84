package metrics

// Tests of manifests/monitoring: the rule files pass promtool's check and unit tests, the
// PrometheusRule carries exactly rules.yaml, every metric of the operator the rules and its
// dashboard query is one this package exports, and the serving dashboard's queries (vLLM's
// series, proven on a real scrape by test/e2e's TestServingQueriesOnPrometheus) parse and are
// per model.

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
	"unicode"

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

// The Grafana dashboards of manifests/monitoring: the operator's own, and the serving dashboard,
// which reads vLLM's series on the model pods.
const (
	operatorDashboard = "grafana_dashboard.json"
	servingDashboard  = "serving_dashboard.json"
)

// dashboardPanel is what the tests read of a dashboard panel.
type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// dashboardPanels returns the panels of a Grafana dashboard of manifests/monitoring.
func dashboardPanels(t *testing.T, name string) []dashboardPanel {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d.Panels
}

// dashboardExprs returns every query of a Grafana dashboard; it fails below min.
func dashboardExprs(t *testing.T, name string, min int) []string {
	t.Helper()
	var out []string
	for _, p := range dashboardPanels(t, name) {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	if len(out) < min {
		t.Fatalf("%s has %d queries, want at least %d", name, len(out), min)
	}
	return out
}

// dashboardVars replaces Grafana's variables of both dashboards with what selects everything.
var dashboardVars = strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$namespace", ".*", "$model", ".*")

// TestDashboardQueriesParse has promtool parse every query of both dashboards, Grafana's
// variables replaced, as recording rules.
func TestDashboardQueriesParse(t *testing.T) {
	promtool(t)
	var b strings.Builder
	b.WriteString("groups:\n- name: dashboard\n  rules:\n")
	exprs := append(dashboardExprs(t, operatorDashboard, 20), dashboardExprs(t, servingDashboard, 10)...)
	for i, e := range exprs {
		q, _ := json.Marshal(dashboardVars.Replace(e))
		fmt.Fprintf(&b, "  - record: dashboard_query_%d\n    expr: %s\n", i, q)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard_rules.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, dir, "check", "rules", "dashboard_rules.yaml")
}

// modelSeriesLabel is the model's own label on its pods' series, as the model's ServiceMonitor
// (podTargetLabels) and pod discovery name ai.example.com/inferenceservice; the operator's KEDA
// query selects by the same name (reconcile.InstanceSeriesLabel, which this package may not
// import: the e2e test runs every serving query on a real scrape).
const modelSeriesLabel = "ai_example_com_inferenceservice"

// TestServingDashboardIsPerModel: every query of the serving dashboard reads vLLM's series and
// SGLang's, selects by both the namespace and the model variables, and keeps the two labels,
// so each line is one model's and the dashboard shows only what is chosen.
func TestServingDashboardIsPerModel(t *testing.T) {
	sel := `namespace=~"$namespace",` + modelSeriesLabel + `=~"$model"`
	by := "(namespace, " + modelSeriesLabel
	for _, p := range dashboardPanels(t, servingDashboard) {
		for _, tg := range p.Targets {
			e := tg.Expr
			if !strings.Contains(e, "vllm:") || !strings.Contains(e, "sglang:") || !strings.Contains(e, by) {
				t.Errorf("%s: %s does not keep namespace and %s of vLLM's and SGLang's series", p.Title, e, modelSeriesLabel)
			}
			for _, m := range selectorRE.FindAllString(e, -1) {
				if !strings.HasPrefix(m, "{"+sel) {
					t.Errorf("%s: the selector %s of %s does not select the namespace and the model", p.Title, m, e)
				}
			}
		}
	}
}

// engineSeriesRE matches a model server's series name in a query.
var engineSeriesRE = regexp.MustCompile(`\b(?:vllm|sglang):[a-z0-9_]+\b`)

// TestServingDashboardShowsEveryEngine evaluates every query of the serving dashboard with
// promtool over two models' pods, a vLLM one (team/v, vllm:* series) and an SGLang one
// (team/s, sglang:* series), every series a query names served with the labels the model's
// ServiceMonitor gives it: each panel must draw a line for both models.
func TestServingDashboardShowsEveryEngine(t *testing.T) {
	promtool(t)
	var exprs []string
	for _, p := range dashboardPanels(t, servingDashboard) {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	names := map[string]bool{}
	for _, e := range exprs {
		for _, n := range engineSeriesRE.FindAllString(e, -1) {
			names[n] = true
		}
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)

	var rules, tests strings.Builder
	rules.WriteString("groups:\n- name: dashboard\n  rules:\n")
	tests.WriteString("rule_files: [dashboard_rules.yaml]\nevaluation_interval: 1m\ntests:\n- interval: 1m\n  input_series:\n")
	for _, n := range sorted {
		model := "v"
		if strings.HasPrefix(n, "sglang:") {
			model = "s"
		}
		labels := `job="m",namespace="team",pod="` + model + `-0",` + modelSeriesLabel + `="` + model + `",model_name="m"`
		series := func(extra, values string) {
			fmt.Fprintf(&tests, "  - series: '%s{%s%s}'\n    values: '%s'\n", n, labels, extra, values)
		}
		switch {
		case strings.HasSuffix(n, "_bucket"):
			series(`,le="1.0"`, "0+8x20")
			series(`,le="+Inf"`, "0+10x20")
		case n == "vllm:request_success_total":
			series(`,finished_reason="stop"`, "0+9x20")
			series(`,finished_reason="abort"`, "0+1x20")
		case strings.HasSuffix(n, "_total"):
			series("", "0+10x20")
		default: // a gauge
			series("", "3x20")
		}
	}
	tests.WriteString("  promql_expr_test:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(dashboardVars.Replace(e))
		fmt.Fprintf(&rules, "  - record: dashboard_query_%d\n    expr: %s\n", i, q)
		fmt.Fprintf(&tests, "  - expr: group by (%[1]s) (dashboard_query_%[2]d)\n    eval_time: 10m\n    exp_samples:\n", modelSeriesLabel, i)
		for _, m := range []string{"s", "v"} {
			fmt.Fprintf(&tests, "    - labels: '{%s=\"%s\"}'\n      value: 1\n", modelSeriesLabel, m)
		}
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"dashboard_rules.yaml": rules.String(), "dashboard_test.yaml": tests.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(promtool(t), "test", "rules", "dashboard_test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		var which strings.Builder
		for i, e := range exprs {
			fmt.Fprintf(&which, "dashboard_query_%d: %s\n", i, e)
		}
		t.Fatalf("a panel draws no line for one engine's model: %v\n%s\n%s", err, out, which.String())
	}
}

// selectorRE matches a PromQL label selector.
var selectorRE = regexp.MustCompile(`\{[^}]*\}`)

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
	exprs = append(exprs, dashboardExprs(t, operatorDashboard, 20)...)
	missing := map[string]bool{}
	for _, e := range exprs {
		for _, rec := range recordingRE.FindAllString(e, -1) {
			if !recorded[rec] {
				missing[rec] = true
			}
		}
		for _, name := range metricRE.FindAllString(recordingRE.ReplaceAllString(e, ""), -1) {
			// The metrics adapter's own series: test/docs' TestAlertsReadRegisteredSeries checks those.
			if !exported[name] && !strings.HasPrefix(name, "inferenceservice_metrics_adapter_") {
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

// runbookBase is where the alerts' runbook_url point: the troubleshooting page on the default
// branch.
const runbookBase = "https://github.com/example/inferenceservice-operator/blob/main/docs/troubleshooting.md#"

// TestRunbookURLsLeadToSections: each alert's runbook_url names a heading of
// docs/troubleshooting.md (GitHub's anchor of it), so a renamed section cannot leave a page's
// link pointing nowhere; every alert has one.
func TestRunbookURLsLeadToSections(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(monitoringDir, "../../docs/troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			anchors[githubAnchor(h)] = true
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	readYAML(t, "rules.yaml", &rules)
	with := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			u, ok := r.Annotations["runbook_url"]
			if !ok {
				continue
			}
			with[r.Alert] = true
			anchor, ok := strings.CutPrefix(u, runbookBase)
			if !ok || !anchors[anchor] {
				t.Errorf("%s: runbook_url %s is not a section of docs/troubleshooting.md", r.Alert, u)
			}
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !with[r.Alert] {
				t.Errorf("%s has no runbook_url", r.Alert)
			}
		}
	}
}

// githubAnchor is the fragment GitHub gives a heading: lower case, spaces to hyphens, and
// everything but letters, digits, hyphens and underscores dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
