package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/walk"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/buildprogress"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

var update = flag.Bool("update", false, "rewrite test/e2e/testdata/plugin/ from the plugin's output")

// buildPlugin compiles kubectl-isvc, a module of its own, into a directory of its own, for
// PATH, with kubectl_complete-isvc beside it, as make plugin leaves them in bin/.
func buildPlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(env.Root, "controller", "walk", "kubectl-isvc")
	if err := buildprogress.Build(testenv.Ctx(t, 10*time.Minute), "kubectl-isvc", src,
		buildprogress.Env("GOWORK=off"), os.Stderr, "-o", filepath.Join(dir, "kubectl-isvc"), "."); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(src, "kubectl_complete-isvc"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-isvc"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// plugin runs the built plugin directly with the admin kubeconfig.
func plugin(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(testenv.Ctx(t, time.Minute), filepath.Join(dir, "kubectl-isvc"), append(args, "--kubeconfig="+env.Cluster.KubeconfigPath())...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl-isvc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Volatile parts of the plugin's output: generated names, ages, times, counts that move.
var (
	maskPod   = regexp.MustCompile(`\b(big|huge|crash|healthy)-[bcdfghjklmnpqrstvwxz2456789]{6,10}-[bcdfghjklmnpqrstvwxz2456789]{5}`)
	maskRS    = regexp.MustCompile(`\b(big|huge|crash|healthy)-[bcdfghjklmnpqrstvwxz2456789]{6,10}\b`)
	maskUID   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	maskIP    = regexp.MustCompile(`\b127\.\d+\.\d+\.\d+(:\d+)?\b`)
	maskTime  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	maskAge   = regexp.MustCompile(`\b\d+[smhd]\b`)
	maskCount = regexp.MustCompile(`\b\d+ restarts\b|\bx\d+\b`)
	// The failing models' queue in list is the HPA's last reading, if it made one yet.
	maskQueue = regexp.MustCompile(`(?m)^(NS-(big|crash|huge) .* )\S+/(\S+)$`)
	maskSpace = regexp.MustCompile(` {2,}`)
	// The HPA controller syncs every 15 s: whether a failing model's HPA has read anything yet
	// is timing; the healthy model's row is kept whole.
	maskHPA = regexp.MustCompile(`(?m)^(..) HPA( +)(big|huge|crash) .*$`)
	// A crash-looping container is exited, backing off or restarted, as the moment falls; its
	// log lines carry the run's pid and time.
	maskCrash = regexp.MustCompile(`container vllm: (restarted after a crash|CrashLoopBackOff|exited)|\((previous run|current, just exited)|pid=\d+|\d\d-\d\d \d\d:\d\d:\d\d`)
)

func mask(out string, names map[string]string) string {
	for from, to := range names {
		out = strings.ReplaceAll(out, from, to)
	}
	out = maskPod.ReplaceAllString(out, "$1-RS-POD")
	out = maskRS.ReplaceAllString(out, "$1-RS")
	out = maskUID.ReplaceAllString(out, "UID")
	out = maskIP.ReplaceAllString(out, "IP")
	out = maskTime.ReplaceAllString(out, "TIME")
	out = maskHPA.ReplaceAllString(out, "$1 HPA$2$3 (masked: the HPA controller's timing)")
	out = maskCrash.ReplaceAllStringFunc(out, func(s string) string {
		switch {
		case strings.HasPrefix(s, "container"):
			return "container vllm: STATE"
		case strings.HasPrefix(s, "("):
			return "(RUN"
		case strings.HasPrefix(s, "pid="):
			return "pid=PID"
		}
		return "LOGTIME"
	})
	out = maskAge.ReplaceAllString(out, "AGE")
	out = maskCount.ReplaceAllStringFunc(out, func(s string) string {
		if strings.HasPrefix(s, "x") {
			return "xN"
		}
		return "N restarts"
	})
	// Column widths follow the masked names' lengths: compare words, not alignment.
	out = maskSpace.ReplaceAllString(out, "  ")
	return maskQueue.ReplaceAllString(out, "${1}Q/$3")
}

// golden compares got with testdata/plugin/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "plugin", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (run with -update to accept):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// TestPluginWhy: `kubectl isvc why` on the local cluster for a quota refusal, GPUs no node has,
// a crash loop and a healthy model, each in its own namespace, compared with golden files;
// `--output json` and `list` over the same models; once through real kubectl and PATH.
func TestPluginWhy(t *testing.T) {
	dir := buildPlugin(t)
	// The healthy model's HPA reads its queue, as in a default install.
	startMetricsAdapter(t)
	cases := []struct {
		name, reason, manifest string
		quota                  bool
	}{
		{"big", "QuotaExceeded", `{model: Qwen/Qwen3-32B, replicas: 3, gpusPerReplica: 4}`, true},
		{"huge", "InsufficientGPU", `{model: deepseek-ai/DeepSeek-V3, replicas: 1, gpusPerReplica: 16}`, false},
		{"crash", "CrashLoopBackOff", `{model: m, replicas: 1, gpusPerReplica: 1, image: "kubelet.fake/crashloop:v1"}`, false},
		{"healthy", "", `{model: Qwen/Qwen3-0.6B, replicas: 1, gpusPerReplica: 1}`, false},
	}
	names := map[string]string{}
	nss := map[string]string{}
	for _, c := range cases {
		ns := env.CreateNamespace(t, "plugin-"+c.name)
		nss[c.name] = ns
		names[ns] = "NS-" + c.name
		if c.quota {
			quota := &corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: ns},
				Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("8")}},
			}
			if _, err := env.Kube.CoreV1().ResourceQuotas(ns).Create(context.Background(), quota, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		applyYAML(t, ns, fmt.Sprintf("apiVersion: ai.example.com/v1alpha1\nkind: InferenceService\nmetadata: {name: %s}\nspec: %s\n", c.name, c.manifest))
	}
	for _, c := range cases {
		ns := nss[c.name]
		switch c.name {
		case "big":
			// The quota admits two of the three pods: once they serve, the numbers stop moving.
			testenv.Eventually(t, 2*time.Minute, "big: QuotaExceeded with 2 ready", func() error {
				i, err := env.ISVC(ns, c.name)
				if err != nil {
					return err
				}
				if i.Status.Reason != c.reason || i.Status.ReadyReplicas != 2 {
					return fmt.Errorf("%s/%s, %d ready", i.Status.Phase, i.Status.Reason, i.Status.ReadyReplicas)
				}
				return nil
			})
		case "healthy":
			env.WaitPhase(t, ns, c.name, crd.PhaseReady, 2*time.Minute)
		default:
			waitReason(t, ns, c.name, c.reason, 2*time.Minute)
		}
		switch c.name {
		case "crash":
			// The previous run's log exists once the kubelet restarted the container.
			testenv.Eventually(t, time.Minute, "a restart", func() error {
				if n := env.Restarts(t, ns); n < 1 {
					return fmt.Errorf("%d restarts", n)
				}
				return nil
			})
		case "healthy":
			testenv.Eventually(t, 2*time.Minute, "healthy: the HPA reads the queue", func() error {
				h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), c.name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				active := false
				for _, c := range h.Status.Conditions {
					active = active || c.Type == "ScalingActive" && c.Status == corev1.ConditionTrue
				}
				if !active || len(h.Status.CurrentMetrics) == 0 {
					return fmt.Errorf("conditions %v, metrics %v", h.Status.Conditions, h.Status.CurrentMetrics)
				}
				return nil
			})
		}
		out := plugin(t, dir, "why", c.name, "-n", ns)
		t.Logf("kubectl isvc why %s -n %s:\n%s", c.name, ns, out)
		golden(t, "why-"+c.name+".txt", mask(out, names))

		var r walk.Report
		if err := json.Unmarshal([]byte(plugin(t, dir, "why", c.name, "-n", ns, "-o", "json")), &r); err != nil {
			t.Fatal(err)
		}
		wantMarked := map[string]string{"big": walk.LayerReplicaSet, "huge": walk.LayerPods, "crash": walk.LayerPods, "healthy": ""}[c.name]
		if r.Name != c.name || r.Namespace != ns || r.Marked != wantMarked || r.ISVC.Reason != c.reason {
			t.Errorf("json for %s: name %s/%s marked %q (want %q) reason %q", c.name, r.Namespace, r.Name, r.Marked, wantMarked, r.ISVC.Reason)
		}
		if c.name != "healthy" && (len(r.Causes) == 0 || r.Causes[0].Reason != c.reason) {
			t.Errorf("json for %s: causes %+v, want %s first", c.name, r.Causes, c.reason)
		}
		if c.name == "crash" && (r.Crashed == nil || len(r.Crashed.Log) == 0 || r.Crashed.ExitCode != 1) {
			t.Errorf("json for crash: crashed %+v, want the previous run's exit code 1 and log", r.Crashed)
		}
	}

	// list, across namespaces: the rows of this test's models.
	var rows []string
	for _, l := range strings.Split(plugin(t, dir, "list", "-A"), "\n") {
		if strings.HasPrefix(l, "NAMESPACE") || strings.HasPrefix(l, "plugin-") {
			rows = append(rows, l)
		}
	}
	list := strings.Join(rows, "\n") + "\n"
	t.Logf("kubectl isvc list -A (this test's rows):\n%s", list)
	golden(t, "list.txt", mask(list, names))
	var all struct{ Items []walk.Row } // a List of rows
	if err := json.Unmarshal([]byte(plugin(t, dir, "list", "-A", "-o", "json")), &all); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, r := range all.Items {
		if r.Namespace == nss["big"] && r.Name == "big" && r.GPUsRequested == 12 && r.Reason == "QuotaExceeded" {
			found++
		}
	}
	if found != 1 {
		t.Errorf("list -o json: big's row (12 GPUs requested, QuotaExceeded) not found once in %+v", all)
	}

	// Real kubectl finds the plugin on PATH.
	out, stderr, err := env.Cluster.KubectlEnv(testenv.Ctx(t, time.Minute), []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")},
		"isvc", "why", "big", "-n", nss["big"], "--kubeconfig="+env.Cluster.KubeconfigPath()) // kubectl passes every flag after the plugin's name to it
	if err != nil {
		t.Fatalf("kubectl isvc why: %v %s", err, stderr)
	}
	if !strings.Contains(out, ">> ReplicaSet") || !strings.Contains(out, "exceeded quota: team-a") {
		t.Fatalf("kubectl isvc why big through kubectl:\n%s", out)
	}
	t.Logf("kubectl isvc why big -n %s (real kubectl, the plugin on PATH): %d lines, ReplicaSet marked", nss["big"], strings.Count(out, "\n"))
}

