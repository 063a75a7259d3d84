package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// poolBins are the endpoint picker and the test gateway (make epp); without them the test is
// skipped on a developer's machine and fails under CI, which builds them.
func poolBins(t *testing.T) (epp, gateway string) {
	t.Helper()
	epp, gateway = os.Getenv(operator.EPPBinEnv), os.Getenv(operator.GatewayBinEnv)
	if epp == "" || gateway == "" || !env.execImages {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s and %s must name the picker and the gateway (make epp builds them)", operator.EPPBinEnv, operator.GatewayBinEnv)
		}
		t.Skipf("%s or %s unset (make epp)", operator.EPPBinEnv, operator.GatewayBinEnv)
	}
	return epp, gateway
}

// withGateway sets the pool route's world up for one test: the extension's InferencePool CRD
// and the HTTPRoute and ReferenceGrant stand-ins, the operator restarted with the gateway's
// parent (it discovers optional kinds at start), and the test gateway, logging to logName;
// it returns the gateway's address. All undone at the test's end, ns's models deleted first.
func withGateway(t *testing.T, ns, logName string) string {
	t.Helper()
	eppBin, _ := poolBins(t)
	return withGatewayWorld(t, ns, logName, gatewayWorld{crds: []string{filepath.Join(operator.EPPManifests(eppBin), "crd")}})
}

// gatewayWorld is what a gateway test installs: CRD files or folders applied client-side, and
// server-side (a CRD larger than the client-side apply annotation allows), and the test
// gateway's own flags beyond its kubeconfig and parent.
type gatewayWorld struct {
	crds, serverSideCRDs, gatewayArgs []string
}

// withGatewayWorld is withGateway with w's CRDs and gateway flags.
func withGatewayWorld(t *testing.T, ns, logName string, w gatewayWorld) string {
	t.Helper()
	_, gwBin := poolBins(t)
	var files []string
	for _, f := range w.crds {
		env.Kubectl(t, "apply", "-f", f)
		files = append(files, "-f", f)
	}
	for _, f := range w.serverSideCRDs {
		env.Kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", f)
		files = append(files, "-f", f)
	}
	env.Kubectl(t, append(append([]string{"wait", "--for=condition=Established"}, files...), "--timeout=60s")...)
	stopOperator(t)
	if err := startOperator(testenv.Ctx(t, 2*time.Minute), "--gateway-parent="+gatewayParent); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.Kubectl(t, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s")
		stopOperator(t)
		env.Kubectl(t, append(append([]string{"delete"}, files...), "--wait=true", "--timeout=60s")...)
		restartOperator(t)
	})
	args := append([]string{"--kubeconfig=" + env.Cluster.KubeconfigPath(), "--gateway=" + gatewayParent}, w.gatewayArgs...)
	gwAddr, _, stopGW, err := operator.StartGateway(testenv.Ctx(t, time.Minute), gwBin, filepath.Join(env.Dir, logName), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopGW() })
	return gwAddr
}

// TestPoolRoute, for every engine: where the Inference Extension's InferencePool is served, a model with
// spec.gateway gets a pool and an endpoint picker, which the local kubelet runs from the
// extension's own code; the route goes to the Service until the picker serves, then to the
// pool, and the gateway sends each request where the picker says. Requests sharing a long
// prefix land on one pod. The picker killed: the route goes back to the Service and requests
// are still answered; back, the pool again. Deleted, the pool route's children go with it.
func TestPoolRoute(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { testPoolRoute(t, e) })
	}
}

