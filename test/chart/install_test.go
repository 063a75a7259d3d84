package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// The chart's defaults: where it installs the operator, and the release name the test uses.
const (
	systemNamespace = testenv.SystemNamespace
	release         = "isvc-operator"
	crdName         = "inferenceservices.ai.example.com"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// env is the package's cluster, without testenv.Setup's kubectl-applied CRD and RBAC: here the
// chart installs them, and Helm refuses to take over objects another tool created.
var env testenv.Env

// activatorBin is the activator the kubelet runs for operator.ActivatorImage.
var activatorBin string

func TestMain(m *testing.M) {
	os.Exit(testenv.Suite{Name: "chart", Setup: setup, Teardown: env.Teardown,
		Logs: func() string { return "operator logs in " + env.Dir }}.Run(m))
}

// setup builds the operator and the activator, then starts the cluster (the chart installs the
// rest, test by test).
func setup(ctx context.Context) error {
	var err error
	if env.Root, err = cluster.RepoRoot(); err != nil {
		return err
	}
	if env.Dir, err = os.MkdirTemp("", "isvc-chart-"); err != nil {
		return err
	}
	built := make(chan error, 1)
	go func() {
		var err error
		if env.Bin, err = operator.Build(ctx, env.Dir); err == nil {
			activatorBin, err = operator.BuildActivator(ctx, env.Dir)
		}
		built <- err
	}()
	// The chart's pods follow the kubelet's schedule model (the kubelet does not run the
	// operator's image), except the activator's where a test renames its image to
	// operator.ActivatorImage; models run the fake vLLM server, so a model at zero can be woken
	// through the activator (wake_test.go). The activator is built first: --exec-image wants
	// the file when the cluster starts.
	if err = <-built; err == nil {
		env.Cluster, err = cluster.Start(ctx, cluster.Options{ExtraArgs: []string{"--exec-image=" + operator.ActivatorImage + "=" + activatorBin}})
	}
	if err == nil {
		env.Kube, err = env.Cluster.Clientset()
	}
	if err == nil {
		env.Dyn, err = dynamic.NewForConfig(env.Cluster.RESTConfig())
	}
	return err
}

// helmCmd runs helm against the cluster as its admin, logs the command and its output, and
// fails the test on an error.
func helmCmd(t *testing.T, h Helm, args ...string) string {
	t.Helper()
	out, stderr, err := h.Run(testenv.Ctx(t, 4*time.Minute), env.Root, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("$ helm %s\n%s%s", strings.Join(args, " "), out, warnings(stderr))
	return out
}

// warnings drops the loader's notes on the chart's links to manifests/ (files/), which are
// by design, and keeps anything else helm wrote to stderr.
func warnings(stderr string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l != "" && !strings.Contains(l, "found symbolic link in path") {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return ""
	}
	return "stderr:\n" + strings.Join(keep, "\n") + "\n"
}

// upgradedChart copies the chart (its links to manifests/ resolved) as a next release would
// ship it: version 0.1.1 with a changed CRD (one more label), so the upgrade has a CRD change
// to carry.
func upgradedChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "inferenceservice-operator")
	if out, err := exec.Command("cp", "-rL", filepath.Join(env.Root, Dir), dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	edit := func(name, old, new string) {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s has no %q", name, old)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("Chart.yaml", "version: 0.1.0", "version: 0.1.1")
	edit("files/crd-v1beta1.yaml", "  labels:\n", "  labels:\n    example.com/chart-upgrade-test: v2\n")
	return dir
}

// runOperator runs the operator binary as the installed Deployment's pod would run: its args
// (but the listen addresses, which stay on loopback) and its env (the memory limit resolved
// from the container's limit), with the token of the ServiceAccount the chart created. The
// local cluster's kubelet does not run the image, so this process is the operator's pod.
func runOperator(t *testing.T, name string) *operator.Process {
	t.Helper()
	return runOperatorIn(t, systemNamespace, name)
}

// runOperatorIn is runOperator for a release in ns.
func runOperatorIn(t *testing.T, ns, name string) *operator.Process {
	t.Helper()
	ctx := testenv.Ctx(t, time.Minute)
	d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "inferenceservice-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	args := []string{"--kubeconfig=" + saKubeconfigIn(t, ns), "--leader-election-namespace=" + ns}
	webhookAddr, certDir := "", t.TempDir()
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="), strings.HasPrefix(a, "--health-probe-bind-address="):
		case strings.HasPrefix(a, "--webhook-bind-address="):
			// The conversion webhook on loopback too, its certificates in the test's directory.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			webhookAddr = ln.Addr().String()
			ln.Close()
			args = append(args, "--webhook-bind-address="+webhookAddr)
		case strings.HasPrefix(a, "--webhook-cert-dir="):
			args = append(args, "--webhook-cert-dir="+certDir)
		default:
			args = append(args, a)
		}
	}
	var envs []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			envs = append(envs, e.Name+"="+e.Value)
		case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
			envs = append(envs, fmt.Sprintf("%s=%d", e.Name, c.Resources.Limits.Memory().Value()))
		default:
			t.Fatalf("env %s: a source the test does not resolve", e.Name)
		}
	}
	log := filepath.Join(env.Dir, name+".log")
	p, err := operator.StartEnv(ctx, envs, env.Bin, log, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.Exited():
		default:
			p.Kill()
		}
	})
	if err := p.WaitReady(ctx, time.Minute); err != nil {
		t.Fatalf("%s: %v (log %s)", name, err, log)
	}
	t.Logf("operator %s running with %v and %v", name, envs, args[1:])
	if webhookAddr != "" {
		pointConversionAt(t, ns, "https://"+webhookAddr+crd.WebhookPath, filepath.Join(certDir, servingcert.CAFile))
	}
	return p
}

