package e2e

// The rows of the runbook's table beyond the first walk: pods queued by a gate, the scheduler's
// other filters, an unbound cache claim, repeated evictions; each reason as `kubectl get isvc`
// shows it, the time from its cause, and the status history that outlives the Events.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// historyOf is status.history's "Phase/Reason" list, oldest first.
func historyOf(t *testing.T, ns, name string) []string {
	t.Helper()
	i, err := env.ISVC(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range i.Status.History {
		out = append(out, string(r.Phase)+"/"+r.Reason)
	}
	return out
}

// TestWaitingForAdmission: pods held by a scheduling gate (added here by a
// MutatingAdmissionPolicy, as Kueue's webhook adds its own) make the model Progressing with
// the gate and the queue named, never Failed; lifting the gate makes it Ready.
func TestWaitingForAdmission(t *testing.T) {
	ns := env.Namespace(t)
	mutatePods(t, ns, "hold-"+ns, `patchType: ApplyConfiguration
applyConfiguration:
  expression: 'Object{spec: Object.spec{schedulingGates: [Object.spec.schedulingGates{name: "example.com/admission"}]}}'`,
		func(p *corev1.Pod) bool { return len(p.Spec.SchedulingGates) > 0 })
	statuses := recordStatuses(t, ns)
	start := time.Now()
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: queued}
spec: {model: m, replicas: 2, gpusPerReplica: 1, queueName: team-a}
`)
	i := waitReason(t, ns, "queued", "WaitingForAdmission", 90*time.Second)
	t.Logf("WaitingForAdmission %s after the create:\n%s\n%s", time.Since(start).Round(100*time.Millisecond), getRow(t, ns, "queued"), readyMessage(i))
	if i.Status.Phase != crd.PhaseProgressing || !strings.Contains(readyMessage(i), "held by scheduling gates example.com/admission (LocalQueue team-a)") {
		t.Fatalf("phase %s, message %q", i.Status.Phase, readyMessage(i))
	}
	writesSettle(t)

	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ai.example.com/inferenceservice=queued"})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods: %v %d", err, len(pods.Items))
	}
	admitted := time.Now()
	for _, p := range pods.Items {
		if _, err := env.Kube.CoreV1().Pods(ns).Patch(context.Background(), p.Name, types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.WaitPhase(t, ns, "queued", crd.PhaseReady, 2*time.Minute)
	t.Logf("Ready %s after the gates were lifted: %s; history %v", time.Since(admitted).Round(100*time.Millisecond), getRow(t, ns, "queued"), historyOf(t, ns, "queued"))
	if f := statuses.failed("queued", "-"); f != nil {
		t.Fatalf("a queued model was reported Failed: %s/%s: %s", f.Status.Phase, f.Status.Reason, readyMessage(f))
	}
	if h := historyOf(t, ns, "queued"); strings.Join(h, " ") != "Progressing/WaitingForAdmission Ready/Available" {
		t.Fatalf("history %v", h)
	}
}

// TestUntoleratedTaint: every node tainted (as a GPU health check taints a sick node) makes the
// model Failed with the scheduler's counts; a failing model makes no writes at rest; removing
// the taint makes it Ready, and the history keeps both after the Events.
func TestUntoleratedTaint(t *testing.T) {
	ns := env.Namespace(t)
	env.Kubectl(t, "taint", "nodes", "--all", "gpu.example.com/health=failed:NoSchedule")
	tainted := true
	untaint := func() {
		if tainted {
			env.Kubectl(t, "taint", "nodes", "--all", "gpu.example.com/health-")
			tainted = false
		}
	}
	t.Cleanup(untaint)
	start := time.Now()
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: tainted}
spec: {model: m, replicas: 1, gpusPerReplica: 1}
`)
	i := waitReason(t, ns, "tainted", "UntoleratedTaint", 90*time.Second)
	t.Logf("UntoleratedTaint %s after the create:\n%s\n%s", time.Since(start).Round(100*time.Millisecond), getRow(t, ns, "tainted"), readyMessage(i))
	// The taint named from the nodes, and since it is a health check's, not to be tolerated.
	if i.Status.Phase != crd.PhaseFailed || !strings.Contains(readyMessage(i), "4 node(s) had untolerated taint") ||
		!strings.Contains(readyMessage(i), "gpu.example.com/health=failed:NoSchedule (4 node(s)): a GPU health check's taint; heal or replace the nodes, do not tolerate it") {
		t.Fatalf("phase %s, message %q", i.Status.Phase, readyMessage(i))
	}
	before, _ := env.op.Writes()
	after := writesSettle(t)
	t.Logf("writes while failing, then at rest: %v -> %v", before, after)

	untaint()
	fixed := time.Now()
	env.WaitPhase(t, ns, "tainted", crd.PhaseReady, 2*time.Minute)
	t.Logf("Ready %s after the taint was removed; history %v", time.Since(fixed).Round(100*time.Millisecond), historyOf(t, ns, "tainted"))
	if h := historyOf(t, ns, "tainted"); strings.Join(h, " ") != "Failed/UntoleratedTaint Ready/Available" {
		t.Fatalf("history %v", h)
	}
	out := env.Kubectl(t, "get", "isvc", "-n", ns, "tainted", "-o", "jsonpath={.status.history}")
	var recs []crd.DiagnosisRecord
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 2 || !strings.Contains(recs[0].Message, "untolerated taint") {
		t.Fatalf("kubectl reads the history as %s (%v)", out, err)
	}
}