// testPoolRoute is TestPoolRoute for one engine: its picker reads the engine's own series.
func testPoolRoute(t *testing.T, e engineCase) {
	ns := env.Namespace(t)
	ctx := context.Background()
	gwAddr := withGateway(t, ns, "gateway-"+e.name+".log")
	// Adapters where the engine's /v1/models lists them: the picker's LoRA affinity reads which
	// pod runs which, and the test asks a pod what it serves. SGLang v0.5.3 lists none (its
	// picker routes adapter requests on the queue, KV cache and prefix alone).
	listed := e.eng.Server().Adapters.Listed
	adapters := ""
	if listed {
		adapters = `,"adapters":[{"name":"sql","storageURI":"hf://org/sql-lora"},{"name":"chat","storageURI":"hf://org/chat-lora"}]`
	}

	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
`+e.meta("m", `"gateway":{"route":"/`+ns+`/m"}`+adapters)+`
spec: {model: Qwen/Qwen3-8B, replicas: 2, gpusPerReplica: 1}
`)
	routed := func(want string, timeout time.Duration) *metav1.Condition {
		t.Helper()
		var c *metav1.Condition
		testenv.Eventually(t, timeout, "Routed "+want, func() error {
			i, err := env.ISVC(ns, "m")
			if err != nil {
				return err
			}
			if c = meta.FindStatusCondition(i.Status.Conditions, crd.ConditionRouted); c == nil || c.Reason != want || i.Status.ReadyReplicas < 2 {
				return fmt.Errorf("ready %d, Routed %+v", i.Status.ReadyReplicas, c)
			}
			return nil
		})
		return c
	}
	c := routed(reconcile.ReasonPoolRoute, 3*time.Minute)
	t.Logf("Routed: %s %s: %s", c.Status, c.Reason, c.Message)
	if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "2 of 2 pods ready in the pool") {
		t.Fatalf("Routed %+v", c)
	}
	backend := func() string {
		u, err := env.Dyn.Resource(reconcile.HTTPRouteGVR).Namespace(ns).Get(ctx, "m", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		ref := rules[0].(map[string]any)["backendRefs"].([]any)[0].(map[string]any)
		return fmt.Sprint(ref["kind"], "/", ref["name"])
	}
	if b := backend(); b != "InferencePool/m" {
		t.Fatalf("route backend %s", b)
	}
	pods := map[string]bool{}
	list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		pods[p.Status.PodIP+":8000"] = true
	}

	// One long system prompt, many turns: once a pod holds it, the picker keeps the chat there.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
	url := "http://" + gwAddr + "/" + ns + "/m/v1/completions"
	askModel := func(model, prompt string) (endpoint string, err error) {
		body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 1})
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
		}
		return resp.Header.Get("x-gateway-destination-endpoint"), nil
	}
	ask := func(prompt string) (string, error) { return askModel("Qwen/Qwen3-8B", prompt) }
	system := "System:" + strings.Repeat(" you answer briefly and precisely about the cluster", 60)
	history, seen := system, map[string]int{}
	for turn := 0; turn < 8; turn++ {
		history += fmt.Sprintf("\nUser: question %d about pods and nodes\nAssistant:", turn)
		ep, err := ask(history)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		if !pods[ep] {
			t.Fatalf("turn %d served by %q, not a pod of the pool %v", turn, ep, pods)
		}
		seen[ep]++
		history += " an answer of a few words"
	}
	if len(seen) != 1 {
		t.Fatalf("a chat's turns spread over %v: the picker's prefix scorer should keep them on the pod that holds the prefix", seen)
	}
	t.Logf("8 turns of one chat, all on %v", seen)

	// Adapter requests while the model scales up: the new pod joins the pool only once its
	// adapters are loaded (the adapters readiness gate), so every request lands on a pod that
	// lists its adapter on /v1/models, and none is answered 404. (Which pod is the picker's
	// choice: its LoRA affinity keeps an adapter on a pod where it is running.)
	env.Kubectl(t, "-n", ns, "scale", "isvc", "m", "--replicas=3")
	served, afterReady := map[string]int{}, 0
	for n := 0; listed && afterReady < 20; n++ {
		for _, a := range []string{"sql", "chat"} {
			ep, err := askModel(a, fmt.Sprintf("adapter request %d", n))
			if err != nil {
				t.Fatalf("adapter %s, request %d: %v", a, n, err)
			}
			loaded, err := podAdapters(strings.TrimSuffix(ep, ":8000"))
			if err != nil {
				t.Fatalf("adapter %s served by %s: %v", a, ep, err)
			}
			if _, ok := loaded[a]; !ok {
				t.Fatalf("adapter %s served by %s, which lists %v", a, ep, loaded)
			}
			served[ep]++
		}
		if i, err := env.ISVC(ns, "m"); err == nil && i.Status.ReadyReplicas == 3 {
			afterReady++
		}
		if n > 2000 {
			t.Fatalf("the third pod not ready after %d adapter requests (served by %v)", n, served)
		}
	}
	t.Logf("adapter requests during the scale-up and after, per pod: %v", served)

	// The picker down (its Deployment scaled to zero by hand): the operator sends the route back
	// to the Service until the picker serves again, and scales it back, since it owns the
	// picker's replicas. Polled every 100 ms, with a request each time: what the isvc said,
	// where the route went, how the requests fared.
	env.Kubectl(t, "-n", ns, "scale", "deployment", reconcile.PickerName("m"), "--replicas=0")
	reasons, backends := map[string]bool{}, map[string]bool{}
	okOnService, failed := 0, 0
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if i, err := env.ISVC(ns, "m"); err == nil {
			if c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionRouted); c != nil {
				reasons[c.Reason] = true
			}
		}
		b := backend()
		backends[b] = true
		if _, err := ask(system + "\nUser: still there?\nAssistant:"); err != nil {
			failed++
		} else if b == "Service/m" {
			okOnService++
		}
		if reasons[reconcile.ReasonPickerUnavailable] && backends["Service/m"] && b == "InferencePool/m" && okOnService > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the picker went down: Routed reasons %v, backends %v, %d answered through the Service, %d failed", reasons, backends, okOnService, failed)
		}
		time.Sleep(100 * time.Millisecond) // the poll's period, bounded by the deadline above
	}
	t.Logf("picker down and back: Routed reasons %v, backends %v, %d requests answered through the Service, %d failed (the picker gone before the route moved)", reasons, backends, okOnService, failed)
	routed(reconcile.ReasonPoolRoute, time.Minute)

	env.Kubectl(t, "delete", "isvc", "m", "-n", ns, "--wait=true", "--timeout=60s")
	testenv.Eventually(t, time.Minute, "the pool route's children gone", func() error {
		var left []string
		if _, err := env.Dyn.Resource(reconcile.InferencePoolGVR).Namespace(ns).Get(ctx, "m", metav1.GetOptions{}); err == nil {
			left = append(left, "InferencePool")
		}
		if _, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, reconcile.PickerName("m"), metav1.GetOptions{}); err == nil {
			left = append(left, "picker Deployment")
		}
		if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, reconcile.PickerName("m"), metav1.GetOptions{}); err == nil {
			left = append(left, "ServiceAccount")
		}
		if _, err := env.Kube.RbacV1().RoleBindings(ns).Get(ctx, reconcile.PickerName("m"), metav1.GetOptions{}); err == nil {
			left = append(left, "RoleBinding")
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
}

// TestPoolRouteOneReplicaNoPicker: a model that can never pass one pod (maxReplicas 1) and
// serves no adapters asks for the pool route and gets none: no InferencePool and no picker,
// its route on the Service, and Routed says why.
func TestPoolRouteOneReplicaNoPicker(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	withGateway(t, ns, "gateway-one-replica.log")
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: one
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"gateway":{"route":"/`+ns+`/one"},"autoscaling":{"minReplicas":1,"maxReplicas":1},"replicasUnset":true}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 1, gpusPerReplica: 1}
`)
	testenv.Eventually(t, 3*time.Minute, "Routed ServiceRoute, saying why no picker", func() error {
		i, err := env.ISVC(ns, "one")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionRouted)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reconcile.ReasonServiceRoute || i.Status.ReadyReplicas < 1 ||
			!strings.Contains(c.Message, "the endpoint picker has nothing to choose between") {
			return fmt.Errorf("ready %d, Routed %+v", i.Status.ReadyReplicas, c)
		}
		t.Logf("Routed: %s %s: %s", c.Status, c.Reason, c.Message)
		return nil
	})
	if _, err := env.Dyn.Resource(reconcile.InferencePoolGVR).Namespace(ns).Get(ctx, "one", metav1.GetOptions{}); err == nil {
		t.Fatal("an InferencePool for a model at one replica forever")
	}
	if _, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, reconcile.PickerName("one"), metav1.GetOptions{}); err == nil {
		t.Fatal("a picker Deployment for a model at one replica forever")
	}
}
