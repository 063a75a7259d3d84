// Package manifests holds no code: its test keeps the Helm chart (chart/inferenceservice-operator)
// and the kustomize manifests one source, by rendering both with the real tools (helm template,
// kubectl kustomize) and comparing them object by object.
package manifests

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/test/chart"
	"github.com/example/inferenceservice-operator/test/cluster"
)

const chartDir = "chart/inferenceservice-operator"

// helmLabels and helmAnnotations are what the chart adds on top of the kustomize manifests,
// and with the order of RBAC rules (which the API server ignores) the only differences the
// comparison forgives: the chart's labels on every object (Helm's, the appVersion and part-of;
// not in selectors or pod templates) and the keep policy on the CRD (crds.keep).
var (
	helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart",
		"app.kubernetes.io/version", "app.kubernetes.io/part-of"}
	helmAnnotations = []string{"helm.sh/resource-policy"}
)

// object is one rendered manifest, as generic JSON-compatible values.
type object = map[string]any

// helm is the helm CLI of test/helm ($HELM_BIN, or built now when unset) with scratch
// directories of its own.
func helm(t *testing.T) chart.Helm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := chart.Bin(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	return chart.Helm{Bin: bin, Home: t.TempDir()}
}

// kubectl is the kubectl of test/kubectl ($KUBECTL_BIN, or built now when unset), which renders
// the kustomizations as `kubectl apply -k` does.
func kubectl(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := cluster.KubectlPath(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runHelm runs helm in manifests/ and returns its stdout.
func runHelm(t *testing.T, h chart.Helm, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, _, err := h.Run(ctx, ".", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// run runs a command and returns its stdout, failing the test with stderr on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// parse splits a multi-document YAML stream into objects keyed kind/namespace/name.
func parse(t *testing.T, stream string) map[string]object {
	t.Helper()
	objs := map[string]object{}
	for _, doc := range strings.Split("\n"+stream, "\n---") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if o == nil {
			continue
		}
		k := key(o)
		if _, dup := objs[k]; dup {
			t.Fatalf("%s rendered twice", k)
		}
		objs[k] = o
	}
	return objs
}

func key(o object) string {
	meta, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v/%v", o["kind"], meta["namespace"], meta["name"])
}

// kustomize renders the given kustomization directories (relative to manifests/) together.
func kustomize(t *testing.T, dirs ...string) map[string]object {
	t.Helper()
	all := map[string]object{}
	for _, d := range dirs {
		for k, o := range parse(t, run(t, kubectl(t), "kustomize", d)) {
			all[k] = o
		}
	}
	return all
}

// helmTemplate renders the chart with the given --set/--set-json flags and strips what only
// Helm adds. The `helm test` hooks are left out: nothing in the manifests matches them
// (TestChartTestHook checks them).
func helmTemplate(t *testing.T, h chart.Helm, flags ...string) map[string]object {
	t.Helper()
	args := append([]string{"template", "isvc", chartDir, "--skip-tests", "--namespace", "inferenceservice-system"}, flags...)
	objs := parse(t, runHelm(t, h, args...))
	for _, o := range objs {
		meta := o["metadata"].(map[string]any)
		for field, drop := range map[string][]string{"labels": helmLabels, "annotations": helmAnnotations} {
			m, _ := meta[field].(map[string]any)
			for _, k := range drop {
				delete(m, k)
			}
			if m != nil && len(m) == 0 {
				delete(meta, field)
			}
		}
	}
	return objs
}

// sortRules puts a Role's or ClusterRole's rules in one order: the API server reads them as a
// set, and the chart derives the namespaced split from the base rules' order.
func sortRules(t *testing.T, o object) {
	t.Helper()
	if o["kind"] != "Role" && o["kind"] != "ClusterRole" {
		return
	}
	rules, _ := o["rules"].([]any)
	keyOf := func(r any) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	slices.SortStableFunc(rules, func(a, b any) int { return strings.Compare(keyOf(a), keyOf(b)) })
}

// compare fails with every object only one side has and a diff of each one that differs.
func compare(t *testing.T, what string, chart, want map[string]object) {
	t.Helper()
	for _, objs := range []map[string]object{chart, want} {
		for _, o := range objs {
			sortRules(t, o)
		}
	}
	var problems []string
	keys := map[string]bool{}
	for k := range chart {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		c, inChart := chart[k]
		w, inWant := want[k]
		switch {
		case !inChart:
			problems = append(problems, "missing from the chart: "+k)
		case !inWant:
			problems = append(problems, "only in the chart: "+k)
		case !reflect.DeepEqual(c, w):
			problems = append(problems, fmt.Sprintf("%s differs (- kustomize, + chart):\n%s", k, diff.Diff(w, c)))
		}
	}
	if len(problems) > 0 {
		t.Errorf("%s: the chart drifted from the manifests:\n%s", what, strings.Join(problems, "\n"))
	}
}

// container returns the named Deployment's first container from objs.
func container(t *testing.T, objs map[string]object, deployment string) map[string]any {
	t.Helper()
	d, ok := objs["Deployment inferenceservice-system/"+deployment]
	if !ok {
		t.Fatalf("no Deployment %s", deployment)
	}
	spec := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	return spec["containers"].([]any)[0].(map[string]any)
}

func appendArgs(c map[string]any, args ...string) {
	for _, a := range args {
		c["args"] = append(c["args"].([]any), a)
	}
}

// setArg replaces the argument that starts with prefix by arg; it fails when none does.
func setArg(c map[string]any, prefix, arg string) {
	args := c["args"].([]any)
	for i, a := range args {
		if strings.HasPrefix(a.(string), prefix) {
			args[i] = arg
			return
		}
	}
	panic("no argument " + prefix)
}

// TestChartMatchesManifests: the chart with default values renders exactly what
// `kubectl kustomize manifests/` renders, and each values combination docs/operations.md documents
// renders exactly its overlay, or, where there is none, the base with the documented change.
func TestChartMatchesManifests(t *testing.T) {
	h := helm(t)
	for _, tc := range []struct {
		name   string
		values []string
		// want is the kustomize render to match, from dirs, then changed by edit if set.
		dirs []string
		edit func(t *testing.T, objs map[string]object)
	}{
		{name: "defaults", dirs: []string{"."}},
		{name: "metrics insecure", values: []string{"--set", "metrics.secure=false"}, dirs: []string{"overlays/metrics-insecure"}},
		{name: "namespaced", values: []string{"--set-json", `watchNamespaces=["team-a","team-b"]`, "--set", "autoscaling.metricSource=none"},
			dirs: []string{"overlays/namespaced"}},
		{name: "v1alpha1 only (the rollback)", values: []string{"--set", "conversionWebhook.enabled=false"}, dirs: []string{"overlays/v1alpha1"}},
		{name: "prometheus-adapter", values: []string{"--set", "autoscaling.metricSource=prometheus-adapter"}, dirs: []string{"overlays/prometheus-adapter"}},
		{name: "keda", values: []string{"--set", "autoscaling.metricSource=keda"}, dirs: []string{"overlays/keda"}},
		{name: "cert-manager", values: []string{"--set", "metricsAdapter.certManager=true"}, dirs: []string{"overlays/cert-manager"}},
		{name: "monitoring", values: []string{"--set", "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true,metrics.readerBinding.enabled=true"},
			dirs: []string{".", "monitoring"}},
		{name: "monitoring insecure", values: []string{"--set", "metrics.secure=false,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true,metrics.readerBinding.enabled=true"},
			dirs: []string{"overlays/metrics-insecure", "overlays/metrics-insecure/monitoring"}},
		{name: "gateway", values: []string{"--set", "gateway.url=http://gateway-admin.gateway-system.svc:9000,gateway.deregisterTimeout=10m,gateway.parent=gateway-system/inference"},
			dirs: []string{"."}, edit: func(t *testing.T, objs map[string]object) {
				appendArgs(container(t, objs, "inferenceservice-operator"),
					"--gateway-url=http://gateway-admin.gateway-system.svc:9000", "--gateway-deregister-timeout=10m", "--gateway-parent=gateway-system/inference")
			}},
		{name: "network policies", values: []string{"--set", "networkPolicies.gateway=gateway-system:app=envoy,networkPolicies.peers=monitoring:app.kubernetes.io/name=prometheus"},
			dirs: []string{"."}, edit: func(t *testing.T, objs map[string]object) {
				appendArgs(container(t, objs, "inferenceservice-operator"),
					"--network-policy-gateway=gateway-system:app=envoy", "--network-policy-peers=monitoring:app.kubernetes.io/name=prometheus")
			}},
		{name: "no network policies", values: []string{"--set", "networkPolicies.enabled=false"},
			dirs: []string{"."}, edit: func(t *testing.T, objs map[string]object) {
				appendArgs(container(t, objs, "inferenceservice-operator"), "--network-policies=false")
			}},
		{name: "inference-pool", values: []string{"--set", "gateway.parent=gateway-system/inference-gateway,gateway.inferencePool=auto"}, dirs: []string{"overlays/inference-pool"}},
		{name: "operator-guard", values: []string{"--set", "operatorGuard.enabled=true"}, dirs: []string{"overlays/operator-guard"}},
		{name: "image, resources and soft memory limit",
			values: []string{"--set", "image.repository=registry.example.com/isvc-operator,image.tag=v0.1.0,operator.resources.limits.memory=1Gi,operator.goMemLimit=900MiB,operator.gogc=50"},
			dirs:   []string{"."}, edit: func(t *testing.T, objs map[string]object) {
				c := container(t, objs, "inferenceservice-operator")
				c["image"] = "registry.example.com/isvc-operator:v0.1.0"
				container(t, objs, "inferenceservice-metrics-adapter")["image"] = "registry.example.com/isvc-operator:v0.1.0"
				container(t, objs, "inferenceservice-activator")["image"] = "registry.example.com/isvc-operator:v0.1.0"
				c["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "1Gi"
				env := c["env"].([]any)
				env[0].(map[string]any)["value"] = "50"
				c["env"] = append(env, map[string]any{"name": "GOMEMLIMIT", "value": "900MiB"})
			}},
		{name: "one replica without leader election", values: []string{"--set", "operator.replicas=1,operator.leaderElection=false"},
			dirs: []string{"."}, edit: func(t *testing.T, objs map[string]object) {
				objs["Deployment inferenceservice-system/inferenceservice-operator"]["spec"].(map[string]any)["replicas"] = float64(1)
				c := container(t, objs, "inferenceservice-operator")
				c["args"] = slices.DeleteFunc(c["args"].([]any), func(a any) bool { return a == "--leader-elect" })
				delete(objs, "PodDisruptionBudget inferenceservice-system/inferenceservice-operator")
			}},
		{name: "activator bounds, one replica", values: []string{"--set", "activator.replicas=1,activator.maxHeld=20,activator.maxWait=90s"},
			dirs: []string{"."}, edit: func(t *testing.T, objs map[string]object) {
				objs["Deployment inferenceservice-system/inferenceservice-activator"]["spec"].(map[string]any)["replicas"] = float64(1)
				c := container(t, objs, "inferenceservice-activator")
				for i, a := range c["args"].([]any) {
					switch a {
					case "--max-held=100":
						c["args"].([]any)[i] = "--max-held=20"
					case "--max-wait=3m":
						c["args"].([]any)[i] = "--max-wait=90s"
					}
				}
				delete(objs, "PodDisruptionBudget inferenceservice-system/inferenceservice-activator")
			}},
		{name: "CRD owned elsewhere", values: []string{"--set", "crds.install=false"},
			dirs: []string{"."}, edit: func(t *testing.T, objs map[string]object) {
				delete(objs, "CustomResourceDefinition <nil>/inferenceservices.ai.example.com")
			}},
		{name: "tenant routes policy off", values: []string{"--set", "tenantRoutes.enabled=false"},
			dirs: []string{"."}, edit: func(t *testing.T, objs map[string]object) {
				delete(objs, "ValidatingAdmissionPolicy <nil>/inferenceservice-tenant-routes")
				delete(objs, "ValidatingAdmissionPolicyBinding <nil>/inferenceservice-tenant-routes")
			}},
		{name: "activator off", values: []string{"--set", "activator.enabled=false"},
			dirs: []string{"."}, edit: func(t *testing.T, objs map[string]object) {
				for k := range objs {
					if strings.HasSuffix(k, "/inferenceservice-activator") || strings.HasSuffix(k, "/inferenceservice-activator-metrics") {
						delete(objs, k)
					}
				}
				setArg(container(t, objs, "inferenceservice-operator"), "--activator-service=", "--activator-service=")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := kustomize(t, tc.dirs...)
			// The release's namespace is Helm's (helm install -n NAME --create-namespace), not
			// the chart's; kustomize makes it (manifests/rbac/namespace.yaml).
			delete(want, "Namespace <nil>/inferenceservice-system")
			if tc.edit != nil {
				tc.edit(t, want)
			}
			compare(t, strings.TrimSpace(tc.name+" "+strings.Join(tc.values, " ")), helmTemplate(t, h, tc.values...), want)
		})
	}
}

// TestChartLint: helm lint finds nothing to warn about, with the defaults and with every
// optional part on.
func TestChartLint(t *testing.T) {
	h := helm(t)
	for _, values := range [][]string{nil, {"--set", "conversionWebhook.enabled=true,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true,metrics.readerBinding.enabled=true,autoscaling.metricSource=keda,metricsAdapter.certManager=true", "--set-json", `watchNamespaces=["a"]`}} {
		out := runHelm(t, h, append([]string{"lint", "--strict", chartDir}, values...)...)
		if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") || !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm lint %v:\n%s", values, out)
		}
	}
}

// TestChartReleaseNamespace: installed with helm install -n my-ns, every part of the chart is
// in the release's namespace and every address names it: the operator's activator (or none
// when the activator is off, so the operator says so on models at zero instead of routing them
// at nothing), the RBAC subjects, the conversion webhook's and the metrics adapter's Services
// and certificates; nothing names the default namespace inferenceservice-system.
func TestChartReleaseNamespace(t *testing.T) {
	h := helm(t)
	const ns = "my-ns"
	for _, tc := range []struct {
		name      string
		values    []string
		activator string
	}{
		{name: "defaults", activator: "--activator-service=my-ns/inferenceservice-activator:80"},
		{name: "activator off", values: []string{"--set", "activator.enabled=false"}, activator: "--activator-service="},
		{name: "every part", values: []string{"--set", "conversionWebhook.enabled=true,metricsAdapter.certManager=true,operatorGuard.enabled=true,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true"},
			activator: "--activator-service=my-ns/inferenceservice-activator:80"},
		{name: "namespaced", values: []string{"--set-json", `watchNamespaces=["team-a"]`}, activator: "--activator-service=my-ns/inferenceservice-activator:80"},
		{name: "activator off, monitored", values: []string{"--set", "activator.enabled=false,metrics.serviceMonitor.enabled=true"}, activator: "--activator-service="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runHelm(t, h, append([]string{"template", "isvc", chartDir, "--namespace", ns}, tc.values...)...)
			if strings.Contains(out, "inferenceservice-system") {
				var lines []string
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, "inferenceservice-system") {
						lines = append(lines, strings.TrimSpace(l))
					}
				}
				t.Errorf("rendered in %s, the chart still names inferenceservice-system:\n%s", ns, strings.Join(lines, "\n"))
			}
			objs := parse(t, out)
			// Elsewhere only: what reads the API server's own configuration, and the
			// watched namespaces' Roles.
			elsewhere := map[string]bool{"kube-system": true, "team-a": true, "<nil>": true}
			for k, o := range objs {
				meta := o["metadata"].(map[string]any)
				if o["kind"] == "Namespace" {
					t.Errorf("%s: the chart makes a namespace; the release's is helm's (--create-namespace)", k)
				}
				if n := fmt.Sprint(meta["namespace"]); n != ns && !elsewhere[n] {
					t.Errorf("%s: not in the release's namespace %s", k, ns)
				}
				subjects, _ := o["subjects"].([]any)
				for _, s := range subjects {
					s := s.(map[string]any)
					if s["kind"] == "ServiceAccount" && s["namespace"] != ns {
						t.Errorf("%s: subject %v, want the ServiceAccount in %s", k, s, ns)
					}
				}
			}
			op, ok := objs["Deployment "+ns+"/inferenceservice-operator"]
			if !ok {
				t.Fatalf("no operator Deployment in %s: %v", ns, slices.Sorted(maps.Keys(objs)))
			}
			c := op["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			args := toStrings(c["args"])
			var got []string
			for _, a := range args {
				if strings.HasPrefix(a, "--activator-service") || strings.HasPrefix(a, "--network-policy-install-namespace") {
					got = append(got, a)
				}
			}
			if want := []string{tc.activator, "--network-policy-install-namespace=" + ns}; !slices.Equal(got, want) {
				t.Errorf("operator args %v, want %v", got, want)
			}
			// The activator's Service, and its ServiceMonitor where they are on, only with it.
			on := tc.activator != "--activator-service="
			monitored := tc.name == "every part" || strings.HasSuffix(tc.name, "monitored")
			for k, want := range map[string]bool{
				"Service " + ns + "/inferenceservice-activator":        on,
				"ServiceMonitor " + ns + "/inferenceservice-activator": on && monitored,
				"ServiceMonitor " + ns + "/inferenceservice-operator":  monitored,
			} {
				if _, rendered := objs[k]; rendered != want {
					t.Errorf("%s rendered %v, want %v", k, rendered, want)
				}
			}
			if tc.name == "every part" {
				for _, name := range []string{"inferenceservice-operator", "inferenceservice-activator", "inferenceservice-metrics-adapter"} {
					sm, ok := objs["ServiceMonitor "+ns+"/"+name]
					if !ok {
						t.Errorf("no ServiceMonitor %s in %s", name, ns)
						continue
					}
					if sel := fmt.Sprint(sm["spec"].(map[string]any)["namespaceSelector"]); sel != "map[matchNames:["+ns+"]]" {
						t.Errorf("ServiceMonitor %s selects %s, want the release's namespace", name, sel)
					}
				}
			}
			if crd, ok := objs["CustomResourceDefinition <nil>/inferenceservices.ai.example.com"]; ok && tc.name == "every part" {
				svc := crd["spec"].(map[string]any)["conversion"].(map[string]any)["webhook"].(map[string]any)["clientConfig"].(map[string]any)["service"].(map[string]any)
				if svc["namespace"] != ns || svc["name"] != "inferenceservice-operator-webhook" {
					t.Errorf("conversion webhook Service %v, want inferenceservice-operator-webhook in %s", svc, ns)
				}
				if _, ok := objs["Service "+ns+"/inferenceservice-operator-webhook"]; !ok {
					t.Errorf("no webhook Service in %s", ns)
				}
			}
		})
	}
}