// TestPluginOperatorDown: the plugin tells a leader that holds its Lease (up), one killed
// without releasing it (down once the Lease expired) and one stopped (down: released). The
// operator runs with leader election on its own Lease namespace, watching only an empty one
// (the suite's operator already reconciles the isvc the plugin walks).
func TestPluginOperatorDown(t *testing.T) {
	dir := buildPlugin(t)
	ns := env.Namespace(t)
	watched := env.CreateNamespace(t, "plugin-operator-scope")
	why := func() walk.Operator {
		t.Helper()
		applyYAMLOnce(t, ns)
		var r walk.Report
		if err := json.Unmarshal([]byte(plugin(t, dir, "why", "probe", "-n", ns, "--operator-namespace", ns, "-o", "json")), &r); err != nil {
			t.Fatal(err)
		}
		return r.Operator
	}
	waitOperator := func(state, detail string) {
		t.Helper()
		testenv.Eventually(t, time.Minute, "operator "+state, func() error {
			if o := why(); o.State != state || !strings.Contains(o.Detail, detail) {
				return fmt.Errorf("operator %s: %s", o.State, o.Detail)
			}
			return nil
		})
		t.Logf("operator line: %s", strings.SplitN(plugin(t, dir, "why", "probe", "-n", ns, "--operator-namespace", ns), "\n", 3)[1])
	}
	if o := why(); o.State != "unknown" {
		t.Fatalf("no Lease, no pod: %+v", o)
	}
	start := func() *operator.Process {
		p, err := operator.Start(testenv.Ctx(t, time.Minute), env.Bin, filepath.Join(t.TempDir(), "operator.log"),
			"--kubeconfig="+env.Cluster.KubeconfigPath(), "--namespaces="+watched, "--leader-elect", "--leader-election-namespace="+ns,
			"--leader-election-lease-duration=3s", "--leader-election-renew-deadline=2s", "--leader-election-retry-period=500ms")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Kill() })
		return p
	}
	p := start()
	waitOperator("up", "renewed")
	p.Kill()
	waitOperator("down", "stopped renewing")
	p = start()
	waitOperator("up", "renewed")
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitOperator("down", "released")
}