// TestCacheClaimUnbound: a model whose weights cache claim (spec.cache) cannot bind is named so,
// not "unschedulable".
func TestCacheClaimUnbound(t *testing.T) {
	ns := modelNamespace(t)
	w := useWebhookCRD(t)
	applyYAML(t, ns, `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: weights}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: no-such-class
  resources: {requests: {storage: 20Gi}}
`)
	start := time.Now()
	f := filepath.Join(t.TempDir(), "isvc.yaml")
	if err := os.WriteFile(f, []byte("apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: unbound}\nspec:\n  baseModel: m\n  replicas: 1\n  cache: {claimName: weights}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	i := waitReason(t, ns, "unbound", "VolumeClaimUnbound", 90*time.Second)
	t.Logf("VolumeClaimUnbound %s after the create:\n%s\n%s", time.Since(start).Round(100*time.Millisecond), getRow(t, ns, "unbound"), readyMessage(i))
	if i.Status.Phase != crd.PhaseFailed || !strings.Contains(readyMessage(i), "unbound immediate PersistentVolumeClaims") {
		t.Fatalf("phase %s, message %q", i.Status.Phase, readyMessage(i))
	}
}

// TestFrequentEviction: the model's pods evicted by their node three times within the hour is a
// cause (the node, its pressure and the QoS advice named) while the replacements serve: Ready
// stays True, Progressing False; one eviction is not (TestEvictedPodDoesNotDecide).
func TestFrequentEviction(t *testing.T) {
	ns := env.Namespace(t)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: evicted}
spec: {model: m, replicas: 3, gpusPerReplica: 1}
`)
	env.WaitPhase(t, ns, "evicted", crd.PhaseReady, 2*time.Minute)
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ai.example.com/inferenceservice=evicted"})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("pods: %v %d", err, len(pods.Items))
	}
	start := time.Now()
	for _, p := range pods.Items {
		env.Kubectl(t, "annotate", "pod", "-n", ns, p.Name, "kubelet.fake/behavior=evicted")
	}
	var got *crd.InferenceService
	testenv.Eventually(t, 2*time.Minute, "FrequentEviction while the replacements serve", func() error {
		i, err := env.ISVC(ns, "evicted")
		if err != nil {
			return err
		}
		if i.Status.Reason != "FrequentEviction" || i.Status.ReadyReplicas < 3 {
			return fmt.Errorf("%s/%s %d ready", i.Status.Phase, i.Status.Reason, i.Status.ReadyReplicas)
		}
		got = i
		return nil
	})
	var prog, ready string
	for _, c := range got.Status.Conditions {
		switch c.Type {
		case crd.ConditionProgressing:
			prog = string(c.Status) + " " + c.Message
		case crd.ConditionReady:
			ready = string(c.Status)
		}
	}
	t.Logf("FrequentEviction %s after the evictions:\n%s\nProgressing %s", time.Since(start).Round(100*time.Millisecond), getRow(t, ns, "evicted"), prog)
	for _, want := range []string{"False 3 pods of the current revision evicted", "(MemoryPressure)", "on node fake-node-", "QoS Burstable"} {
		if !strings.Contains(prog, want) {
			t.Fatalf("Progressing lacks %q: %s", want, prog)
		}
	}
	if ready != string(corev1.ConditionTrue) || got.Status.Phase != crd.PhaseProgressing {
		t.Fatalf("Ready %s, phase %s: the replacements serve", ready, got.Status.Phase)
	}
	if n, _ := warningEvents(t, ns, "FrequentEviction"); n != 1 {
		t.Fatalf("%d FrequentEviction Warning Events, want 1", n)
	}
	// Failed while the replacements start (someone must act either way), then Progressing.
	if h := historyOf(t, ns, "evicted"); len(h) == 0 || h[len(h)-1] != "Progressing/FrequentEviction" || len(h) > 2 {
		t.Fatalf("history %v", h)
	}
	writesSettle(t)
}

// TestGPUNodeUnhealthy: the GPUs of the node under a serving pod fail (the fake kubelet's
// kubelet.fake/gpu-fault=ecc: the vLLM process dies of an uncorrectable ECC error, every restart
// fails the same way, and the device plugin's allocatable drops to 0): the isvc says GPUError
// with the node named and its evidence, not the model's crash loop; the node healed, the next
// restart serves and the model is Ready again.
func TestGPUNodeUnhealthy(t *testing.T) {
	ns := env.Namespace(t)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: sicknode}
spec: {model: m, replicas: 1, gpusPerReplica: 1}
`)
	env.WaitPhase(t, ns, "sicknode", crd.PhaseReady, 2*time.Minute)
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ai.example.com/inferenceservice=sicknode"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods: %v %d", err, len(pods.Items))
	}
	node := pods.Items[0].Spec.NodeName
	healed := false
	heal := func() {
		if !healed {
			env.Kubectl(t, "annotate", "node", node, "kubelet.fake/gpu-fault-")
			healed = true
		}
	}
	t.Cleanup(heal)
	start := time.Now()
	env.Kubectl(t, "annotate", "node", node, "--overwrite", "kubelet.fake/gpu-fault=ecc")
	i := waitReason(t, ns, "sicknode", "GPUError", 2*time.Minute)
	t.Logf("GPUError %s after the node's GPUs failed:\n%s\n%s", time.Since(start).Round(100*time.Millisecond), getRow(t, ns, "sicknode"), readyMessage(i))
	msg := readyMessage(i)
	if i.Status.Phase != crd.PhaseFailed || !strings.Contains(msg, "on node "+node+":") ||
		!strings.Contains(msg, "allocatable 0 of 8") && !strings.Contains(msg, "uncorrectable ECC error") {
		t.Fatalf("phase %s, message %q", i.Status.Phase, msg)
	}
	writesSettle(t)

	fixed := time.Now()
	heal()
	env.WaitPhase(t, ns, "sicknode", crd.PhaseReady, 3*time.Minute)
	t.Logf("Ready %s after the node healed; history %v", time.Since(fixed).Round(100*time.Millisecond), historyOf(t, ns, "sicknode"))
}

