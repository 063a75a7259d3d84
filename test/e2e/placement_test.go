package e2e

// Placement and identity of the model's pods (issue 51, item 2): a model on a tainted, labelled
// GPU pool, with a private image, its pull secret and its own ServiceAccount; each missing
// piece named on the isvc in the words of the part that refused it, and the field to set.

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// The GPU pool this test makes of two of the cluster's four nodes, and the local cluster's
// private registry and its account (test/localcluster/README.md, "A private registry").
const (
	poolLabel       = "pool.example.com/gpu"
	poolValue       = "l4"
	poolTaint       = "nvidia.com/gpu=present:NoSchedule"
	privateImage    = "registry.private.test/org/vllm-openai:v1"
	privateRegistry = "registry.private.test"
)

var poolNodes = []string{"fake-node-2", "fake-node-3"}

// gpuPool labels and taints poolNodes until the test ends; cache is kubectl's discovery cache
// flag (the v1beta1 install's own, so the suite's cache never learns v1beta1).
func gpuPool(t *testing.T, cache string) {
	t.Helper()
	for _, n := range poolNodes {
		env.Kubectl(t, cache, "label", "node", n, poolLabel+"="+poolValue, "--overwrite")
		env.Kubectl(t, cache, "taint", "node", n, poolTaint, "--overwrite")
	}
	t.Cleanup(func() {
		for _, n := range poolNodes {
			env.Kubectl(t, cache, "taint", "node", n, "nvidia.com/gpu:NoSchedule-")
			env.Kubectl(t, cache, "label", "node", n, poolLabel+"-")
		}
	})
}

// placedModel is the isvc in v1beta1 with the given extra spec lines.
func placedModel(name, extra string) string {
	return `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: ` + name + `}
spec:
  baseModel: m
  replicas: 1
  gpusPerReplica: 1
  image: ` + privateImage + `
  serviceAccountName: model-reader
` + extra
}

const (
	poolSelector   = "  nodeSelector: {" + poolLabel + ": " + poolValue + "}\n"
	poolToleration = "  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
	pullSecret     = "  imagePullSecrets: [{name: regcred}]\n"
	podMeta        = "  podMetadata: {labels: {team: search}, annotations: {example.com/cost-center: \"42\"}}\n"
)

// waitMessage waits for the isvc's reason and a Ready message with every one of want.
func waitMessage(t *testing.T, ns, name, reason string, want ...string) *crd.InferenceService {
	t.Helper()
	var got *crd.InferenceService
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%s/%s %s naming %q", ns, name, reason, want), func() error {
		i, err := env.ISVC(ns, name)
		if err != nil {
			return err
		}
		if i.Status.Reason != reason {
			return fmt.Errorf("phase %q reason %q: %s", i.Status.Phase, i.Status.Reason, readyMessage(i))
		}
		for _, w := range want {
			if !strings.Contains(readyMessage(i), w) {
				return fmt.Errorf("message lacks %q: %s", w, readyMessage(i))
			}
		}
		got = i
		return nil
	})
	return got
}

