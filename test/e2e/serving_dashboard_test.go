package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// servingQuery is one query of a dashboard panel or an alert, as written in manifests/monitoring.
type servingQuery struct {
	where, expr string
}

// dashboardServingQueries returns every query of the Grafana dashboards of manifests/monitoring
// that reads vLLM's series (all of serving_dashboard.json; any serving panel of the operator's),
// and the dashboards' query variables as label_values(match, label) pairs.
func dashboardServingQueries(t *testing.T) (queries []servingQuery, variables [][2]string) {
	t.Helper()
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	for _, name := range []string{"grafana_dashboard.json", "serving_dashboard.json"} {
		b, err := os.ReadFile(filepath.Join(env.Root, "manifests", "monitoring", name))
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Templating struct {
				List []struct {
					Type       string `json:"type"`
					Definition string `json:"definition"`
				} `json:"list"`
			} `json:"templating"`
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		serving := false
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				if strings.Contains(tg.Expr, "vllm:") {
					queries = append(queries, servingQuery{name + ": " + p.Title, tg.Expr})
					serving = true
				}
			}
		}
		for _, v := range d.Templating.List {
			if m := labelValues.FindStringSubmatch(v.Definition); serving && v.Type == "query" && m != nil {
				variables = append(variables, [2]string{m[1], m[2]})
			}
		}
	}
	return queries, variables
}

// servingAlerts returns the alerts of rules.yaml that read vLLM's series.
func servingAlerts(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.Root, "manifests", "monitoring", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && strings.Contains(r.Expr, "vllm:") {
				out[r.Alert] = strings.TrimSpace(r.Expr)
			}
		}
	}
	return out
}

// servingLoad sends completions to each pod until stop: per round, four that finish and one
// streamed whose client hangs up after its first token (vLLM counts it finished_reason="abort").
type servingLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []string
}

func startServingLoad(t *testing.T, ips []string, model string) *servingLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &servingLoad{cancel: cancel}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
	post := func(ctx context.Context, ip, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+net.JoinHostPort(ip, fmt.Sprint(reconcile.Port))+"/v1/completions", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return c.Do(req)
	}
	fail := func(format string, a ...any) {
		if ctx.Err() == nil {
			l.mu.Lock()
			l.errs = append(l.errs, fmt.Sprintf(format, a...))
			l.mu.Unlock()
		}
	}
	for _, ip := range ips {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				for i := range 4 {
					resp, err := post(ctx, ip, fmt.Sprintf(`{"model":%q,"prompt":"Kubernetes operators reconcile what you declare, round %d","max_tokens":8}`, model, i))
					if err != nil {
						fail("completion on %s: %v", ip, err)
						continue
					}
					_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						fail("completion on %s: %s", ip, resp.Status)
					}
				}
				// The client gives up after the first token of a long answer.
				actx, acancel := context.WithCancel(ctx)
				resp, err := post(actx, ip, fmt.Sprintf(`{"model":%q,"prompt":"Tell a long story","max_tokens":200,"stream":true}`, model))
				if err == nil {
					line, rerr := bufio.NewReader(resp.Body).ReadString('\n')
					if rerr != nil || !strings.HasPrefix(line, "data: ") {
						fail("streamed completion on %s: %q %v", ip, line, rerr)
					}
					acancel()
					resp.Body.Close()
				} else {
					fail("streamed completion on %s: %v", ip, err)
				}
				acancel()
			}
		}()
	}
	return l
}

// stop ends the load and returns what failed.
func (l *servingLoad) stop() []string {
	l.cancel()
	l.wg.Wait()
	return l.errs
}