// TestGPUFragmented: every node runs another workload's pod of 6 of its 8 GPUs, so 8 GPUs are
// free in the cluster and 2 on each node: a model of 4 GPUs a replica is GPUFragmented with the
// counts, not InsufficientGPU; once the other workload goes it is Ready.
func TestGPUFragmented(t *testing.T) {
	ns := env.Namespace(t)
	nodes, err := env.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: training}
spec:
  replicas: %d
  selector: {matchLabels: {app: training}}
  template:
    metadata: {labels: {app: training}}
    spec:
      containers:
      - name: trainer
        image: kubelet.fake/ready
        resources: {requests: {nvidia.com/gpu: "6"}, limits: {nvidia.com/gpu: "6"}}
`, len(nodes.Items)))
	testenv.Eventually(t, time.Minute, "one 6-GPU training pod on every node", func() error {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "training", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if int(d.Status.ReadyReplicas) != len(nodes.Items) {
			return fmt.Errorf("%d ready", d.Status.ReadyReplicas)
		}
		return nil
	})
	start := time.Now()
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: frag}
spec: {model: m, replicas: 1, gpusPerReplica: 4}
`)
	i := waitReason(t, ns, "frag", "GPUFragmented", 90*time.Second)
	t.Logf("GPUFragmented %s after the create:\n%s\n%s", time.Since(start).Round(100*time.Millisecond), getRow(t, ns, "frag"), readyMessage(i))
	// The survey counts every workload's GPUs: another test's pod still terminating may hold one.
	want := "GPUs free in the cluster but at most 2 on one node"
	if i.Status.Phase != crd.PhaseFailed || !strings.Contains(readyMessage(i), want) || !strings.Contains(readyMessage(i), "Insufficient nvidia.com/gpu") {
		t.Fatalf("phase %s, message %q, want %q", i.Status.Phase, readyMessage(i), want)
	}
	writesSettle(t)
	freed := time.Now()
	env.Kubectl(t, "scale", "deployment", "-n", ns, "training", "--replicas=0")
	env.WaitPhase(t, ns, "frag", crd.PhaseReady, 2*time.Minute)
	t.Logf("Ready %s after the training pods went; history %v", time.Since(freed).Round(100*time.Millisecond), historyOf(t, ns, "frag"))
}