// pointConversionAt sets the CRD's conversion webhook to url, verified with the CA in caFile,
// in place of the chart's Service: the local cluster's API server cannot route a Service (no
// kube-proxy, and a Service's name goes out through this machine's HTTPS proxy), so the
// operator run as the pod serves it on loopback. Before a helm upgrade, unpointConversion puts
// the chart's Service back: Helm's server-side apply would set it next to the URL, which the
// API server refuses.
func pointConversionAt(t *testing.T, ns, url, caFile string) {
	t.Helper()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	patchClientConfig(t, map[string]any{"service": nil, "url": url, "caBundle": ca})
	// The CRD outlives the release (crds.keep): the next test's install applies the chart's
	// Service, which must not meet this URL.
	t.Cleanup(func() { unpointConversion(t, ns) })
	// Conversions answer through it: a v1beta1 object read as v1alpha1 converts whatever else
	// is stored, where a list of an empty store converts nothing and passed while the API server
	// still called the chart's Service, whose name, looked up outside the cluster, reached
	// whatever answers it there (a run saw a certificate for proxy.golang.org).
	probes++
	probeNS := env.CreateNamespace(t, fmt.Sprintf("conversion-probe-%d", probes))
	beta := crd.Resource.GroupResource().WithVersion(crd.VersionV1beta1)
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersionV1beta1.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": "conversion-probe", "namespace": probeNS},
		"spec":     map[string]any{"baseModel": "Qwen/Qwen3-0.6B", "replicas": int64(0)},
	}}
	testenv.Eventually(t, 30*time.Second, "conversions through "+url, func() error {
		if _, err := env.Dyn.Resource(beta).Namespace(probeNS).Create(context.Background(), probe, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		_, err := env.Dyn.Resource(crd.Resource).Namespace(probeNS).Get(context.Background(), "conversion-probe", metav1.GetOptions{})
		return err
	})
	if err := env.Dyn.Resource(beta).Namespace(probeNS).Delete(context.Background(), "conversion-probe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// probes numbers pointConversionAt's probe namespaces: a test may point conversions twice.
var probes int

// unpointConversion puts the chart's webhook Service (of the release in ns) back in the CRD
// (pointConversionAt) and
// gives up the test's ownership of those fields, so the next helm install or upgrade (a
// server-side apply, with the release's namespace) owns them without a conflict.
func unpointConversion(t *testing.T, ns string) {
	t.Helper()
	svc := crd.InClusterWebhook().Service
	patchClientConfig(t, map[string]any{"url": nil, "service": map[string]any{"name": svc.Name, "namespace": ns, "path": *svc.Path, "port": *svc.Port}})
	u, err := env.Dyn.Resource(crdGVR).Get(testenv.Ctx(t, time.Minute), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keep []any
	for _, m := range u.GetManagedFields() {
		if m.Manager != conversionFieldManager {
			keep = append(keep, m)
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"managedFields": keep, "resourceVersion": u.GetResourceVersion()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dyn.Resource(crdGVR).Patch(testenv.Ctx(t, time.Minute), crdName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// conversionFieldManager owns what pointConversionAt and unpointConversion write, until the
// latter gives it up.
const conversionFieldManager = "chart-test-conversion"

func patchClientConfig(t *testing.T, cfg map[string]any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{"webhook": map[string]any{"clientConfig": cfg}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dyn.Resource(crdGVR).Patch(testenv.Ctx(t, time.Minute), crdName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: conversionFieldManager}); err != nil {
		t.Fatal(err)
	}
}

func saKubeconfig(t *testing.T) string {
	t.Helper()
	return saKubeconfigIn(t, systemNamespace)
}

// saKubeconfigIn is a kubeconfig with the token of the operator's ServiceAccount in ns.
func saKubeconfigIn(t *testing.T, ns string) string {
	t.Helper()
	kc, err := env.Cluster.ServiceAccountKubeconfig(testenv.Ctx(t, time.Minute), ns, "inferenceservice-operator")
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// releaseNamespace makes ns as docs/operations.md has a release's namespace made: labelled
// for the restricted Pod Security level (the chart makes no namespace), before helm install -n.
func releaseNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := testenv.Ctx(t, time.Minute)
	_, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	env.Kubectl(t, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted", "--overwrite")
}

// deleteNamespace deletes ns, which helm uninstall leaves, and waits until it is gone: nothing
// of the release holds it.
func deleteNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := testenv.Ctx(t, 3*time.Minute)
	if err := env.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", ns, err)
		return
	}
	testenv.Eventually(t, 2*time.Minute, "namespace "+ns+" deleted", func() error {
		n, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("phase %s, conditions %v", n.Status.Phase, n.Status.Conditions)
	})
}

// adoptCRD is docs/operations.md's step for a release in another namespace than the one whose
// uninstall kept the CRD (crds.keep): Helm adopts an object only when its release annotations
// name the release installing it.
func adoptCRD(t *testing.T, ns string) {
	t.Helper()
	if _, err := env.Dyn.Resource(crdGVR).Get(testenv.Ctx(t, time.Minute), crdName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return
	}
	env.Kubectl(t, "annotate", "crd", crdName, "meta.helm.sh/release-name="+release, "meta.helm.sh/release-namespace="+ns, "--overwrite")
}

// operatorRolledOut: the operator Deployment's current template is rolled out to all its
// replicas, with a ReplicaSet of its own.
func operatorRolledOut(ctx context.Context) (*appsv1.Deployment, error) {
	d, err := env.Kube.AppsV1().Deployments(systemNamespace).Get(ctx, "inferenceservice-operator", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	want := *d.Spec.Replicas
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != want || d.Status.ReadyReplicas != want || d.Status.Replicas != want {
		return nil, fmt.Errorf("generation %d observed %d, replicas %d updated %d ready %d, want %d",
			d.Generation, d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, want)
	}
	return d, nil
}

// replicaSets lists the operator's ReplicaSets by name with their replicas.
func replicaSets(t *testing.T) map[string]int32 {
	t.Helper()
	rss, err := env.Kube.AppsV1().ReplicaSets(systemNamespace).List(testenv.Ctx(t, time.Minute),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=inferenceservice-operator"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, rs := range rss.Items {
		out[rs.Name] = rs.Status.Replicas
	}
	return out
}

// TestHelmInstallUpgradeUninstall: the chart passes helm lint; helm install brings up what the
// manifests install (the operator, its metrics adapter and its activator ready, in a namespace
// enforcing the restricted Pod Security level), and the operator run as its pod makes an InferenceService
// Ready; helm upgrade with a changed value (the memory limit) and a new chart version (a
// changed CRD) rolls the operator to a new ReplicaSet and updates the CRD in place, the model
// staying Ready; helm uninstall removes the release's objects and, as documented, keeps the
// CRD and so the model.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	bin, err := Bin(testenv.Ctx(t, 15*time.Minute), env.Root)
	if err != nil {
		t.Fatal(err)
	}
	h := Helm{Bin: bin, Home: t.TempDir(), Kubeconfig: env.Cluster.KubeconfigPath()}

	lint := helmCmd(t, h, "lint", "--strict", Dir)
	if strings.Contains(lint, "[WARNING]") || strings.Contains(lint, "[ERROR]") {
		t.Fatalf("helm lint:\n%s", lint)
	}

	// Install, as docs/operations.md says: the release's namespace first, labelled for the
	// restricted Pod Security level, then the release in it.
	releaseNamespace(t, systemNamespace)
	helmCmd(t, h, "install", release, Dir, "-n", systemNamespace, "--wait", "--timeout", testenv.Scaled(3*time.Minute).String())
	t.Cleanup(func() { // a failed step leaves no release to the next test
		_, _, _ = h.Run(context.Background(), env.Root, "uninstall", release, "-n", systemNamespace, "--wait")
	})
	ctx := testenv.Ctx(t, 5*time.Minute)
	ns, err := env.Kube.CoreV1().Namespaces().Get(ctx, systemNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("namespace labels %v", ns.Labels)
	}
	for _, name := range []string{"inferenceservice-operator", "inferenceservice-metrics-adapter", "inferenceservice-activator"} {
		d, err := env.Kube.AppsV1().Deployments(systemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Status.ReadyReplicas != 2 {
			t.Fatalf("%s: %d ready replicas after helm install --wait, want 2", name, d.Status.ReadyReplicas)
		}
	}
	helmCmd(t, h, "list", "--all-namespaces")
	rsBefore := replicaSets(t)

	p := runOperator(t, "operator-0.1.0")
	model := env.Namespace(t)
	if _, err := env.CreateISVC(ctx, model, "qwen3", map[string]any{"model": "Qwen/Qwen3-0.6B", "replicas": int64(1), "gpusPerReplica": int64(1)}); err != nil {
		t.Fatal(err)
	}
	isvc := env.WaitPhase(t, model, "qwen3", crd.PhaseReady, 2*time.Minute)
	t.Logf("$ kubectl get isvc,deploy -n %s\n%s", model, env.Kubectl(t, "get", "isvc,deploy", "-n", model))
	crdBefore, err := env.Dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Upgrade: a new chart version whose CRD changed, and a changed value.
	unpointConversion(t, systemNamespace)
	helmCmd(t, h, "upgrade", release, upgradedChart(t), "-n", systemNamespace, "--set", "operator.resources.limits.memory=512Mi",
		"--wait", "--timeout", testenv.Scaled(3*time.Minute).String())
	var d *appsv1.Deployment
	testenv.Eventually(t, 2*time.Minute, "the operator rolled out", func() error {
		d, err = operatorRolledOut(ctx)
		return err
	})
	if got := d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String(); got != "512Mi" {
		t.Fatalf("memory limit after upgrade %s, want 512Mi", got)
	}
	rsAfter := replicaSets(t)
	var rolledTo string
	for name, n := range rsAfter {
		if _, old := rsBefore[name]; !old && n == *d.Spec.Replicas {
			rolledTo = name
		}
	}
	if rolledTo == "" {
		t.Fatalf("no new ReplicaSet with all replicas: before %v, after %v", rsBefore, rsAfter)
	}
	t.Logf("the operator rolled from %v to %s\n$ kubectl get deploy,rs -n %s\n%s", rsBefore, rolledTo,
		systemNamespace, env.Kubectl(t, "get", "deploy,rs", "-n", systemNamespace))
	crdAfter, err := env.Dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if crdAfter.GetLabels()["example.com/chart-upgrade-test"] != "v2" || crdAfter.GetUID() != crdBefore.GetUID() {
		t.Fatalf("CRD after upgrade: labels %v uid %s (before %s); want the new label, same object", crdAfter.GetLabels(), crdAfter.GetUID(), crdBefore.GetUID())
	}

	// The operator's pod rolled: its stand-in restarts with the new Deployment's env, and the
	// model is still Ready, the same object.
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	p = runOperator(t, "operator-0.1.1")
	after := env.WaitPhase(t, model, "qwen3", crd.PhaseReady, 2*time.Minute)
	if after.UID != isvc.UID {
		t.Fatalf("isvc UID %s after upgrade, was %s", after.UID, isvc.UID)
	}
	helmCmd(t, h, "history", release, "-n", systemNamespace)
	// The chart's RBAC is all the operator needed: nothing it asked for was refused.
	for _, name := range []string{"operator-0.1.0", "operator-0.1.1"} {
		b, err := os.ReadFile(filepath.Join(env.Dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "forbidden") {
			t.Errorf("%s: a request was forbidden under the chart's RBAC (log %s)", name, filepath.Join(env.Dir, name+".log"))
		}
	}

	// Uninstall: the release's objects go, the CRD and the model stay (crds.keep).
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	helmCmd(t, h, "uninstall", release, "-n", systemNamespace, "--wait", "--timeout", testenv.Scaled(3*time.Minute).String())
	// helm leaves the release's namespace; its deletion completes (nothing of the release
	// holds it).
	deleteNamespace(t, systemNamespace)
	for _, name := range []string{"inferenceservice-operator", "inferenceservice-metrics-adapter", "inferenceservice-activator", "inferenceservice-operator-metrics-reader"} {
		if _, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRole %s after uninstall: %v, want not found", name, err)
		}
	}
	if _, err := env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, "inferenceservice-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRoleBinding after uninstall: %v, want not found", err)
	}
	if out := helmCmd(t, h, "list", "--all-namespaces", "-q"); strings.TrimSpace(out) != "" {
		t.Errorf("helm list after uninstall: %q", out)
	}
	if _, err := env.Dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{}); err != nil {
		t.Errorf("CRD after uninstall: %v; want kept", err)
	}
	// Read in the stored version, v1beta1: with no operator left to convert, a v1alpha1 read
	// fails at the API server (docs/operations.md, "Conversion").
	if _, err := env.Dyn.Resource(crd.ResourceV1beta1).Namespace(model).Get(ctx, "qwen3", metav1.GetOptions{}); err != nil {
		t.Errorf("isvc after uninstall: %v; want kept with the CRD", err)
	}
	if _, err := env.Kube.AppsV1().Deployments(model).Get(ctx, "qwen3", metav1.GetOptions{}); err != nil {
		t.Errorf("the model's Deployment after uninstall: %v; want kept", err)
	}
}

// TestHelmWatchNamespaces: installed with watchNamespaces, the operator run with the chart's
// namespaced RBAC (Roles in the watched namespace, a ClusterRole of cluster-scoped rules only)
// makes a model there Ready with no request refused, and leaves a model elsewhere alone.
func TestHelmWatchNamespaces(t *testing.T) {
	bin, err := Bin(testenv.Ctx(t, 15*time.Minute), env.Root)
	if err != nil {
		t.Fatal(err)
	}
	h := Helm{Bin: bin, Home: t.TempDir(), Kubeconfig: env.Cluster.KubeconfigPath()}
	watched := env.CreateNamespace(t, "team-a")
	other := env.CreateNamespace(t, "team-z")
	releaseNamespace(t, systemNamespace)
	helmCmd(t, h, "install", release, Dir, "-n", systemNamespace, "--set-json", `watchNamespaces=["team-a"]`,
		"--set", "autoscaling.metricSource=none", "--wait", "--timeout", testenv.Scaled(3*time.Minute).String())
	t.Cleanup(func() {
		_, _, _ = h.Run(context.Background(), env.Root, "uninstall", release, "-n", systemNamespace, "--wait")
	})
	ctx := testenv.Ctx(t, 5*time.Minute)
	if _, err := env.Kube.RbacV1().Roles(watched).Get(ctx, "inferenceservice-operator", metav1.GetOptions{}); err != nil {
		t.Fatalf("Role in the watched namespace: %v", err)
	}

	p := runOperator(t, "operator-namespaced")
	spec := map[string]any{"model": "Qwen/Qwen3-0.6B", "replicas": int64(1), "gpusPerReplica": int64(1)}
	for _, ns := range []string{watched, other} {
		if _, err := env.CreateISVC(ctx, ns, "qwen3", spec); err != nil {
			t.Fatal(err)
		}
	}
	env.WaitPhase(t, watched, "qwen3", crd.PhaseReady, 2*time.Minute)
	t.Logf("$ kubectl get isvc -A\n%s", env.Kubectl(t, "get", "isvc", "-A"))
	if i, err := env.ISVC(other, "qwen3"); err != nil || i.Status.Phase != "" {
		t.Errorf("the model outside the watched namespace: phase %q, %v; want untouched", i.Status.Phase, err)
	}
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(env.Dir, "operator-namespaced.log")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "forbidden") {
		t.Errorf("a request was forbidden under the chart's namespaced RBAC (log %s)", log)
	}
}
