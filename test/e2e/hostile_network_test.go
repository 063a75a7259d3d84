package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// tenantShellImage runs /bin/sh as a real process on its pod's IP (main_test.go's
// --exec-image): what any tenant can run in its own namespace.
const tenantShellImage = "localcluster.test/tenant-shell"

// curlFrom runs one curl per target from a new pod of ns with the given labels and returns,
// by target, the HTTP code and curl's error, as the pod printed them.
func curlFrom(t *testing.T, ns, pod string, podLabels map[string]string, targets map[string]string) map[string]string {
	t.Helper()
	var script strings.Builder
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range targets {
			if !yield(k) {
				return
			}
		}
	}) {
		// -m bounds each attempt; the code is 000 when no response came; $r unquoted puts
		// curl's error and the code on one line.
		// A closed port (the server restarting: seen twice in ten runs on a loaded machine,
		// for about 3 s) says nothing of a policy: tried again, up to 10 times a second apart.
		fmt.Fprintf(&script, "for i in 1 2 3 4 5 6 7 8 9 10; do r=$(curl -sS -o /dev/null -w ' code=%%{http_code}' -m 5 %s 2>&1); "+
			"case \"$r\" in *\"Couldn't connect\"*) sleep 1;; *) break;; esac; done; echo RESULT %s $r; ", targets[name], name)
	}
	script.WriteString("exec sleep 600")
	var labels strings.Builder
	for k, v := range podLabels {
		fmt.Fprintf(&labels, "%q: %q, ", k, v)
	}
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, labels: {%s}}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: sh
    image: %s:1
    command: [sh, -c, %q]