// TestNodeSelectorMismatch: an admission policy (as a Kueue ResourceFlavor's node labels or a
// platform policy would) gives the model's pods a node selector no node matches: the isvc says
// NodeSelectorMismatch with the scheduler's counts.
func TestNodeSelectorMismatch(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	mutatePods(t, ns, "select-"+ns, `patchType: JSONPatch
jsonPatch:
  expression: '[JSONPatch{op: "add", path: "/spec/nodeSelector", value: {"nvidia.com/gpu.product": "NVIDIA-H200"}}]'`,
		func(p *corev1.Pod) bool { return len(p.Spec.NodeSelector) > 0 })
	start := time.Now()
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: h200}
spec: {model: m, replicas: 1, gpusPerReplica: 1}
`)
	i := waitReason(t, ns, "h200", "NodeSelectorMismatch", 90*time.Second)
	t.Logf("NodeSelectorMismatch %s after the create:\n%s\n%s", time.Since(start).Round(100*time.Millisecond), getRow(t, ns, "h200"), readyMessage(i))
	if i.Status.Phase != crd.PhaseFailed || !strings.Contains(readyMessage(i), "node(s) didn't match Pod's node affinity/selector") {
		t.Fatalf("phase %s, message %q", i.Status.Phase, readyMessage(i))
	}
}

// mutatePods makes every pod created in ns go through mutation (one entry of a
// MutatingAdmissionPolicy's mutations, as YAML) under a policy and binding named name, scoped to
// ns and removed when the test ends. A policy takes effect once the API server's policy cache
// has it: it returns when a dry-run pod comes back with applied true.
func mutatePods(t *testing.T, ns, name, mutation string, applied func(*corev1.Pod) bool) {
	t.Helper()
	applyYAML(t, "", fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - %[3]s
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[2]s}}
`, name, ns, strings.ReplaceAll(mutation, "\n", "\n    ")))
	t.Cleanup(func() {
		env.Kubectl(t, "delete", "mutatingadmissionpolicybinding,mutatingadmissionpolicy", name, "--ignore-not-found")
	})
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	testenv.Eventually(t, 30*time.Second, "the admission policy "+name+" in effect", func() error {
		p, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if !applied(p) {
			return fmt.Errorf("a dry-run pod is created unchanged")
		}
		return nil
	})
}
