package e2e

// The hostile tenant on the gateway (issue 49, findings 3 and 6): a tenant in its own
// namespace claims another namespace's path or every bare /v1/... request, outbids every
// route's priority, reaches another port of the activator through the namespace's
// ReferenceGrant, keeps that grant after its last model went, or gets a ServiceAccount it
// made beforehand bound to the endpoint picker's role.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// gatewayModel is a v1alpha1 model with spec.gateway (as JSON) in the v1beta1 annotation.
func gatewayModel(name, gateway string) string {
	return `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: ` + name + `
  annotations: {` + crd.AnnotationV1beta1Spec + `: '{"gateway":` + gateway + `}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 1, gpusPerReplica: 1}
`
}

// applyRefusable applies manifest in ns and returns kubectl's output and error: the API
// server's refusal, if any, in its own words. flags go first (a v1beta1 test's private
// discovery cache, which keeps the shared one from learning a version about to go).
func applyRefusable(t *testing.T, ns, manifest string, flags ...string) (string, error) {
	t.Helper()
	return kubectlErr(t, nil, append(flags, "apply", "-n", ns, "-f", writeTemp(t, manifest))...)
}

// installTenantRoutes applies the install's tenant-routes policy (manifests/tenant-routes),
// removed when the test ends, and waits until the API server enforces it (a policy is
// compiled and bound asynchronously): probe is a model the policy refuses. Without the
// directory (the unfixed install) nothing is applied and the attacks below go through.
func installTenantRoutes(t *testing.T, ns, probe string, flags ...string) {
	t.Helper()
	dir := filepath.Join(env.Root, "manifests", "tenant-routes")
	if _, err := os.Stat(dir); err != nil {
		t.Logf("the install ships no tenant-routes policy (%v)", err)
		return
	}
	env.Kubectl(t, "apply", "-k", dir)
	t.Cleanup(func() { env.Kubectl(t, "delete", "-k", dir, "--ignore-not-found") })
	testenv.Eventually(t, time.Minute, "the tenant-routes policy enforced", func() error {
		out, err := applyRefusable(t, ns, probe, flags...)
		if err == nil {
			env.Kubectl(t, append(flags, "delete", "-n", ns, "-f", writeTemp(t, probe), "--ignore-not-found", "--wait=true")...)
			return fmt.Errorf("a probe was admitted: %s", out)
		}
		if !strings.Contains(out, "ValidatingAdmissionPolicy") {
			return fmt.Errorf("refused, not by the policy: %s", out)
		}
		return nil
	})
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestHostileRoutesRefusedByThePolicy: with the install's policy, a tenant's model claiming
// "/", another namespace's path, or priority 1000 is refused by the API server in the
// policy's words, whichever way the annotation's JSON spells the key; its own namespace's
// paths are admitted, and priority where the platform labelled the namespace.
func TestHostileRoutesRefusedByThePolicy(t *testing.T) {
	victim := env.Namespace(t)
	tenant := env.CreateNamespace(t, victim+"-b")
	applyYAML(t, victim, gatewayModel("llama", `{}`))
	installTenantRoutes(t, tenant, gatewayModel("probe", `{"route":"/"}`))

	own := "spec.gateway.route must start with /" + tenant + "/"
	for _, c := range []struct{ name, gateway, want string }{
		{"root", `{"route":"/"}`, own},
		{"victims-path", `{"route":"/` + victim + `/llama"}`, own},
		{"victims-namespace", `{"route":"/` + victim + `/"}`, own},
		{"upper-case-key", `{"ROUTE":"/` + victim + `/llama"}`, own},
		{"escaped-key", `{"\u0072oute":"/"}`, "writes a letter as a \\u escape"},
		{"dot-dot", `{"route":"/` + tenant + `/../` + victim + `/llama"}`, "must be a plain path"},
		{"priority", `{"route":"/` + tenant + `/x","priority":1000}`, "spec.gateway.priority must be 0 in namespace " + tenant},
	} {
		out, err := applyRefusable(t, tenant, gatewayModel("evil-"+c.name, c.gateway))
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: tenant %s's model with gateway %s: want refused with %q, got err %v: %s", c.name, tenant, c.gateway, c.want, err, strings.TrimSpace(out))
			continue
		}
		t.Logf("%s: refused: %s", c.name, strings.TrimSpace(out))
	}
	// Its own paths, and priority once the platform grants it.
	if out, err := applyRefusable(t, tenant, gatewayModel("chat", `{"route":"/`+tenant+`/chat"}`)); err != nil {
		t.Errorf("the tenant's own path refused: %s", out)
	}
	env.Kubectl(t, "label", "namespace", tenant, "ai.example.com/gateway-priority=true")
	testenv.Eventually(t, time.Minute, "priority admitted where granted", func() error {
		out, err := applyRefusable(t, tenant, gatewayModel("ranked", `{"route":"/`+tenant+`/ranked","priority":1000}`))
		if err != nil {
			return fmt.Errorf("%s", strings.TrimSpace(out))
		}
		return nil
	})
}

