package manifests

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestChartRefusesWrongValues: values.schema.json refuses, through helm template as through
// helm install, a value of the wrong type, a key values.yaml does not have (a typo), and a value
// outside the set a template accepts, each with helm's schema error naming the value; and the
// chart's kubeVersion refuses a cluster older than 1.30. Every documented combination passing
// the schema is TestChartMatchesManifests' (it renders each) and TestChartLint's.
func TestChartRefusesWrongValues(t *testing.T) {
	h := helm(t)
	for _, tc := range []struct {
		name string
		args []string
		want string // in helm's error
	}{
		{"a string for replicas", []string{"--set", "operator.replicas=two"}, "at '/operator/replicas': got string, want integer"},
		{"an unknown key", []string{"--set", "operator.replica=2"}, "at '/operator': additional properties 'replica' not allowed"},
		{"an unknown top-level key", []string{"--set", "metricSource=keda"}, "additional properties 'metricSource' not allowed"},
		{"an unknown metric source", []string{"--set", "autoscaling.metricSource=prometheus"}, "at '/autoscaling/metricSource': value must be one of"},
		{"an unknown pull policy", []string{"--set", "image.pullPolicy=Sometimes"}, "at '/image/pullPolicy': value must be one of"},
		{"a duration without its unit", []string{"--set", "activator.maxWait=90"}, "at '/activator/maxWait'"},
		{"a string for a switch", []string{"--set-string", "crds.install=no"}, "at '/crds/install': got string, want boolean"},
		// The release's namespace is helm's -n; the old value is refused, not ignored.
		{"the namespace as a value", []string{"--set", "namespace.name=my-ns"}, "additional properties 'namespace' not allowed"},
		{"a namespace that is no DNS label", []string{"--set-json", `watchNamespaces=["Team_A"]`}, "at '/watchNamespaces/0'"},
		{"a cluster older than 1.30", []string{"--kube-version", "1.29.9"}, "chart requires kubeVersion: >= 1.30.0-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, stderr, err := h.Run(ctx, ".", append([]string{"template", "isvc", chartDir}, tc.args...)...)
			if err == nil {
				t.Fatalf("helm template %v rendered; want it refused", tc.args)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("helm template %v: want an error with %q, got:\n%s", tc.args, tc.want, stderr)
			}
		})
	}
}

// TestChartAcceptsGoodValues: the values a user may set beyond the documented combinations, in
// each form the schema allows (--set's integers and strings alike), pass it and render.
func TestChartAcceptsGoodValues(t *testing.T) {
	h := helm(t)
	for _, args := range [][]string{
		{"--set", "operator.gogc=off,operator.goMemLimit=900MiB,image.pullPolicy=IfNotPresent,image.tag=v0.1.0"},
		{"--set", "operator.gogc=50,operator.goMemLimit=943718400,operator.replicas=0"},
		{"--set", "gateway.parent=gateway-system/inference,gateway.inferencePool=off,gateway.deregisterTimeout=1h30m,gateway.endpointPickerImage=registry.example.com/epp:v1,gateway.endpointPickerRefreshMetricsInterval=1s"},
		{"--set-json", `operator.extraArgs=["--workers=16"]`, "--set", "crds.install=false,crds.keep=false", "--namespace", "my-ns"},
		{"--set", "global.imageRegistry=registry.example.com"},
		{"--kube-version", "1.30.0"},
	} {
		runHelm(t, h, append([]string{"template", "isvc", chartDir}, args...)...)
	}
}

// TestChartCRDsInstall: crds.install=false renders no CustomResourceDefinition, with either
// storage version; the default renders the one CRD.
func TestChartCRDsInstall(t *testing.T) {
	h := helm(t)
	count := func(args ...string) int {
		n := 0
		for _, o := range helmTemplate(t, h, args...) {
			if o["kind"] == "CustomResourceDefinition" {
				n++
			}
		}
		return n
	}
	if n := count(); n != 1 {
		t.Errorf("defaults: %d CRDs rendered, want 1", n)
	}
	for _, args := range [][]string{{"--set", "crds.install=false"}, {"--set", "crds.install=false,conversionWebhook.enabled=true"}} {
		if n := count(args...); n != 0 {
			t.Errorf("%v: %d CRDs rendered, want none", args, n)
		}
	}
}
