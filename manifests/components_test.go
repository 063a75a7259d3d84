package manifests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// components are manifests/components but v1beta1 (the default install's API, in every render
// here as in manifests/: TestDefaultInstallServesV1beta1), each with the chart values that install the same
// feature (TestChartMatchesManifests proves each alone against its overlay) and the effect a
// render holding it must show, whatever it is combined with.
var components = []struct {
	name   string
	values map[string]string // --set key=value; watchNamespaces is --set-json
	effect func(objs map[string]object) error
}{
	{name: "keda", values: map[string]string{"autoscaling.metricSource": "keda"}, effect: func(objs map[string]object) error {
		if !slices.Contains(args(objs, "inferenceservice-operator"), "--autoscaler=keda") {
			return fmt.Errorf("operator args %v: no --autoscaler=keda", args(objs, "inferenceservice-operator"))
		}
		// Its rules join the base's aggregated role (bound cluster-wide, or per watched namespace).
		keda := objs["ClusterRole <nil>/inferenceservice-operator-keda"]
		if keda == nil || !strings.Contains(fmt.Sprint(roleRules(objs, objs["ClusterRole <nil>/inferenceservice-operator-extensions"])), "scaledobjects") {
			return fmt.Errorf("no ScaledObject rules in inferenceservice-operator-extensions (keda's role %v)", keda)
		}
		return noAdapter(objs)
	}},
	{name: "metrics-insecure", values: map[string]string{"metrics.secure": "false"}, effect: func(objs map[string]object) error {
		ports := objs["Service inferenceservice-system/inferenceservice-operator-metrics"]["spec"].(map[string]any)["ports"]
		if a := args(objs, "inferenceservice-operator"); slices.Contains(a, "--metrics-secure") || fmt.Sprint(ports) != "[map[name:http port:8080 targetPort:http]]" {
			return fmt.Errorf("operator args %v, metrics Service ports %v: want plain HTTP on 8080", a, ports)
		}
		return nil
	}},
	{name: "namespaced", values: map[string]string{"watchNamespaces": `["team-a","team-b"]`}, effect: func(objs map[string]object) error {
		for _, d := range []string{"inferenceservice-operator", "inferenceservice-activator"} {
			if !slices.Contains(args(objs, d), "--namespaces=team-a,team-b") {
				return fmt.Errorf("%s args %v: no --namespaces", d, args(objs, d))
			}
		}
		if r := fmt.Sprint(objs["ClusterRole <nil>/inferenceservice-operator"]["rules"]); strings.Contains(r, "deployments") {
			return fmt.Errorf("the operator's ClusterRole still grants namespaced resources: %s", r)
		}
		if _, ok := objs["ClusterRole <nil>/inferenceservice-activator"]; ok {
			return fmt.Errorf("the activator's ClusterRole is still there")
		}
		if err := has(objs, "Role team-a/inferenceservice-operator", "Role team-b/inferenceservice-operator", "RoleBinding team-b/inferenceservice-activator"); err != nil {
			return err
		}
		// Whatever other components add (keda's ScaledObjects), the operator holds nothing
		// namespaced outside the watched namespaces; but v1beta1's storage migration, which
		// must rewrite every stored InferenceService, in every namespace, for the CRD's
		// storedVersions to be true.
		for _, r := range clusterWideRules(objs, "inferenceservice-system", "inferenceservice-operator") {
			m := r.(map[string]any)
			migration := fmt.Sprint(toStrings(m["resources"]), toStrings(m["verbs"])) == "[inferenceservices] [update]"
			if !clusterScoped(r) && !migration {
				return fmt.Errorf("the operator's ServiceAccount holds %v in every namespace", r)
			}
		}
		return noAdapter(objs)
	}},
	{name: "prometheus-adapter", values: map[string]string{"autoscaling.metricSource": "prometheus-adapter"}, effect: func(objs map[string]object) error {
		if err := has(objs, "ConfigMap monitoring/prometheus-adapter-vllm-rules"); err != nil {
			return err
		}
		return noAdapter(objs)
	}},
	{name: "cert-manager", values: map[string]string{"metricsAdapter.certManager": "true"}, effect: func(objs map[string]object) error {
		if !slices.Contains(args(objs, "inferenceservice-metrics-adapter"), "--issue-serving-cert=false") {
			return fmt.Errorf("adapter args %v: it still issues its certificate", args(objs, "inferenceservice-metrics-adapter"))
		}
		return has(objs, "Certificate inferenceservice-system/inferenceservice-metrics-adapter")
	}},
	{name: "inference-pool", values: map[string]string{"gateway.parent": "gateway-system/inference-gateway", "gateway.inferencePool": "auto"}, effect: func(objs map[string]object) error {
		if a := args(objs, "inferenceservice-operator"); !slices.Contains(a, "--inference-pool=auto") || !slices.Contains(a, "--gateway-parent=gateway-system/inference-gateway") {
			return fmt.Errorf("operator args %v: no pool route flags", a)
		}
		return nil
	}},
	{name: "operator-guard", values: map[string]string{"operatorGuard.enabled": "true"}, effect: func(objs map[string]object) error {
		return has(objs, "ValidatingAdmissionPolicy <nil>/inferenceservice-operator-guard", "ValidatingAdmissionPolicyBinding <nil>/inferenceservice-operator-guard")
	}},
}

