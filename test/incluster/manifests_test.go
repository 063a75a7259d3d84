package incluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/test/testenv"
)

// applyClean runs kubectl with args and fails on an error or on anything written to stderr
// (where kubectl prints the API server's warnings, Pod Security ones included).
func applyClean(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := env.Cluster.Kubectl(testenv.Ctx(t, 2*time.Minute), args...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(stderr) != "" {
		t.Fatalf("kubectl %s warned:\n%s", strings.Join(args, " "), stderr)
	}
	return out
}

// applyDefault applies the default install (dir: manifests/, or an overlay with its v1beta1
// component) with applyClean, then points its CRD's conversion at the suite's converter; the
// test's end rolls the install back to manifests/overlays/v1alpha1 (rollBackInstall).
func applyDefault(t *testing.T, dir string) {
	t.Helper()
	applyClean(t, "apply", "-k", filepath.Join(env.Root, dir))
	pointConversionAtSuite(t)
	t.Cleanup(func() { rollBackInstall(t) })
}

// render is `kubectl kustomize dir` split into objects.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out := env.Kubectl(t, "kustomize", filepath.Join(env.Root, dir))
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(out, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s/%s in the rendered manifests", kind, ns, name)
	return nil
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func toYAML(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n")
}

// TestManifestsApply: the base passes a server-side dry run and applies with no error and no
// warning; the operator's pods are admitted in a namespace enforcing the restricted Pod
// Security level (which does refuse a privileged pod there) and become Ready.
func TestManifestsApply(t *testing.T) {
	applyClean(t, "apply", "--dry-run=server", "-k", filepath.Join(env.Root, "manifests"))
	applyDefault(t, "manifests")
	env.Kubectl(t, "rollout", "status", "-n", systemNamespace, "deployment/inferenceservice-operator", "--timeout=120s")

	ctx := testenv.Ctx(t, time.Minute)
	ns, err := env.Kube.CoreV1().Namespaces().Get(ctx, systemNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("namespace labels %v", ns.Labels)
	}
	d, err := env.Kube.AppsV1().Deployments(systemNamespace).Get(ctx, "inferenceservice-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.ReadyReplicas != 2 {
		t.Fatalf("ready replicas %d, want 2", d.Status.ReadyReplicas)
	}
	checkDeploymentHardening(t, d)
	if _, err := env.Kube.PolicyV1().PodDisruptionBudgets(systemNamespace).Get(ctx, "inferenceservice-operator", metav1.GetOptions{}); err != nil {
		t.Fatalf("PodDisruptionBudget: %v", err)
	}

	// The metrics adapter: the image's second binary, as hardened, under the same Pod Security.
	env.Kubectl(t, "rollout", "status", "-n", systemNamespace, "deployment/inferenceservice-metrics-adapter", "--timeout=120s")
	ad, err := env.Kube.AppsV1().Deployments(systemNamespace).Get(ctx, "inferenceservice-metrics-adapter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ac := ad.Spec.Template.Spec.Containers[0]
	asc := ac.SecurityContext
	for what, ok := range map[string]bool{
		"2 ready replicas":       ad.Status.ReadyReplicas == 2,
		"the adapter's binary":   len(ac.Command) == 1 && ac.Command[0] == "/inferenceservice-metrics-adapter",
		"the operator's image":   ac.Image == d.Spec.Template.Spec.Containers[0].Image,
		"readOnlyRootFilesystem": asc != nil && ptr.Deref(asc.ReadOnlyRootFilesystem, false),
		"capabilities drop ALL":  asc != nil && asc.Capabilities != nil && slices.Contains(asc.Capabilities.Drop, "ALL"),
		"readiness on /readyz":   ac.ReadinessProbe != nil && ac.ReadinessProbe.HTTPGet != nil && ac.ReadinessProbe.HTTPGet.Path == "/readyz",
		"memory limit":           !ac.Resources.Limits.Memory().IsZero(),
		"its own ServiceAccount": ad.Spec.Template.Spec.ServiceAccountName == "inferenceservice-metrics-adapter",
	} {
		if !ok {
			t.Errorf("metrics adapter deployment: not %s", what)
		}
	}
	if _, err := env.Kube.PolicyV1().PodDisruptionBudgets(systemNamespace).Get(ctx, "inferenceservice-metrics-adapter", metav1.GetOptions{}); err != nil {
		t.Fatalf("metrics adapter PodDisruptionBudget: %v", err)
	}
	adapterPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "adapter-dry-run", Namespace: systemNamespace}, Spec: *ad.Spec.Template.Spec.DeepCopy()}
	if _, err := env.Kube.CoreV1().Pods(systemNamespace).Create(ctx, adapterPod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the metrics adapter's pod template under restricted: %v", err)
	}

	// The activator: the image's third binary, as hardened, under the same Pod Security.
	env.Kubectl(t, "rollout", "status", "-n", systemNamespace, "deployment/inferenceservice-activator", "--timeout=120s")
	act, err := env.Kube.AppsV1().Deployments(systemNamespace).Get(ctx, "inferenceservice-activator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vc := act.Spec.Template.Spec.Containers[0]
	vsc := vc.SecurityContext
	for what, ok := range map[string]bool{
		"2 ready replicas":       act.Status.ReadyReplicas == 2,
		"the activator's binary": len(vc.Command) == 1 && vc.Command[0] == "/inferenceservice-activator",
		"the operator's image":   vc.Image == d.Spec.Template.Spec.Containers[0].Image,
		"readOnlyRootFilesystem": vsc != nil && ptr.Deref(vsc.ReadOnlyRootFilesystem, false),
		"capabilities drop ALL":  vsc != nil && vsc.Capabilities != nil && slices.Contains(vsc.Capabilities.Drop, "ALL"),
		"readiness on /readyz":   vc.ReadinessProbe != nil && vc.ReadinessProbe.HTTPGet != nil && vc.ReadinessProbe.HTTPGet.Path == "/readyz",
		"memory limit":           !vc.Resources.Limits.Memory().IsZero(),
		"its own ServiceAccount": act.Spec.Template.Spec.ServiceAccountName == "inferenceservice-activator",
	} {
		if !ok {
			t.Errorf("activator deployment: not %s", what)
		}
	}
	if _, err := env.Kube.PolicyV1().PodDisruptionBudgets(systemNamespace).Get(ctx, "inferenceservice-activator", metav1.GetOptions{}); err != nil {
		t.Fatalf("activator PodDisruptionBudget: %v", err)
	}
	activatorPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "activator-dry-run", Namespace: systemNamespace}, Spec: *act.Spec.Template.Spec.DeepCopy()}
	if _, err := env.Kube.CoreV1().Pods(systemNamespace).Create(ctx, activatorPod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the activator's pod template under restricted: %v", err)
	}

	// The enforcement is real: the same pod, privileged, is refused in that namespace.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: systemNamespace},
		Spec:       *d.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
	pod.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
	_, err = env.Kube.CoreV1().Pods(systemNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "PodSecurity") {
		t.Fatalf("a privileged pod in %s: %v; want refused by PodSecurity", systemNamespace, err)
	}
	// And the operator's own pod template passes it as a bare pod too.
	pod.Spec = *d.Spec.Template.Spec.DeepCopy()
	pod.Name = "operator-dry-run"
	if _, err := env.Kube.CoreV1().Pods(systemNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the operator's pod template under restricted: %v", err)
	}
}