// applyYAMLOnce creates the isvc the operator-down test walks, if absent.
func applyYAMLOnce(t *testing.T, ns string) {
	t.Helper()
	if _, err := env.ISVC(ns, "probe"); err == nil {
		return
	}
	applyYAML(t, ns, "apiVersion: ai.example.com/v1alpha1\nkind: InferenceService\nmetadata: {name: probe}\nspec: {model: m, replicas: 1}\n")
}

// kserveCRD is KServe's InferenceService as far as names go: group serving.kserve.io, kind
// InferenceService, short name isvc, the same as ours (its schema left open).
const kserveCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: inferenceservices.serving.kserve.io}
spec:
  group: serving.kserve.io
  scope: Namespaced
  names: {kind: InferenceService, listKind: InferenceServiceList, plural: inferenceservices, singular: inferenceservice, shortNames: [isvc]}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestPluginBesideKServe: with KServe's CRD installed next to ours (same kind, same short name)
// and a KServe model of the same name as ours plus one of its own, list, why and real kubectl's
// `kubectl isvc` read ours only. Serial: the CRD is the cluster's, removed at the end, and no
// other test resolves `isvc` while it is there.
func TestPluginBesideKServe(t *testing.T) {
	dir := buildPlugin(t)
	ns := env.Namespace(t)
	kserve := schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"}
	var def unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(kserveCRD), &def.Object); err != nil {
		t.Fatal(err)
	}
	crds := env.Dyn.Resource(crd.CRDResource)
	if _, err := crds.Create(context.Background(), &def, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := crds.Delete(context.Background(), def.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Error(err)
			return
		}
		testenv.Eventually(t, time.Minute, "KServe's CRD gone", func() error {
			if _, err := crds.Get(context.Background(), def.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
	})
	for _, name := range []string{"shared", "kserve-only"} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"predictor": map[string]any{"model": map[string]any{"modelFormat": map[string]any{"name": "sklearn"}}}},
		}}
		testenv.Eventually(t, time.Minute, "KServe's "+name+" created (the CRD established)", func() error {
			_, err := env.Dyn.Resource(kserve).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
			return err
		})
	}
	// Created through the API, not kubectl: no kubectl here reads discovery while KServe's CRD
	// is served, so the suite's shared discovery cache never holds a second isvc.
	if _, err := env.CreateISVC(context.Background(), ns, "shared", map[string]any{"model": "ours", "replicas": int64(1)}); err != nil {
		t.Fatal(err)
	}

	var l struct{ Items []walk.Row }
	if err := json.Unmarshal([]byte(plugin(t, dir, "list", "-n", ns, "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Name != "shared" || l.Items[0].Model != "ours" {
		t.Errorf("list: %+v, want ours only", l.Items)
	}
	if out := plugin(t, dir, "why", "shared", "-n", ns); !strings.Contains(out, "(ours)") {
		t.Errorf("why shared, not ours:\n%s", out)
	}
	out, err := exec.CommandContext(testenv.Ctx(t, time.Minute), filepath.Join(dir, "kubectl-isvc"), "why", "kserve-only", "-n", ns,
		"--kubeconfig="+env.Cluster.KubeconfigPath()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not found") {
		t.Errorf("why kserve-only: %v\n%s\nwant not found: KServe's is not ours", err, out)
	}
	// Real kubectl hands `isvc` to the plugin before any resource lookup.
	stdout, stderr, err := env.Cluster.KubectlEnv(testenv.Ctx(t, time.Minute), []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")},
		"isvc", "list", "-n", ns, "--kubeconfig="+env.Cluster.KubeconfigPath())
	if err != nil || !strings.Contains(stdout, "shared") || !strings.Contains(stdout, "ours") || strings.Contains(stdout, "kserve-only") {
		t.Errorf("kubectl isvc list: %v %s\n%s", err, stderr, stdout)
	}
	t.Logf("kubectl isvc list -n %s beside KServe's CRD:\n%s", ns, stdout)

	// kubectl's own completion (1.26 and later) runs kubectl_complete-isvc from the PATH, which
	// asks the plugin: `why`'s names are ours.
	stdout, stderr, err = env.Cluster.KubectlEnv(testenv.Ctx(t, time.Minute), []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")},
		"__complete", "isvc", "why", "-n", ns, "--kubeconfig="+env.Cluster.KubeconfigPath(), "")
	if err != nil || !strings.HasPrefix(stdout, "shared\n:") {
		t.Errorf("kubectl __complete isvc why: %v %s\n%q, want shared alone", err, stderr, stdout)
	}
	t.Logf("kubectl __complete isvc why -n %s '': %q", ns, stdout)
}