// TestDefaultInstallServesV1beta1: manifests/ and the chart's defaults serve v1alpha1 and v1beta1,
// store v1beta1 and convert through the operator's webhook on every replica, with the migration's
// RBAC; overlays/v1alpha1 (the rollback) serves v1alpha1 alone, with none of it.
func TestDefaultInstallServesV1beta1(t *testing.T) {
	crdKey := "CustomResourceDefinition <nil>/inferenceservices.ai.example.com"
	for name, objs := range map[string]map[string]object{"manifests/": kustomize(t, "."), "the chart": helmTemplate(t, helm(t))} {
		spec, _ := objs[crdKey]["spec"].(map[string]any)
		var served []string
		for _, v := range spec["versions"].([]any) {
			if v.(map[string]any)["served"] == true {
				served = append(served, fmt.Sprint(v.(map[string]any)["name"]))
			}
		}
		conv, _ := spec["conversion"].(map[string]any)
		if fmt.Sprint(conv["strategy"]) != "Webhook" || storageVersion(spec) != "v1beta1" || fmt.Sprint(served) != "[v1alpha1 v1beta1]" {
			t.Errorf("%s: CRD conversion %v, storage %s, served %v: want the webhook, v1beta1 stored, both served", name, spec["conversion"], storageVersion(spec), served)
		}
		if err := has(objs, "Service inferenceservice-system/inferenceservice-operator-webhook", "ClusterRole <nil>/inferenceservice-operator-storage-migration"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if a := args(objs, "inferenceservice-operator"); !slices.Contains(a, "--webhook-bind-address=:9443") {
			t.Errorf("%s: operator args %v: no webhook", name, a)
		}
	}
	objs := kustomize(t, "overlays/v1alpha1")
	spec, _ := objs[crdKey]["spec"].(map[string]any)
	if c, _ := spec["conversion"].(map[string]any); (c != nil && c["strategy"] != "None") || storageVersion(spec) != "v1alpha1" || len(spec["versions"].([]any)) != 1 {
		t.Errorf("overlays/v1alpha1: CRD conversion %v, storage %s, %d versions: want v1alpha1 alone", spec["conversion"], storageVersion(spec), len(spec["versions"].([]any)))
	}
	for k := range objs {
		if strings.Contains(k, "webhook") || strings.Contains(k, "storage-migration") {
			t.Errorf("overlays/v1alpha1 keeps %s", k)
		}
	}
	if a := args(objs, "inferenceservice-operator"); slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--webhook") }) {
		t.Errorf("overlays/v1alpha1: operator args %v", a)
	}
}

// incompatible are the pairs that do not combine, as docs/operations.md lists them: cert-manager
// issues the certificate of the metrics adapter the others leave out (listed after them the
// build fails; before them its objects go with the adapter), and keda and prometheus-adapter
// are two metric sources for one custom metric (both render; install one).
var incompatible = map[[2]string]string{
	{"keda", "cert-manager"}:               "no adapter",
	{"prometheus-adapter", "cert-manager"}: "no adapter",
	{"namespaced", "cert-manager"}:         "no adapter",
	{"keda", "prometheus-adapter"}:         "two metric sources",
}