// TestServingQueriesOnPrometheus runs every query of the serving dashboard (and any serving
// panel of the operator's), its variables, and the serving alerts on a real Prometheus scraping
// a model's pods as the model's ServiceMonitor labels them, while clients send completions and
// some hang up: each query returns a value for the model, finite, under its namespace and its
// own label, and the error-rate alert is pending (one request in five sent is aborted).
func TestServingQueriesOnPrometheus(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const name, model = "serve", "Qwen/Qwen3-0.6B"
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: serve}
spec: {model: Qwen/Qwen3-0.6B, replicas: 2, gpusPerReplica: 1}
`)
	env.WaitPhase(t, ns, name, crd.PhaseReady, 90*time.Second)
	pods, err := readyModelPods(t, ns, name)
	if err != nil || len(pods) != 2 {
		t.Fatalf("%d ready pods of %s (%v), want 2", len(pods), name, err)
	}
	if got := prometheusLabelName("ai.example.com/inferenceservice"); got != reconcile.InstanceSeriesLabel {
		t.Fatalf("the model's label on its series is %s, the operator's queries use %s", got, reconcile.InstanceSeriesLabel)
	}
	rules, err := filepath.Abs(filepath.Join(env.Root, "manifests", "monitoring", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	prom := runPrometheus(t, t.TempDir(), map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files":     []any{rules},
		"scrape_configs": []any{modelScrapeJob(pods)},
	})
	var ips []string
	for _, p := range pods {
		ips = append(ips, p.Status.PodIP)
	}
	load := startServingLoad(t, ips, model)
	defer func() {
		if errs := load.stop(); len(errs) > 0 {
			t.Errorf("the clients' requests failed: %q", errs)
		}
	}()

	queries, variables := dashboardServingQueries(t)
	if len(queries) < 15 {
		t.Fatalf("%d serving queries in the dashboards, want at least 15", len(queries))
	}
	// Grafana's variables for this model; the rate window holds a minute of 1 s scrapes.
	vars := strings.NewReplacer("$namespace", ns, "$model", name, "$__rate_interval", "1m")
	alerts := servingAlerts(t)
	for _, a := range []string{"InferenceServiceSlowFirstToken", "InferenceServiceErrorRate"} {
		expr, ok := alerts[a]
		if !ok {
			t.Fatalf("rules.yaml has no alert %s on vLLM's series", a)
		}
		// What the alert compares with its threshold: the p95, the error share.
		i := strings.LastIndex(expr, ">")
		if i < 0 {
			t.Fatalf("%s: %s compares nothing", a, expr)
		}
		queries = append(queries, servingQuery{"rules.yaml: " + a + " (without its threshold)", strings.TrimSpace(expr[:i])})
	}
	// One request in five aborted: the error-rate alert's whole expression has data.
	queries = append(queries, servingQuery{"rules.yaml: InferenceServiceErrorRate", alerts["InferenceServiceErrorRate"]})

	for _, q := range queries {
		expr := vars.Replace(q.expr)
		testenv.Eventually(t, 2*time.Minute, q.where, func() error {
			s, err := prom.query(expr)
			if err != nil {
				return err
			}
			if len(s) == 0 {
				return fmt.Errorf("%s: %s returns nothing", q.where, expr)
			}
			for _, x := range s {
				if x.Labels["namespace"] != ns || x.Labels[reconcile.InstanceSeriesLabel] != name {
					return fmt.Errorf("%s: %s returns %v, not the model's series", q.where, expr, x.Labels)
				}
				if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
					return fmt.Errorf("%s: %s = %v", q.where, expr, x.Value)
				}
			}
			t.Logf("%s: %s = %v", q.where, expr, s[0].Value)
			return nil
		})
	}
	for _, v := range variables {
		match := vars.Replace(v[0])
		testenv.Eventually(t, 30*time.Second, "label_values("+match+", "+v[1]+")", func() error {
			got, err := prom.labelValues(v[1], match)
			if err != nil {
				return err
			}
			want := name
			if v[1] == "namespace" {
				want = ns
			}
			if !slices.Contains(got, want) {
				return fmt.Errorf("label_values(%s, %s) = %v, without %s", match, v[1], got, want)
			}
			t.Logf("label_values(%s, %s) = %v", match, v[1], got)
			return nil
		})
	}
	pending := `ALERTS{alertname="InferenceServiceErrorRate",namespace="` + ns + `",` + reconcile.InstanceSeriesLabel + `="` + name + `"}`
	testenv.Eventually(t, 30*time.Second, "the error-rate alert pending", func() error {
		s, err := prom.query(pending)
		if err != nil {
			return err
		}
		if len(s) != 1 || s[0].Labels["alertstate"] != "pending" {
			return fmt.Errorf("%s: %v, want one pending", pending, s)
		}
		t.Logf("%s: %v", pending, s[0].Labels)
		return nil
	})
}