`, pod, strings.TrimSuffix(labels.String(), ", "), tenantShellImage, script.String()))
	t.Cleanup(func() { env.Kubectl(t, "delete", "pod", "-n", ns, pod, "--wait=false") })
	got := map[string]string{}
	testenv.Eventually(t, 2*time.Minute, "the results of pod "+ns+"/"+pod, func() error {
		out, _, err := env.Cluster.Kubectl(testenv.Ctx(t, time.Minute), "logs", "-n", ns, pod)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
				name, result, _ := strings.Cut(rest, " ")
				got[name] = result
			}
		}
		if len(got) < len(targets) {
			return fmt.Errorf("%d of %d results: %q", len(got), len(targets), out)
		}
		return nil
	})
	for name, r := range got {
		t.Logf("%s/%s -> %s: %s", ns, pod, name, r)
	}
	return got
}

// TestHostileNetworkModelPort: a pod in tenant namespace B reaches neither namespace A's
// model pod on its port (the LoRA admin API, the model list) nor anything else of it: the
// model's NetworkPolicy admits only its namespace, the install's components and the gateway,
// and the local cluster enforces it (a refused connection is reset). A pod of A's own
// namespace, the activator (waking a model at zero and forwarding to it) and the operator
// (loading the adapter at run time) still reach it.
func TestHostileNetworkModelPort(t *testing.T) {
	nsA := env.Namespace(t)
	nsB := env.CreateNamespace(t, nsA+"-tenant")
	t.Cleanup(func() { env.Kubectl(t, "delete", "isvc", "--all", "-n", nsA, "--wait=true", "--timeout=60s") })
	activator := installActivator(t)
	applyYAML(t, nsA, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: m
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"adapters":[{"name":"sql","storageURI":"hf://org/sql-lora"}]}'}
spec: {model: Qwen/Qwen3-8B, replicas: 1, gpusPerReplica: 1}
---
apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: idle
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"autoscaling":{"minReplicas":0,"maxReplicas":1,"idleSeconds":600},"replicasUnset":true}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 0, gpusPerReplica: 1}
`)
	// The operator reaches the pod: it loads the adapter through the pod's runtime LoRA API.
	var ip string
	testenv.Eventually(t, 3*time.Minute, "m ready with its adapter loaded", func() error {
		i, err := env.ISVC(nsA, "m")
		if err != nil {
			return err
		}
		// One pod, none going: the address attacked is the model's for the whole test.
		all, err := env.Kube.CoreV1().Pods(nsA).List(testenv.Ctx(t, time.Minute), metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=m"})
		if err != nil || len(all.Items) != 1 || all.Items[0].DeletionTimestamp != nil {
			return fmt.Errorf("pods of m: %v", err)
		}
		ready, err := readyModelPods(t, nsA, "m")
		if err != nil || len(ready) != 1 {
			return fmt.Errorf("ready pods %d, %v", len(ready), err)
		}
		got, err := podAdapters(ready[0].Status.PodIP)
		if err != nil || got["sql"] == "" {
			return fmt.Errorf("pod %s serves %v, %v; phase %s", ready[0].Name, got, err, i.Status.Phase)
		}
		ip = ready[0].Status.PodIP
		return nil
	})
	model := "http://" + ip + fmt.Sprintf(":%d", reconcile.Port)
	attacks := map[string]string{
		"unload-adapter": `-X POST -H 'Content-Type: application/json' -d '{"lora_name":"sql"}' ` + model + "/v1/unload_lora_adapter",
		"models":         model + "/v1/models",
	}
	tenant := curlFrom(t, nsB, "tenant", map[string]string{"app": "tenant"}, attacks)
	for name, r := range tenant {
		if !strings.Contains(r, "code=000") || !strings.Contains(r, "reset by peer") {
			t.Errorf("a pod of tenant namespace %s reached %s's model (%s): %s", nsB, nsA, name, r)
		}
	}
	if t.Failed() {
		t.Logf("pods and events of %s:\n%s\n%s", nsA, env.Kubectl(t, "get", "pods", "-n", nsA, "-o", "wide"), env.Kubectl(t, "get", "events", "-n", nsA))
	}
	own := curlFrom(t, nsA, "neighbour", map[string]string{"app": "client"}, map[string]string{"models": model + "/v1/models"})
	if r := own["models"]; !strings.Contains(r, "code=200") {
		t.Errorf("a pod of the model's own namespace was refused: %s", r)
	}

	// The activator's pod (inferenceservice-system, its app label) wakes the model at zero and
	// forwards the held request to its pod.
	client := &http.Client{Timeout: 2 * activatorMaxWait, Transport: &http.Transport{Proxy: nil}}
	var code int
	var err error
	testenv.Eventually(t, 3*activatorMaxWait, "a completion through the activator", func() error {
		code, _, _, err = ask(client, "http://"+activator+"/"+nsA+"/idle/v1/completions")
		if code != http.StatusOK {
			return fmt.Errorf("%d: %v", code, err)
		}
		return nil
	})

	// The policy the operator made, as an object: what is admitted, to which pods.
	np, err := env.Kube.NetworkingV1().NetworkPolicies(nsA).Get(testenv.Ctx(t, time.Minute), "m", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if np.Spec.PodSelector.MatchLabels[kinds.InstanceLabel] != "m" || len(np.Spec.Ingress) != 1 || !metav1.IsControlledBy(np, mustISVC(t, nsA, "m")) {
		t.Fatalf("NetworkPolicy %s/m: selector %v, rules %+v, owners %v", nsA, np.Spec.PodSelector, np.Spec.Ingress, np.OwnerReferences)
	}
	t.Logf("NetworkPolicy %s/m ingress: %+v", nsA, np.Spec.Ingress)
}

func mustISVC(t *testing.T, ns, name string) *crd.InferenceService {
	t.Helper()
	i, err := env.ISVC(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// TestHostileNetworkPickerPolicy: a model's endpoint picker gets a NetworkPolicy admitting only
// the gateway's pods (by default every pod of the Gateway's namespace) on its ext_proc,
// health and metrics ports, and no other pod. Checked as an object: the local cluster does
// not police the ports of exec images' own listeners (test/localcluster/README.md), so a
// tenant's connection to the picker is logged, not asserted.
func TestHostileNetworkPickerPolicy(t *testing.T) {
	ns := env.Namespace(t)
	nsB := env.CreateNamespace(t, ns+"-tenant")
	withGateway(t, ns, "gateway-netpol.log")
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: m
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"gateway":{"route":"/`+ns+`/m"}}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 1, gpusPerReplica: 1}
`)
	gatewayNS, _, _ := strings.Cut(gatewayParent, "/")
	var pickerIP string
	testenv.Eventually(t, 3*time.Minute, "the picker's NetworkPolicy and a running picker", func() error {
		np, err := env.Kube.NetworkingV1().NetworkPolicies(ns).Get(testenv.Ctx(t, time.Minute), reconcile.PickerName("m"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if np.Spec.PodSelector.MatchLabels[kinds.PickerLabel] != "m" || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 ||
			np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != gatewayNS || len(np.Spec.Ingress[0].Ports) != 3 {
			return fmt.Errorf("picker policy %+v", np.Spec)
		}
		pods, err := env.Kube.CoreV1().Pods(ns).List(testenv.Ctx(t, time.Minute), metav1.ListOptions{LabelSelector: kinds.PickerLabel + "=m"})
		if err != nil || len(pods.Items) == 0 || pods.Items[0].Status.PodIP == "" {
			return fmt.Errorf("picker pods: %v", err)
		}
		pickerIP = pods.Items[0].Status.PodIP
		t.Logf("NetworkPolicy %s/%s: %+v", ns, np.Name, np.Spec.Ingress)
		return nil
	})
	got := curlFrom(t, nsB, "tenant", map[string]string{"app": "tenant"}, map[string]string{
		"picker-metrics": fmt.Sprintf("http://%s:%d/metrics", pickerIP, reconcile.PickerMetricsPort)})
	t.Logf("not policed here (an exec image's own listener): %v", got)
}

// TestHostileNetworkRayHead: a pod of tenant namespace B runs vLLM's multi-node script as a
// worker of namespace A's multi-node model (`ray start --address=LEADER:6379`; Ray's head has
// no authentication): it cannot join, since the model's policy admits on Ray's ports only the
// pods of its own LeaderWorkerSet, while the model's own worker did join (the group is Ready).
func TestHostileNetworkRayHead(t *testing.T) {
	startLWS(t)
	stopOperator(t)
	restartOperator(t) // it discovers LeaderWorkerSet at start
	nsA := env.Namespace(t)
	nsB := env.CreateNamespace(t, nsA+"-tenant")
	t.Cleanup(func() { env.Kubectl(t, "delete", "isvc", "--all", "-n", nsA, "--wait=true", "--timeout=60s") })
	applyYAML(t, nsA, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: big
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"multiNode":{"nodes":2}}'}
spec: {model: Qwen/Qwen3-8B, replicas: 1, gpusPerReplica: 16}
`)
	var leader string
	testenv.Eventually(t, 3*time.Minute, "big Ready, its group of 2 joined", func() error {
		i, says := isvcSays(t, nsA, "big")
		if i == nil || i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 1 {
			return fmt.Errorf("%s", says)
		}
		for _, p := range groupPods(t, nsA, "big") {
			if p.Labels[kinds.LWSWorkerLabel] == "0" {
				leader = p.Status.PodIP
			}
		}
		if leader == "" {
			return fmt.Errorf("no leader IP")
		}
		return nil
	})
	applyYAML(t, nsB, `apiVersion: v1
kind: Pod
metadata: {name: stranger}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.11.0
    command: [/bin/sh, -c]
    args: ["bash /vllm-workspace/examples/online_serving/multi-node-serving.sh worker --ray_address=`+leader+` --ray_init_timeout=60"]
    resources: {limits: {nvidia.com/gpu: 1}}
`)
	t.Cleanup(func() { env.Kubectl(t, "delete", "pod", "-n", nsB, "stranger", "--wait=false") })
	var log string
	testenv.Eventually(t, time.Minute, "the stranger's worker joined or was refused", func() error {
		out, _, err := env.Cluster.Kubectl(testenv.Ctx(t, time.Minute), "logs", "-n", nsB, "stranger")
		if err != nil {
			return err
		}
		if log = out; !strings.Contains(out, "Ray runtime started.") && !strings.Contains(out, "Unable to connect to GCS") {
			return fmt.Errorf("log so far: %q", out)
		}
		return nil
	})
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "Ray runtime started.") || strings.Contains(line, "Unable to connect to GCS") {
			t.Logf("%s/stranger: %s", nsB, line)
		}
	}
	if strings.Contains(log, "Ray runtime started.") || !strings.Contains(log, "Unable to connect to GCS at "+leader+":6379") {
		t.Fatalf("a pod of tenant namespace %s joined %s's Ray head at %s:6379", nsB, nsA, leader)
	}
}