// TestComponentsCombine: every pair of components renders the same in either order, shows each
// component's effect, and renders exactly what the chart renders with both values set; the
// incompatible pairs fail to build or drop cert-manager's objects with the adapter. Five that
// combine render, together, what the chart does.
func TestComponentsCombine(t *testing.T) {
	h := helm(t)
	byName := map[string]int{}
	for i, c := range components {
		byName[c.name] = i
	}
	check := func(t *testing.T, names []string) {
		objs := sortedArgs(composeOrFail(t, names...))
		for _, n := range names {
			if err := components[byName[n]].effect(objs); err != nil {
				t.Errorf("%s's effect lost: %v", n, err)
			}
		}
		rev := slices.Clone(names)
		slices.Reverse(rev)
		if back := sortedArgs(composeOrFail(t, rev...)); !reflect.DeepEqual(objs, back) {
			compare(t, fmt.Sprintf("%v against %v", names, rev), back, objs)
		}
		values := map[string]string{}
		for _, n := range names {
			for k, v := range components[byName[n]].values {
				values[k] = v
			}
		}
		// The namespaced overlay's install has no metric source of its own (the chart's none).
		if _, ok := values["watchNamespaces"]; ok && values["autoscaling.metricSource"] == "" {
			values["autoscaling.metricSource"] = "none"
		}
		// The chart's namespace is the release's, made by helm (--create-namespace).
		delete(objs, "Namespace <nil>/inferenceservice-system")
		compare(t, fmt.Sprintf("components %v, chart values %v", names, values), sortedArgs(helmTemplate(t, h, flags(values)...)), objs)
	}
	names := make([]string, len(components))
	for i, c := range components {
		names[i] = c.name
	}
	for i, a := range names {
		for _, b := range names[i+1:] {
			pair := []string{a, b}
			t.Run(a+"+"+b, func(t *testing.T) {
				why, bad := incompatible[[2]string{a, b}]
				if !bad {
					why, bad = incompatible[[2]string{b, a}]
				}
				switch {
				case !bad:
					check(t, pair)
				case why == "no adapter":
					other := a
					if a == "cert-manager" {
						other = b
					}
					if _, err := compose(t, other, "cert-manager"); err == nil || !strings.Contains(err.Error(), "inferenceservice-metrics-adapter") {
						t.Errorf("[%s cert-manager] built (%v); want it refused for want of the adapter's Role", other, err)
					}
					objs := composeOrFail(t, "cert-manager", other)
					if err := components[byName[other]].effect(objs); err != nil {
						t.Errorf("[cert-manager %s]: %v", other, err)
					}
					for k := range objs {
						if strings.HasPrefix(k, "Certificate ") || strings.HasPrefix(k, "Issuer ") {
							t.Errorf("[cert-manager %s] keeps %s for an adapter it leaves out", other, k)
						}
					}
				default: // both render, each with its effect; the docs say to pick one
					objs := composeOrFail(t, a, b)
					for _, n := range pair {
						if err := components[byName[n]].effect(objs); err != nil {
							t.Errorf("%s: %v", n, err)
						}
					}
				}
			})
		}
	}
	t.Run("five together", func(t *testing.T) {
		check(t, []string{"keda", "namespaced", "metrics-insecure", "inference-pool", "operator-guard"})
	})
}

// compose renders the base with the components listed, in that order, as a user's own
// kustomization would (a temporary one, outside the repository).
func compose(t *testing.T, names ...string) (map[string]object, error) {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, p := range []string{"crd", "rbac", "operator", "metrics-adapter", "activator", "tenant-routes"} {
		fmt.Fprintf(&b, "- %s\n", filepath.Join(rel, p))
	}
	b.WriteString("images:\n- name: inferenceservice-operator\n  newTag: latest\ncomponents:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "- %s\n", filepath.Join(rel, "components", n))
	}
	// The default install's component, last as in the overlays.
	fmt.Fprintf(&b, "- %s\n", filepath.Join(rel, "components", "v1beta1"))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := kubectl(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "kustomize", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return parse(t, string(out)), nil
}

func composeOrFail(t *testing.T, names ...string) map[string]object {
	t.Helper()
	objs, err := compose(t, names...)
	if err != nil {
		t.Fatalf("components %v: %v", names, err)
	}
	return objs
}

// sortedArgs sorts every Deployment container's args: each component appends its flags, so
// their order follows the components' order, which the binaries' flag parsing ignores (no flag
// is given twice).
func sortedArgs(objs map[string]object) map[string]object {
	for _, o := range objs {
		if o["kind"] != "Deployment" {
			continue
		}
		for _, c := range o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
			if a, ok := c.(map[string]any)["args"].([]any); ok {
				slices.SortFunc(a, func(x, y any) int { return strings.Compare(fmt.Sprint(x), fmt.Sprint(y)) })
			}
		}
	}
	return objs
}