// checkDeploymentHardening: the security settings docs/operations.md promises.
func checkDeploymentHardening(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	psc, sc := spec.SecurityContext, c.SecurityContext
	for what, ok := range map[string]bool{
		"2 replicas":                   ptr.Deref(d.Spec.Replicas, 0) == 2,
		"--leader-elect":               slices.Contains(c.Args, "--leader-elect"),
		"runAsNonRoot":                 psc != nil && ptr.Deref(psc.RunAsNonRoot, false),
		"runAsUser 65532":              psc != nil && ptr.Deref(psc.RunAsUser, 0) == 65532,
		"seccomp RuntimeDefault":       psc != nil && psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault,
		"readOnlyRootFilesystem":       sc != nil && ptr.Deref(sc.ReadOnlyRootFilesystem, false),
		"no privilege escalation":      sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		"capabilities drop ALL":        sc != nil && sc.Capabilities != nil && slices.Contains(sc.Capabilities.Drop, "ALL"),
		"cpu and memory requests":      !c.Resources.Requests.Cpu().IsZero() && !c.Resources.Requests.Memory().IsZero(),
		"memory limit":                 !c.Resources.Limits.Memory().IsZero(),
		"liveness on /healthz":         c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path == "/healthz",
		"readiness on /readyz":         c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz",
		"serviceAccountName":           spec.ServiceAccountName == "inferenceservice-operator",
		"graceful termination allowed": ptr.Deref(spec.TerminationGracePeriodSeconds, 0) >= 10,
	} {
		if !ok {
			t.Errorf("deployment: not %s", what)
		}
	}
}