func deploymentOf(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPlacement: the model's ServiceAccount missing is named in the ReplicaSet controller's
// words; created, the pods selecting the tainted pool are named with the taint and
// spec.tolerations; tolerated, the private image is refused in containerd's words; with its
// pull secret the model becomes Ready on the pool, as its own account, with its labels and
// without an API token. A hand edit of the tolerations is reverted; fields removed from the
// spec leave the template. Another tenant cannot use podMetadata to join this model's
// selectors.
func TestPlacement(t *testing.T) {
	ns := env.Namespace(t)
	w := useWebhookCRD(t)
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	gpuPool(t, w.cache)
	// Every kubectl of the test reads discovery through w.cache: the suite's cache must not
	// learn v1beta1, which is gone once the test ends.
	kubectl := func(args ...string) string { return env.Kubectl(t, append([]string{w.cache}, args...)...) }
	apply := func(extra string) { applyYAMLWith(t, w.cache, ns, placedModel("placed", extra)) }

	start := time.Now()
	apply(poolSelector + podMeta)
	i := waitMessage(t, ns, "placed", "PodCreationRefused",
		`error looking up service account `+ns+`/model-reader: serviceaccount "model-reader" not found`, "spec.serviceAccountName")
	t.Logf("without its ServiceAccount, %s after the create:\n%s", time.Since(start).Round(100*time.Millisecond), readyMessage(i))

	kubectl("create", "serviceaccount", "-n", ns, "model-reader")
	i = waitMessage(t, ns, "placed", "UntoleratedTaint", "had untolerated taint(s)",
		"nvidia.com/gpu=present:NoSchedule (2 node(s))", "spec.tolerations {key: nvidia.com/gpu, operator: Equal, value: \"present\", effect: NoSchedule}")
	t.Logf("without the toleration:\n%s", readyMessage(i))
	if i.Status.Phase != crd.PhaseFailed {
		t.Fatalf("phase %s", i.Status.Phase)
	}
	pending := modelPods(t, ns, "placed")
	gen := deploymentOf(t, ns, "placed").Generation

	apply(poolSelector + poolToleration + podMeta)
	i = waitMessage(t, ns, "placed", "ImagePullFailed", "pull access denied, repository does not exist or may require authorization")
	t.Logf("tolerated, without the pull secret:\n%s", readyMessage(i))
	if d := deploymentOf(t, ns, "placed"); d.Generation == gen || len(d.Spec.Template.Spec.Tolerations) != 1 {
		t.Fatalf("the tolerations' change did not roll the template: generation %d -> %d, %+v", gen, d.Generation, d.Spec.Template.Spec.Tolerations)
	}
	for _, p := range modelPods(t, ns, "placed") {
		if slices.ContainsFunc(pending, func(o corev1.Pod) bool { return o.UID == p.UID }) && p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			t.Fatalf("pod %s of the untolerating template was scheduled", p.Name)
		}
	}

	auth := base64.StdEncoding.EncodeToString([]byte("model-puller:pull-token"))
	applyYAMLWith(t, w.cache, ns, `apiVersion: v1
kind: Secret
metadata: {name: regcred}
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: `+base64.StdEncoding.EncodeToString([]byte(`{"auths":{"`+privateRegistry+`":{"auth":"`+auth+`"}}}`))+"\n")
	apply(poolSelector + poolToleration + pullSecret + podMeta)
	ready := time.Now()
	env.WaitPhase(t, ns, "placed", crd.PhaseReady, 3*time.Minute)
	t.Logf("Ready %s after the pull secret: %s; history %v", time.Since(ready).Round(100*time.Millisecond), strings.TrimSpace(kubectl("get", "isvc", "-n", ns, "placed", "--no-headers")), historyOf(t, ns, "placed"))
	var serving *corev1.Pod
	for _, p := range modelPods(t, ns, "placed") {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			serving = &p
		}
	}
	if serving == nil {
		t.Fatal("no running pod")
	}
	ps := serving.Spec
	if !slices.Contains(poolNodes, ps.NodeName) || ps.ServiceAccountName != "model-reader" || serving.Labels["team"] != "search" ||
		serving.Annotations["example.com/cost-center"] != "42" || ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken ||
		len(ps.ImagePullSecrets) != 1 || ps.NodeSelector[poolLabel] != poolValue {
		t.Fatalf("pod %s on %s: %+v labels %v annotations %v", serving.Name, ps.NodeName, ps, serving.Labels, serving.Annotations)
	}
	for _, v := range ps.Volumes {
		if v.Projected != nil {
			t.Fatalf("a ServiceAccount token is mounted (%s): vLLM never calls the API server", v.Name)
		}
	}
	writesSettle(t)

	// A hand edit of an owned field is reverted; a platform's own node selector key stays.
	kubectl("patch", "deployment", "-n", ns, "placed", "--type=json", "-p",
		`[{"op":"replace","path":"/spec/template/spec/tolerations","value":[{"key":"other","operator":"Exists"}]},{"op":"add","path":"/spec/template/spec/nodeSelector/platform.example.com~1zone","value":"a"}]`)
	testenv.Eventually(t, time.Minute, "the tolerations restored", func() error {
		d := deploymentOf(t, ns, "placed")
		if ts := d.Spec.Template.Spec.Tolerations; len(ts) != 1 || ts[0].Key != "nvidia.com/gpu" {
			return fmt.Errorf("tolerations %+v", ts)
		}
		if d.Spec.Template.Spec.NodeSelector["platform.example.com/zone"] != "a" {
			return fmt.Errorf("the platform's node selector key was removed: %v", d.Spec.Template.Spec.NodeSelector)
		}
		return nil
	})
	kubectl("patch", "deployment", "-n", ns, "placed", "--type=json", "-p", `[{"op":"remove","path":"/spec/template/spec/nodeSelector/platform.example.com~1zone"}]`)

	// Fields removed from the spec leave the template: the labels, annotations and node
	// selector the operator set go; what it owns still (tolerations, pull secret) stays.
	apply(poolToleration + pullSecret)
	testenv.Eventually(t, time.Minute, "the removed fields gone from the template", func() error {
		d := deploymentOf(t, ns, "placed")
		tpl := d.Spec.Template
		if tpl.Labels["team"] != "" || tpl.Annotations["example.com/cost-center"] != "" || len(tpl.Spec.NodeSelector) != 0 {
			return fmt.Errorf("labels %v annotations %v nodeSelector %v", tpl.Labels, tpl.Annotations, tpl.Spec.NodeSelector)
		}
		if len(tpl.Spec.Tolerations) != 1 || len(tpl.Spec.ImagePullSecrets) != 1 || tpl.Spec.ServiceAccountName != "model-reader" {
			return fmt.Errorf("owned fields lost: %+v", tpl.Spec)
		}
		if r := d.Annotations["ai.example.com/placement"]; r != "tolerations,imagePullSecrets,serviceAccountName" {
			return fmt.Errorf("placement record %q", r)
		}
		return nil
	})
	env.WaitPhase(t, ns, "placed", crd.PhaseReady, 3*time.Minute)

	// Another tenant: labels that would put its pods behind this model's Service, NetworkPolicy
	// or PDB, and annotations of the operator's, are refused by the API server.
	tenant := env.CreateNamespace(t, ns+"-tenant")
	for _, c := range []struct{ meta, want string }{
		{`{labels: {ai.example.com/inferenceservice: placed}}`, crd.RulePodLabelsReservedMsg},
		{`{labels: {app.kubernetes.io/instance: placed}}`, crd.RulePodLabelsReservedMsg},
		{`{annotations: {ai.example.com/env: HF_TOKEN}}`, crd.RulePodAnnotationsOwnMsg},
	} {
		out, err := applyRefusable(t, tenant, placedModel("escape", "  podMetadata: "+c.meta+"\n"), w.cache)
		if err == nil || !strings.Contains(out, c.want) {
			t.Fatalf("podMetadata %s: err %v, output %s", c.meta, err, out)
		}
	}
	out, err := applyRefusable(t, tenant, placedModel("escape", "  tolerations: [{key: nvidia.com/gpu, operator: Exists, value: x}]\n"), w.cache)
	if err == nil || !strings.Contains(out, crd.RuleTolerationExistsMsg) {
		t.Fatalf("a toleration the pod would be refused with: err %v, output %s", err, out)
	}
	t.Logf("refused: %s", strings.TrimSpace(out))
}