// flags turns chart values into helm flags, in a stable order.
func flags(values map[string]string) []string {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		if k == "watchNamespaces" {
			out = append(out, "--set-json", k+"="+values[k])
		} else {
			out = append(out, "--set", k+"="+values[k])
		}
	}
	return out
}

func has(objs map[string]object, keys ...string) error {
	for _, k := range keys {
		if _, ok := objs[k]; !ok {
			return fmt.Errorf("no %s", k)
		}
	}
	return nil
}

// clusterWideRules are the rules the ClusterRoleBindings of a ServiceAccount grant it, an
// aggregated ClusterRole's being those of the ClusterRoles its selectors match (as the
// clusterrole-aggregation controller fills it).
func clusterWideRules(objs map[string]object, ns, sa string) []any {
	var out []any
	for key, b := range objs {
		if !strings.HasPrefix(key, "ClusterRoleBinding ") {
			continue
		}
		bound := false
		subjects, _ := b["subjects"].([]any)
		for _, s := range subjects {
			m := s.(map[string]any)
			bound = bound || (m["kind"] == "ServiceAccount" && m["name"] == sa && m["namespace"] == ns)
		}
		ref, _ := b["roleRef"].(map[string]any)
		if role, ok := objs["ClusterRole <nil>/"+fmt.Sprint(ref["name"])]; bound && ok {
			out = append(out, roleRules(objs, role)...)
		}
	}
	return out
}

// roleRules are a ClusterRole's rules, or with an aggregationRule the matched roles' rules.
func roleRules(objs map[string]object, role object) []any {
	agg, ok := role["aggregationRule"].(map[string]any)
	if !ok {
		rules, _ := role["rules"].([]any)
		return rules
	}
	var out []any
	selectors, _ := agg["clusterRoleSelectors"].([]any)
	for key, other := range objs {
		if !strings.HasPrefix(key, "ClusterRole <nil>/") {
			continue
		}
		labels, _ := other["metadata"].(map[string]any)["labels"].(map[string]any)
		for _, sel := range selectors {
			match := true
			want, _ := sel.(map[string]any)["matchLabels"].(map[string]any)
			for k, v := range want {
				match = match && labels[k] == v
			}
			if match && len(want) > 0 {
				rules, _ := other["rules"].([]any)
				out = append(out, rules...)
				break
			}
		}
	}
	return out
}

// clusterScoped: the rule names only cluster-scoped resources or non-resource URLs (the
// chart's isvc.clusterScopedRule, which splits the base rules the same way).
func clusterScoped(rule any) bool {
	cluster := []string{"tokenreviews", "subjectaccessreviews", "selfsubjectaccessreviews", "customresourcedefinitions", "nodes",
		"persistentvolumes", "storageclasses", "priorityclasses", "runtimeclasses", "apiservices", "clusterroles", "clusterrolebindings",
		"clusterqueues", "customresourcedefinitions/status", "storageversionmigrations"}
	for _, r := range toStrings(rule.(map[string]any)["resources"]) {
		if !slices.Contains(cluster, r) {
			return false
		}
	}
	return true
}

// noAdapter: nothing of the operator's metrics adapter is rendered.
func noAdapter(objs map[string]object) error {
	for k := range objs {
		if strings.Contains(k, "/inferenceservice-metrics-adapter") {
			return fmt.Errorf("the metrics adapter's %s is still there", k)
		}
	}
	return nil
}

// args is a Deployment's first container's args in inferenceservice-system; nil without it.
func args(objs map[string]object, deployment string) []string {
	d, ok := objs["Deployment inferenceservice-system/"+deployment]
	if !ok {
		return nil
	}
	c := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	return toStrings(c["args"])
}

func storageVersion(spec map[string]any) string {
	vs, _ := spec["versions"].([]any)
	for _, v := range vs {
		if m := v.(map[string]any); m["storage"] == true {
			return fmt.Sprint(m["name"])
		}
	}
	return ""
}