// TestUpgradeKeepsObjects: changes to the CRD and RBAC applied over a running install (an isvc
// stored, the operator Deployment up) update in place: same UIDs, nothing deleted, and
// re-applying the base reverts the change, again in place.
func TestUpgradeKeepsObjects(t *testing.T) {
	applyDefault(t, "manifests")
	ns := env.Namespace(t)
	createISVC(t, ns, "survivor", 1)

	type ref struct{ kind, ns, name string }
	refs := []ref{
		{"CustomResourceDefinition", "", "inferenceservices.ai.example.com"},
		{"ClusterRole", "", "inferenceservice-operator"},
		{"ClusterRoleBinding", "", "inferenceservice-operator"},
		{"ServiceAccount", systemNamespace, "inferenceservice-operator"},
		{"Role", systemNamespace, "inferenceservice-operator-leader-election"},
		{"Deployment", systemNamespace, "inferenceservice-operator"},
		{"InferenceService", ns, "survivor"},
	}
	uids := func() map[ref]types.UID {
		out := map[ref]types.UID{}
		for _, r := range refs {
			args := []string{"get", r.kind, r.name, "-o", "jsonpath={.metadata.uid}"}
			if r.ns != "" {
				args = append(args, "-n", r.ns)
			}
			out[r] = types.UID(env.Kubectl(t, args...))
		}
		return out
	}
	before := uids()

	objs := render(t, "manifests")
	crdObj := find(t, objs, "CustomResourceDefinition", "", "inferenceservices.ai.example.com")
	labels := crdObj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels["example.com/upgrade-test"] = "v2"
	crdObj.SetLabels(labels)
	role := find(t, objs, "ClusterRole", "", "inferenceservice-operator")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	rules = append(rules, map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get"}})
	if err := unstructured.SetNestedSlice(role.Object, rules, "rules"); err != nil {
		t.Fatal(err)
	}
	applyClean(t, "apply", "-f", writeFile(t, "upgrade.yaml", toYAML(t, objs)))
	pointConversionAtSuite(t)

	ctx := testenv.Ctx(t, time.Minute)
	cr, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, "inferenceservice-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasRule(cr.Rules, "", "secrets", "get") {
		t.Fatal("the added rule is not in the ClusterRole")
	}
	if got := env.Kubectl(t, "get", "crd", "inferenceservices.ai.example.com", "-o", `jsonpath={.metadata.labels.example\.com/upgrade-test}`); got != "v2" {
		t.Fatalf("CRD label %q", got)
	}
	if after := uids(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("UIDs changed on upgrade:\nbefore %v\nafter  %v", before, after)
	}

	// Back to the base: the extra rule and label go, again in place.
	applyClean(t, "apply", "-k", filepath.Join(env.Root, "manifests"))
	pointConversionAtSuite(t)
	if cr, err = env.Kube.RbacV1().ClusterRoles().Get(ctx, "inferenceservice-operator", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if hasRule(cr.Rules, "", "secrets", "get") {
		t.Fatal("re-applying the base kept the removed rule")
	}
	if after := uids(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("UIDs changed on downgrade:\nbefore %v\nafter  %v", before, after)
	}
	t.Logf("upgrade and downgrade kept %d objects with their UIDs", len(refs))
}

func hasRule(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// triples flattens rules into group/resource/verb strings.
func triples(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+":"+v)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestNamespacedOverlay: the overlay passes a server-side dry run; its Roles plus its
// cluster-scoped ClusterRole are exactly the base ClusterRole; and the operator run with the
// overlay's --namespaces under a copy of the overlay's RBAC reconciles in the watched
// namespaces and leaves the others alone, with no permission error.
func TestNamespacedOverlay(t *testing.T) {
	objs := render(t, "manifests/overlays/namespaced")
	d := convert[appsv1.Deployment](t, find(t, objs, "Deployment", systemNamespace, "inferenceservice-operator"))
	var nsArg string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--namespaces="); ok {
			nsArg = v
		}
	}
	watched := strings.Split(nsArg, ",")
	if len(watched) < 2 {
		t.Fatalf("overlay --namespaces=%q; want a list", nsArg)
	}
	for _, ns := range watched {
		env.CreateNamespace(t, ns)
	}
	other := env.CreateNamespace(t, "not-watched")
	applyClean(t, "apply", "--dry-run=server", "-k", filepath.Join(env.Root, "manifests", "overlays", "namespaced"))

	// Same permissions, only split: namespaced ones in Roles, cluster-scoped ones cluster-wide.
	clusterRole := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "inferenceservice-operator"))
	var roles []*rbacv1.Role
	for _, ns := range watched {
		r := convert[rbacv1.Role](t, find(t, objs, "Role", ns, "inferenceservice-operator"))
		if got, want := triples(append(slices.Clone(r.Rules), clusterRole.Rules...)), triples(manifestClusterRole(t).Rules); !slices.Equal(got, want) {
			t.Fatalf("Role in %s plus the overlay's ClusterRole:\n%v\nbase ClusterRole:\n%v", ns, got, want)
		}
		roles = append(roles, r)
	}

	// The overlay's RBAC, renamed for a test ServiceAccount so the installed base is untouched.
	const name = "isvc-namespaced-test"
	ctx := testenv.Ctx(t, time.Minute)
	kc := serviceAccountWithRole(t, systemNamespace, name, clusterRole)
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().ServiceAccounts(systemNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	for _, r := range roles {
		r = r.DeepCopy()
		r.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: r.Namespace}
		if _, err := env.Kube.RbacV1().Roles(r.Namespace).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Namespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: systemNamespace}},
		}
		if _, err := env.Kube.RbacV1().RoleBindings(r.Namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Not even the ServiceAccount can touch the unwatched namespace.
	out, _, _ := env.Cluster.Kubectl(ctx, "auth", "can-i", "list", "deployments", "-n", other,
		"--as=system:serviceaccount:"+systemNamespace+":"+name)
	if strings.TrimSpace(out) != "no" {
		t.Fatalf("can-i list deployments in %s: %q, want no", other, out)
	}
	// A Role's namespaces get covers its own namespace only (the finalizer reads the isvc's):
	// the API server authorizes GET /api/v1/namespaces/X in namespace X.
	saCfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	for ns, allowed := range map[string]bool{watched[0]: true, other: false} {
		if _, err := sa.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); (err == nil) != allowed {
			t.Fatalf("the overlay's ServiceAccount reading namespace %s: %v; want allowed=%v", ns, err, allowed)
		}
	}

	wire := env.StartProxyFor(t, kc)
	p := startOperator(t, env.Bin, "namespaced", "--kubeconfig="+wire.Kubeconfig, "--namespaces="+nsArg, "-v=2")
	for _, ns := range append(slices.Clone(watched), other) {
		createISVC(t, ns, "qwen3", 1)
	}
	for _, ns := range watched {
		env.WaitPhase(t, ns, "qwen3", "Ready", 90*time.Second)
	}
	// Ignored: after the watched ones are Ready, and a further while, nothing in the other.
	hold := time.Now().Add(3 * time.Second)
	for time.Now().Before(hold) {
		i, err := env.ISVC(other, "qwen3")
		if err != nil {
			t.Fatal(err)
		}
		if i.Status.Phase != "" || len(i.Status.Conditions) != 0 {
			t.Fatalf("the isvc in %s got a status: %+v", other, i.Status)
		}
		if _, err := env.Kube.AppsV1().Deployments(other).Get(ctx, "qwen3", metav1.GetOptions{}); err == nil {
			t.Fatalf("a Deployment was made in %s", other)
		}
		time.Sleep(250 * time.Millisecond) // sampling interval over a fixed window
	}
	logText := readLog(t, "namespaced")
	if strings.Contains(logText, "forbidden") {
		t.Fatalf("permission errors in the operator log (%s)", filepath.Join(env.Dir, "namespaced.log"))
	}
	t.Logf("reconciled in %v, ignored %s; %v writes", watched, other, writes(t, p))
	// Every request the operator sent was one the overlay's rules grant (the full proof that
	// each rule is used is TestRBACExactlyWhatIsCalled's, on the same rules unsplit).
	all := slices.Clone(clusterRole.Rules)
	for _, r := range roles {
		all = append(all, r.Rules...)
	}
	checkGranted(t, "manifests/overlays/namespaced", all, wire.Requests())
}