// TestHostileRoutesRefusedByThePolicyV1beta1: the same policy holds v1beta1's spec.gateway,
// on the v1beta1 install.
func TestHostileRoutesRefusedByThePolicyV1beta1(t *testing.T) {
	victim := env.Namespace(t)
	tenant := env.CreateNamespace(t, victim+"-b")
	w := useWebhookCRD(t)
	model := func(name, gateway string) string {
		return `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: ` + name + `}
spec:
  baseModel: Qwen/Qwen3-0.6B
  replicas: 1
  gpusPerReplica: 1
  gateway: ` + gateway + `
`
	}
	installTenantRoutes(t, tenant, model("probe", `{route: /}`), w.cache)
	for _, c := range []struct{ name, gateway, want string }{
		{"root", `{route: /}`, "spec.gateway.route must start with /" + tenant + "/"},
		{"victims-path", `{route: /` + victim + `/llama}`, "spec.gateway.route must start with /" + tenant + "/"},
		{"priority", `{route: /` + tenant + `/x, priority: 1000}`, "spec.gateway.priority must be 0 in namespace " + tenant},
	} {
		out, err := applyRefusable(t, tenant, model("evil-"+c.name, c.gateway), w.cache)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: v1beta1 gateway %s: want refused with %q, got err %v: %s", c.name, c.gateway, c.want, err, strings.TrimSpace(out))
			continue
		}
		t.Logf("%s: refused: %s", c.name, strings.TrimSpace(out))
	}
	if out, err := applyRefusable(t, tenant, model("chat", `{route: /`+tenant+`/chat}`), w.cache); err != nil {
		t.Errorf("the tenant's own path refused: %s", out)
	}
	env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", tenant, "--wait=true", "--timeout=60s")
}

// routeConflict returns the RouteConflict message on a model's status, or an error saying
// what the status says instead.
func routeConflict(ns, name string) (string, error) {
	i, err := env.ISVC(ns, name)
	if err != nil {
		return "", err
	}
	c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionProgressing)
	if c == nil || c.Reason != reconcile.ReasonRouteConflict {
		return "", fmt.Errorf("Progressing %+v, reason %q", c, i.Status.Reason)
	}
	return c.Message, nil
}

// TestHostileRoutesConflictNamed: without the policy, a tenant's model claiming a victim's
// path, or every path with priority 1000, is named on both models' status (RouteConflict)
// with a Warning Event on each, until it goes.
func TestHostileRoutesConflictNamed(t *testing.T) {
	victim := env.Namespace(t)
	tenant := env.CreateNamespace(t, victim+"-b")
	applyYAML(t, victim, gatewayModel("llama", `{}`))
	env.WaitPhase(t, victim, "llama", crd.PhaseReady, 3*time.Minute)

	for _, c := range []struct{ name, gateway, path string }{
		{"same-path", `{"route":"/` + victim + `/llama"}`, "/" + victim + "/llama"},
		{"root-priority", `{"route":"/","priority":1000}`, "/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			applyYAML(t, tenant, gatewayModel("evil", c.gateway))
			testenv.Eventually(t, time.Minute, "the conflict named on both models", func() error {
				v, err := routeConflict(victim, "llama")
				if err != nil {
					return fmt.Errorf("victim: %w", err)
				}
				a, err := routeConflict(tenant, "evil")
				if err != nil {
					return fmt.Errorf("tenant: %w", err)
				}
				if !strings.Contains(v, tenant+"/evil") || !strings.Contains(a, victim+"/llama") {
					return fmt.Errorf("victim says %q, tenant says %q", v, a)
				}
				t.Logf("victim's status: %s", v)
				t.Logf("tenant's status: %s", a)
				return nil
			})
			for _, m := range []struct{ ns, name string }{{victim, "llama"}, {tenant, "evil"}} {
				testenv.Eventually(t, 30*time.Second, "a RouteConflict Event on "+m.ns+"/"+m.name, func() error {
					out := env.Kubectl(t, "get", "events", "-n", m.ns, "--field-selector", "reason="+reconcile.ReasonRouteConflict+",involvedObject.name="+m.name, "-o", "name")
					if strings.TrimSpace(out) == "" {
						return fmt.Errorf("none")
					}
					return nil
				})
			}
			env.Kubectl(t, "delete", "isvc", "evil", "-n", tenant, "--wait=true", "--timeout=60s")
			testenv.Eventually(t, time.Minute, "the victim's conflict cleared", func() error {
				if m, err := routeConflict(victim, "llama"); err == nil {
					return fmt.Errorf("still %q", m)
				}
				return nil
			})
		})
	}
}