// TestManifestsMetricsSecure: the base serves /metrics over HTTPS to authorized tokens only,
// and manifests/overlays/metrics-insecure differs from it in nothing but the metrics endpoint
// (plain HTTP) and passes a server-side dry run without a warning. The base Deployment's own
// arguments, run under the install's RBAC, refuse a token without the install's metrics reader
// ClusterRole and answer one with it.
func TestManifestsMetricsSecure(t *testing.T) {
	base := render(t, "manifests")
	d := convert[appsv1.Deployment](t, find(t, base, "Deployment", systemNamespace, "inferenceservice-operator"))
	c := d.Spec.Template.Spec.Containers[0]
	svc := convert[corev1.Service](t, find(t, base, "Service", systemNamespace, "inferenceservice-operator-metrics"))
	reader := convert[rbacv1.ClusterRole](t, find(t, base, "ClusterRole", "", "inferenceservice-operator-metrics-reader"))
	ann := d.Spec.Template.Annotations
	for what, ok := range map[string]bool{
		"--metrics-secure":                      slices.Contains(c.Args, "--metrics-secure"),
		"--metrics-bind-address=:8443":          slices.Contains(c.Args, "--metrics-bind-address=:8443"),
		"container port https 8443":             len(c.Ports) > 0 && c.Ports[0].Name == "https" && c.Ports[0].ContainerPort == 8443,
		"prometheus.io/scheme https, port 8443": ann["prometheus.io/scheme"] == "https" && ann["prometheus.io/port"] == "8443",
		"Service port https 8443":               len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Name == "https" && svc.Spec.Ports[0].Port == 8443 && svc.Spec.Ports[0].TargetPort.String() == "https",
		"reader: get /metrics, nothing else": len(reader.Rules) == 1 && slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) &&
			slices.Equal(reader.Rules[0].Verbs, []string{"get"}) && len(reader.Rules[0].Resources) == 0,
	} {
		if !ok {
			t.Errorf("base: not %s", what)
		}
	}

	// The overlay: the base with the metrics endpoint as plain HTTP on 8080, nothing else.
	const overlay = "manifests/overlays/metrics-insecure"
	plain := render(t, overlay)
	if len(plain) != len(base) {
		t.Fatalf("%s renders %d objects, the base %d", overlay, len(plain), len(base))
	}
	want := d.DeepCopy()
	wc := &want.Spec.Template.Spec.Containers[0]
	wc.Args = slices.DeleteFunc(slices.Clone(wc.Args), func(a string) bool { return a == "--metrics-secure" })
	wc.Args[slices.Index(wc.Args, "--metrics-bind-address=:8443")] = "--metrics-bind-address=:8080"
	wc.Ports[0] = corev1.ContainerPort{Name: "http", ContainerPort: 8080}
	want.Spec.Template.Annotations["prometheus.io/scheme"], want.Spec.Template.Annotations["prometheus.io/port"] = "http", "8080"
	wantSvc := svc.DeepCopy()
	wantSvc.Spec.Ports[0] = corev1.ServicePort{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")}
	for _, o := range base {
		got := find(t, plain, o.GetKind(), o.GetNamespace(), o.GetName())
		var same bool
		switch o.GetKind() + "/" + o.GetName() {
		case "Deployment/inferenceservice-operator":
			same = equality.Semantic.DeepEqual(convert[appsv1.Deployment](t, got), want)
		case "Service/inferenceservice-operator-metrics":
			same = equality.Semantic.DeepEqual(convert[corev1.Service](t, got), wantSvc)
		default:
			same = equality.Semantic.DeepEqual(got.Object, o.Object)
		}
		if !same {
			t.Errorf("%s: %s %s differs from the base beyond the metrics endpoint:\n%s", overlay, o.GetKind(), o.GetName(), toYAML(t, []*unstructured.Unstructured{got}))
		}
	}
	applyClean(t, "apply", "--dry-run=server", "-k", filepath.Join(env.Root, overlay))

	// The base's arguments (the bind addresses aside: loopback ports here; the webhook's, whose
	// Service the local cluster cannot route, off) under the install's RBAC, watching an empty
	// namespace so it reconciles nothing.
	applyDefault(t, "manifests")
	ns := env.Namespace(t)
	args := []string{"--kubeconfig=" + env.SAKubeconfig, "--namespaces=" + ns,
		"--leader-election-namespace=" + systemNamespace, "--leader-election-id=isvc-manifests-metrics", "-v=2"}
	for _, a := range c.Args {
		if !strings.HasPrefix(a, "--metrics-bind-address=") && !strings.HasPrefix(a, "--health-probe-bind-address=") && !strings.HasPrefix(a, "--webhook-") {
			args = append(args, a)
		}
	}
	p := startOperator(t, env.Bin, "manifests-metrics", args...)
	token := func(kubeconfig string) string {
		cfg, err := clientcmd.LoadFromFile(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, ai := range cfg.AuthInfos {
			return ai.Token
		}
		t.Fatalf("no token in %s", kubeconfig)
		return ""
	}
	scraper := token(serviceAccountWithRole(t, ns, "isvc-metrics-scraper", reader))
	nobody := token(serviceAccountWithRole(t, ns, "isvc-metrics-nobody", &rbacv1.ClusterRole{}))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} // self-signed, as the ServiceMonitor
	get := func(tok string) (int, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+p.MetricsAddr+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(nobody); err != nil || code != http.StatusForbidden {
		t.Fatalf("a token without the reader role: %d (%v), want 403", code, err)
	}
	testenv.Eventually(t, 30*time.Second, "the reader scrapes", func() error {
		code, err := get(scraper)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
	t.Log("the base's /metrics: 403 without the metrics reader role, 200 with it")
}