// TestHostileRoutesGrantAndPicker: through the test gateway and the activator, a tenant's own
// HTTPRoute cannot use its namespace's ReferenceGrant to reach the activator's metrics port
// (or any Service the grant does not name), the grant goes with the last model of the
// namespace that needed it, and a ServiceAccount the tenant made beforehand under the
// picker's name is not bound to the picker's role.
func TestHostileRoutesGrantAndPicker(t *testing.T) {
	ns := env.Namespace(t)
	gwAddr := withGateway(t, ns, "gateway-hostile.log")
	installActivator(t)
	ctx := context.Background()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil}}
	get := func(path string) (int, string, error) {
		resp, err := client.Get("http://" + gwAddr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return resp.StatusCode, string(b), nil
	}

	t.Run("stranger-picker-serviceaccount", func(t *testing.T) {
		// The tenant's own ServiceAccount under the picker's name, made before the model.
		env.Kubectl(t, "-n", ns, "create", "serviceaccount", reconcile.PickerName("pk"))
		applyYAML(t, ns, gatewayModel("pk", `{}`))
		testenv.Eventually(t, time.Minute, "the stranger ServiceAccount named on the status", func() error {
			i, err := env.ISVC(ns, "pk")
			if err != nil {
				return err
			}
			for _, c := range i.Status.Conditions {
				if strings.Contains(c.Message, "ServiceAccount "+ns+"/"+reconcile.PickerName("pk")) {
					t.Logf("%s %s: %s", c.Type, c.Reason, c.Message)
					return nil
				}
			}
			return fmt.Errorf("conditions %+v", i.Status.Conditions)
		})
		// Several passes later, still no binding.
		writesSettle(t)
		rb, err := env.Kube.RbacV1().RoleBindings(ns).Get(ctx, reconcile.PickerName("pk"), metav1.GetOptions{})
		if err == nil {
			t.Fatalf("RoleBinding %s/%s binds %+v to %s: the tenant's ServiceAccount holds the picker's role", ns, rb.Name, rb.Subjects, rb.RoleRef.Name)
		}
		if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		env.Kubectl(t, "delete", "isvc", "pk", "-n", ns, "--wait=true", "--timeout=60s")
	})

	t.Run("grant-reach-and-lifetime", func(t *testing.T) {
		applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: zr
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"gateway":{},"autoscaling":{"minReplicas":0,"maxReplicas":1,"idleSeconds":600},"replicasUnset":true}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 0, gpusPerReplica: 1}
`)
		grant := reconcile.ActivatorGrantName(ns)
		testenv.Eventually(t, 2*time.Minute, "the namespace's grant", func() error {
			_, _, err := env.Cluster.Kubectl(testenv.Ctx(t, time.Minute), "-n", "inferenceservice-system", "get", "referencegrants.gateway.networking.k8s.io", grant)
			return err
		})
		t.Logf("grant: %s", env.Kubectl(t, "-n", "inferenceservice-system", "get", "referencegrants.gateway.networking.k8s.io", grant, "-o", "jsonpath={.spec}"))
		// The tenant's own route, in the grant's namespace, to the activator's other port and
		// to its other Service.
		applyYAML(t, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: peek}
spec:
  parentRefs: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: gateway-system, name: public}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /peek-port}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /metrics}}}]
    backendRefs: [{group: "", kind: Service, namespace: inferenceservice-system, name: inferenceservice-activator, port: 9090, weight: 1}]
  - matches: [{path: {type: PathPrefix, value: /peek-service}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /metrics}}}]
    backendRefs: [{group: "", kind: Service, namespace: inferenceservice-system, name: inferenceservice-activator-metrics, port: 9090, weight: 1}]
`)
		for _, p := range []string{"/peek-port", "/peek-service"} {
			var code int
			var body string
			testenv.Eventually(t, time.Minute, "the gateway answering "+p, func() error {
				var err error
				code, body, err = get(p)
				if err != nil || code == http.StatusNotFound && strings.Contains(body, "no HTTPRoute") {
					return fmt.Errorf("%d %v %s", code, err, body)
				}
				return nil
			})
			if code == http.StatusOK {
				first, _, _ := strings.Cut(body, "\n")
				t.Errorf("%s: the tenant's route read the activator's metrics through the grant: %d %s ...", p, code, first)
				continue
			}
			t.Logf("%s: %d %s", p, code, strings.TrimSpace(body))
		}
		env.Kubectl(t, "delete", "httproute.gateway.networking.k8s.io", "peek", "-n", ns)

		// The namespace's last model that needed the grant goes: so does the grant.
		env.Kubectl(t, "delete", "isvc", "zr", "-n", ns, "--wait=true", "--timeout=60s")
		testenv.Eventually(t, time.Minute, "the grant deleted with its last model", func() error {
			out, _, err := env.Cluster.Kubectl(testenv.Ctx(t, time.Minute), "-n", "inferenceservice-system", "get", "referencegrants.gateway.networking.k8s.io", grant, "--ignore-not-found", "-o", "name")
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != "" {
				return fmt.Errorf("%s still there with no model of %s needing it", strings.TrimSpace(out), ns)
			}
			return nil
		})
	})
}
