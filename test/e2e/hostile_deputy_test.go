package e2e

// The hostile tenant's suite, the operator as a deputy (issue 49, findings 4 and 7): a tenant
// in one namespace tries to make the operator or the metrics adapter act for it on another
// namespace's model, and a component's ServiceAccount tries what its RBAC allows and its
// admission policy refuses.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// deputyRedirector is the tenant's own model server: the tenant picks spec.image, so what answers on
// its pod's IP is the tenant's program. It lists an adapter of the victim's name on /v1/models
// (so the operator plans an unload) and answers every runtime LoRA call with a 307 to the same
// path on the victim's pod, recording what the operator sent it.
type deputyRedirector struct {
	to   string // the victim pod's host:port
	base string
	mu   sync.Mutex
	seen []string // "METHOD path body" of each call
}

func (r *deputyRedirector) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<16))
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.URL.Path+" "+string(body))
	r.mu.Unlock()
	switch req.URL.Path {
	case "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []map[string]any{
			{"id": r.base, "object": "model", "root": r.base, "parent": nil},
			{"id": "sql", "object": "model", "root": "org/sql-lora", "parent": r.base},
		}})
	case "/v1/load_lora_adapter", "/v1/unload_lora_adapter":
		http.Redirect(w, req, "http://"+r.to+req.URL.Path, http.StatusTemporaryRedirect)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func (r *deputyRedirector) calls(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.seen {
		if strings.HasPrefix(s, "POST "+path+" ") {
			n++
		}
	}
	return n
}

// TestHostileDeputyRedirectedAdapterCall: a tenant's model pod answers the operator's adapter
// unload and load with a 307 to a victim model's pod in another namespace. The operator must
// not follow it: the victim keeps its adapter and loads nothing of the tenant's, and the
// tenant's status says the redirect was refused, without the victim's answer in it.
func TestHostileDeputyRedirectedAdapterCall(t *testing.T) {
	victimNS := env.CreateNamespace(t, "hostile-deputy-victim")
	tenantNS := env.CreateNamespace(t, "hostile-deputy-tenant")
	w := useWebhookCRD(t)
	t.Cleanup(func() {
		env.Kubectl(t, "delete", "isvc", "--all", "-n", victimNS, "--wait=true", "--timeout=60s")
		env.Kubectl(t, "delete", "isvc", "--all", "-n", tenantNS, "--wait=true", "--timeout=60s")
	})
	apply := func(ns, manifest string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "isvc.yaml")
		if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	}
	const base = "Qwen/Qwen3-8B"
	apply(victimNS, `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: victim}
spec:
  baseModel: `+base+`
  replicas: 1
  gpusPerReplica: 1
  adapters:
  - {name: sql, storageURI: "hf://org/sql-lora"}
`)
	var victim corev1.Pod
	testenv.Eventually(t, 90*time.Second, "the victim's pod serving its adapter sql", func() error {
		ready, err := readyModelPods(t, victimNS, "victim")
		if err != nil || len(ready) != 1 {
			return fmt.Errorf("%d ready pods (%v)", len(ready), err)
		}
		got, err := podAdapters(ready[0].Status.PodIP)
		if err != nil || got["sql"] != "org/sql-lora" {
			return fmt.Errorf("adapters %v (%v)", got, err)
		}
		victim = ready[0]
		return nil
	})

	// The tenant's image is not a vLLM image: the local kubelet starts no model server for it,
	// and the tenant's program (this deputyRedirector) answers on the pod's IP.
	apply(tenantNS, `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: attacker}
spec:
  baseModel: `+base+`
  image: registry.example.com/tenant/deputyRedirector:v1
  replicas: 1
  gpusPerReplica: 1
  adapters:
  - {name: decoy, storageURI: "hf://org/decoy-lora"}
`)
	var podIP string
	testenv.Eventually(t, 60*time.Second, "the tenant's pod running with an IP", func() error {
		list, err := env.Kube.CoreV1().Pods(tenantNS).List(testenv.Ctx(t, time.Minute), metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=attacker"})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
				podIP = p.Status.PodIP
				return nil
			}
		}
		return fmt.Errorf("%d pods, none running with an IP", len(list.Items))
	})
	ln, err := net.Listen("tcp", net.JoinHostPort(podIP, fmt.Sprint(reconcile.Port)))
	if err != nil {
		t.Fatal(err)
	}
	r := &deputyRedirector{to: net.JoinHostPort(victim.Status.PodIP, fmt.Sprint(reconcile.Port)), base: base}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	t.Logf("tenant pod %s redirects its LoRA API to the victim's pod %s (%s)", podIP, victim.Name, r.to)

	victimLog := func() string {
		out, err := kubectlErr(t, nil, "logs", "-n", victimNS, victim.Name)
		if err != nil {
			t.Fatalf("victim's log: %v: %s", err, out)
		}
		return out
	}
	crossed := func() string {
		var lines []string
		for _, l := range strings.Split(victimLog(), "\n") {
			if strings.Contains(l, "Removed LoRA adapter") || strings.Contains(l, "name 'decoy'") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	const refused = "a redirect, not followed"
	testenv.Eventually(t, 90*time.Second, "the tenant's status saying the redirect was refused", func() error {
		if got := crossed(); got != "" {
			t.Fatalf("the operator followed the tenant pod's redirect to the victim's pod (unloads %d, loads %d asked of the tenant's pod); the victim's log:\n%s",
				r.calls("/v1/unload_lora_adapter"), r.calls("/v1/load_lora_adapter"), got)
		}
		if r.calls("/v1/unload_lora_adapter") == 0 || r.calls("/v1/load_lora_adapter") == 0 {
			return fmt.Errorf("the operator has asked the tenant's pod %d unloads and %d loads",
				r.calls("/v1/unload_lora_adapter"), r.calls("/v1/load_lora_adapter"))
		}
		b, err := getV1beta1(t, tenantNS, "attacker")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, crd.ConditionAdaptersReady)
		if c == nil || c.Reason != reconcile.ReasonAdapterLoadFailed || !strings.Contains(c.Message, refused) {
			return fmt.Errorf("AdaptersReady %+v", c)
		}
		t.Logf("the tenant's AdaptersReady: %s: %s", c.Reason, c.Message)
		if strings.Contains(c.Message, "Success") || strings.Contains(c.Message, "lora adapter") {
			t.Fatalf("the victim's answer landed in the tenant's status: %s", c.Message)
		}
		return nil
	})
	if got := crossed(); got != "" {
		t.Fatalf("the victim's log shows the tenant's calls:\n%s", got)
	}
	got, err := podAdapters(victim.Status.PodIP)
	if err != nil || len(got) != 1 || got["sql"] != "org/sql-lora" {
		t.Fatalf("the victim's pod serves adapters %v (%v), want only sql", got, err)
	}
	t.Logf("the operator asked the tenant's pod %d unloads and %d loads; the victim's pod served none of them",
		r.calls("/v1/unload_lora_adapter"), r.calls("/v1/load_lora_adapter"))
}

// deputyTokenMounts names what of a pod's spec would put a ServiceAccount token in its containers:
// a projected serviceAccountToken volume (the ServiceAccount admission plugin adds
// kube-api-access-* unless the pod opts out), or a Secret volume of a legacy token.
func deputyTokenMounts(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if pr := v.Projected; pr != nil {
			for _, s := range pr.Sources {
				if s.ServiceAccountToken != nil {
					out = append(out, "volume "+v.Name+" (projected token)")
				}
			}
		}
		if v.Secret != nil && strings.Contains(v.Secret.SecretName, "-token-") {
			out = append(out, "volume "+v.Name+" (Secret "+v.Secret.SecretName+")")
		}
	}
	return out
}

// TestHostileDeputyModelPodsMountNoToken: a model server runs its tenant's image and parses
// every prompt; a weights fill runs the same image. Neither calls the API server, so a
// compromised one must find no ServiceAccount token to use: no pod of either carries one.
func TestHostileDeputyModelPodsMountNoToken(t *testing.T) {
	ns := env.Namespace(t)
	w := useWebhookCRD(t)
	t.Cleanup(func() { env.Kubectl(t, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	f := filepath.Join(t.TempDir(), "models.yaml")
	// The cached model's claim names a class no volume serves: its fill pod is created and
	// waits for the claim, which is all this reads of it.
	if err := os.WriteFile(f, []byte(`apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: plain}
spec:
  baseModel: Qwen/Qwen3-0.6B
  replicas: 1
  gpusPerReplica: 1
---
apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: cached}
spec:
  baseModel: Qwen/Qwen3-8B
  replicas: 1
  gpusPerReplica: 1
  cache: {size: 10Gi, storageClassName: no-such-class}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	var model, fill *corev1.Pod
	testenv.Eventually(t, 90*time.Second, "the model's pod and the fill's pod created", func() error {
		list, err := env.Kube.CoreV1().Pods(ns).List(testenv.Ctx(t, time.Minute), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			p := &list.Items[i]
			switch {
			case p.Labels[kinds.InstanceLabel] == "plain":
				model = p
			case p.Labels[reconcile.WeightsLabel] != "" && p.Labels[kinds.InstanceLabel] == "":
				fill = p
			}
		}
		if model == nil || fill == nil {
			return fmt.Errorf("model pod %v, fill pod %v, of %d pods", model != nil, fill != nil, len(list.Items))
		}
		return nil
	})
	for _, p := range []*corev1.Pod{model, fill} {
		if got := deputyTokenMounts(p); len(got) > 0 {
			t.Errorf("pod %s (ServiceAccount %s) has a ServiceAccount token mounted: %s", p.Name, p.Spec.ServiceAccountName, strings.Join(got, ", "))
		} else {
			t.Logf("pod %s: no ServiceAccount token (automountServiceAccountToken %v)", p.Name, ptr.Deref(p.Spec.AutomountServiceAccountToken, true))
		}
	}
}

// deputyAttempt is one write a component's ServiceAccount attempts: what RBAC grants it, and the
// words of the admission policy that must refuse it ("" for a write it must be allowed).
type deputyAttempt struct {
	what     string
	canI     []string // kubectl auth can-i's verb and resource: RBAC alone allows it
	args     []string // kubectl's, after --as and --dry-run=server
	manifest string   // written to a file for -f, when set
	want     string
}

// run attempts r as the ServiceAccount as (server-side dry run: admission runs, nothing is
// stored) and returns kubectl's output and whether the API server refused it.
func (r deputyAttempt) run(t *testing.T, as string) (string, bool) {
	t.Helper()
	args := append(slices.Clone(r.args), "--as="+as, "--dry-run=server")
	if r.manifest != "" {
		f := filepath.Join(t.TempDir(), "obj.yaml")
		if err := os.WriteFile(f, []byte(r.manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
	}
	out, err := kubectlErr(t, nil, args...)
	return strings.TrimSpace(out), err != nil
}

// checkDeputyRefusals proves RBAC allows each attempt, then that the policy refuses each attack in
// its words and allows each legitimate write. With fresh set (a policy was just applied), the
// first attack is retried until refused, as a new policy takes effect within seconds; the
// rest are read once.
func checkDeputyRefusals(t *testing.T, as, ns string, fresh bool, rs []deputyAttempt) {
	t.Helper()
	for _, r := range rs {
		if len(r.canI) > 0 {
			out, _ := kubectlErr(t, nil, append([]string{"auth", "can-i", "--as=" + as, "-n", ns}, r.canI...)...)
			if strings.TrimSpace(out) != "yes" {
				t.Fatalf("%s: RBAC does not grant %v: %q (the test would prove nothing of the policy)", r.what, r.canI, out)
			}
		}
	}
	for i, r := range rs {
		if r.want == "" {
			if out, refused := r.run(t, as); refused {
				t.Errorf("%s: refused: %s", r.what, out)
			} else {
				t.Logf("%s: allowed: %s", r.what, out)
			}
			continue
		}
		check := func() error {
			out, refused := r.run(t, as)
			if !refused {
				return fmt.Errorf("RBAC allowed it (can-i %v: yes) and nothing refused it: %s", r.canI, out)
			}
			if !strings.Contains(out, r.want) {
				t.Fatalf("%s: refused, but not in the policy's words %q: %s", r.what, r.want, out)
			}
			t.Logf("%s: RBAC allows it (can-i %v: yes); refused: %s", r.what, r.canI, out)
			return nil
		}
		if i == 0 && fresh {
			testenv.Eventually(t, 20*time.Second, r.what+" refused", check)
		} else if err := check(); err != nil {
			t.Errorf("%s: %v", r.what, err)
		}
	}
}

// applyDeputyPolicies applies the ValidatingAdmissionPolicies and bindings among docs that the cluster
// does not hold yet, and deletes them when the test ends; it returns their names.
func applyDeputyPolicies(t *testing.T, docs []string) []string {
	t.Helper()
	var names []string
	for _, d := range docs {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(obj.Kind, "ValidatingAdmissionPolicy") {
			continue
		}
		ref := strings.ToLower(obj.Kind) + "/" + obj.Metadata.Name
		if _, err := kubectlErr(t, nil, "get", ref); err == nil {
			continue // the install's, left as it is
		}
		f := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(f, []byte(d), 0o600); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, "apply", "-f", f)
		t.Cleanup(func() { env.Kubectl(t, "delete", ref, "--ignore-not-found") })
		names = append(names, ref)
	}
	return names
}

// TestHostileDeputyMetricsAdapterSecrets: the metrics adapter's Role grants creating any
// Secret in its namespace (RBAC cannot narrow a create by name or type); a compromised adapter
// could mint a ServiceAccount token Secret, which the token controller fills, for another
// ServiceAccount of its namespace. The shipped policy holds it to its one serving certificate.
func TestHostileDeputyMetricsAdapterSecrets(t *testing.T) {
	ns := env.Namespace(t)
	rendered := env.Kubectl(t, "kustomize", filepath.Join(env.Root, "manifests", "metrics-adapter"))
	var docs []string
	for _, d := range strings.Split(rendered, "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name, Namespace string
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatal(err)
		}
		switch {
		case obj.Kind == "ClusterRole" && obj.Metadata.Name == "inferenceservice-metrics-adapter":
			// The owner of the Secret the adapter issues; the install's, when there is one.
			if _, err := kubectlErr(t, nil, "get", "clusterrole", obj.Metadata.Name); err != nil {
				applyYAML(t, ns, d)
				t.Cleanup(func() {
					env.Kubectl(t, "delete", "clusterrole", "inferenceservice-metrics-adapter", "--ignore-not-found")
				})
			}
		case obj.Kind == "Role" && obj.Metadata.Name == "inferenceservice-metrics-adapter":
			// The adapter's Role, in this test's namespace as its install namespace.
			applyYAML(t, ns, strings.ReplaceAll(d, "namespace: "+obj.Metadata.Namespace, "namespace: "+ns))
		case strings.HasPrefix(obj.Kind, "ValidatingAdmissionPolicy"):
			docs = append(docs, d)
		}
	}
	applyYAML(t, ns, `apiVersion: v1
kind: ServiceAccount
metadata: {name: inferenceservice-metrics-adapter}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: inferenceservice-metrics-adapter}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: inferenceservice-metrics-adapter}
subjects:
- {kind: ServiceAccount, name: inferenceservice-metrics-adapter, namespace: `+ns+`}
`)
	applied := applyDeputyPolicies(t, docs)
	t.Logf("shipped policies applied: %v", applied)
	secret := func(name, typ, extra string) string {
		return `apiVersion: v1
kind: Secret
metadata:
  name: ` + name + `
  namespace: ` + ns + `
  labels: {app.kubernetes.io/managed-by: inferenceservice-metrics-adapter}
` + extra + `type: ` + typ + `
`
	}
	// A pair as the adapter issues it, so the API server's checks of a TLS Secret see a real one.
	pair, err := servingcert.Issue(servingcert.Pair{}, time.Now(), servingcert.DNSNames(ns, "inferenceservice-metrics-adapter"))
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	tlsData := fmt.Sprintf("data: {tls.crt: %s, tls.key: %s, ca.crt: %s, ca.key: %s}\n", b64(pair.Cert), b64(pair.Key), b64(pair.CA), b64(pair.CAKey))
	fresh := slices.ContainsFunc(applied, func(n string) bool { return strings.HasSuffix(n, "-secrets") })
	checkDeputyRefusals(t, "system:serviceaccount:"+ns+":inferenceservice-metrics-adapter", ns, fresh, []deputyAttempt{
		{what: "a ServiceAccount token Secret for the namespace's default ServiceAccount, under the certificate's name",
			canI: []string{"create", "secrets"}, args: []string{"create"},
			manifest: secret("inferenceservice-metrics-adapter-tls", "kubernetes.io/service-account-token",
				"  annotations: {kubernetes.io/service-account.name: default}\n"),
			want: "the metrics adapter's Secret is of type kubernetes.io/tls"},
		{what: "another Secret of the namespace", canI: []string{"create", "secrets"}, args: []string{"create"},
			manifest: secret("database-password", "kubernetes.io/tls", tlsData),
			want:     "the metrics adapter writes one Secret, inferenceservice-metrics-adapter-tls in its own namespace"},
		{what: "the certificate's Secret carrying other keys", canI: []string{"create", "secrets"}, args: []string{"create"},
			manifest: secret("inferenceservice-metrics-adapter-tls", "kubernetes.io/tls", fmt.Sprintf("data: {tls.crt: %s, tls.key: %s, .dockerconfigjson: e30=}\n", b64(pair.Cert), b64(pair.Key))),
			want:     "the metrics adapter's Secret holds its certificate only"},
		{what: "its serving certificate, as servingcert writes it", canI: []string{"create", "secrets"}, args: []string{"create"},
			manifest: secret("inferenceservice-metrics-adapter-tls", "kubernetes.io/tls", tlsData)},
	})

	// The adapter's own code, as its ServiceAccount, under the policy: it issues the Secret, and
	// renews it after a hand edit broke it (an update).
	ctx := testenv.Ctx(t, time.Minute)
	kc, err := env.Cluster.ServiceAccountKubeconfig(ctx, ns, "inferenceservice-metrics-adapter")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, "inferenceservice-metrics-adapter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := servingcert.Source{Secrets: cs.CoreV1(), Namespace: ns, Name: "inferenceservice-metrics-adapter-tls",
		DNSNames: servingcert.DNSNames(ns, "inferenceservice-metrics-adapter"), Issue: true, Now: time.Now,
		Owner: &metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: owner.Name, UID: owner.UID}}
	if _, action, err := src.Get(ctx); err != nil || action != "created" {
		t.Fatalf("the adapter issuing its Secret under the policy: %q, %v", action, err)
	}
	env.Kubectl(t, "patch", "secret", "-n", ns, "inferenceservice-metrics-adapter-tls", "--type=json", "-p", `[{"op":"replace","path":"/data/tls.crt","value":"eA=="}]`)
	if _, action, err := src.Get(ctx); err != nil || !strings.HasPrefix(action, "renewed") {
		t.Fatalf("the adapter renewing its Secret under the policy: %q, %v", action, err)
	}
	t.Log("the adapter's servingcert issued and renewed its Secret under the policy")
}

// TestHostileDeputyOperatorGuard: the operator's ClusterRole lets it create Deployments and
// RoleBindings in every namespace, and RBAC cannot narrow a create by label, by the
// ServiceAccount a pod runs as, or by what a binding binds. With the opt-in operator-guard
// component, a compromised operator cannot run a pod as another ServiceAccount, write outside
// the namespaces labelled for it, or touch a tenant's own objects; the operator itself still
// serves a model in a labelled namespace, and a model in an unlabelled one says why it has no
// children, in the policy's words.
func TestHostileDeputyOperatorGuard(t *testing.T) {
	// A ServiceAccount named as the operator's, bound to the install's ClusterRole: the policy
	// selects the operator by that name, in whatever namespace it is installed.
	opNS := env.CreateNamespace(t, "hostile-deputy-guard-system")
	team := env.CreateNamespace(t, "hostile-deputy-guard-team")
	other := env.CreateNamespace(t, "hostile-deputy-guard-other")
	env.Kubectl(t, "label", "namespace", team, "ai.example.com/inferenceservice-operator=managed")
	applyYAML(t, opNS, `apiVersion: v1
kind: ServiceAccount
metadata: {name: inferenceservice-operator}
`)
	applyYAML(t, opNS, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: hostile-deputy-guard}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: inferenceservice-operator}
subjects:
- {kind: ServiceAccount, name: inferenceservice-operator, namespace: `+opNS+`}
`)
	t.Cleanup(func() { env.Kubectl(t, "delete", "clusterrolebinding", "hostile-deputy-guard", "--ignore-not-found") })
	// A tenant's own objects in the labelled namespace, which the operator never made.
	applyYAML(t, team, `apiVersion: v1
kind: Service
metadata: {name: tenant-api}
spec:
  selector: {app: tenant-api}
  ports: [{port: 80}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: tenant-admin}
`)

	var docs []string
	files, _ := filepath.Glob(filepath.Join(env.Root, "manifests", "components", "operator-guard", "admission_policy*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	applied := applyDeputyPolicies(t, docs)
	t.Logf("shipped policies applied: %v", applied)

	deployment := func(ns, name, sa, extraLabels string) string {
		return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
  namespace: ` + ns + `
  labels: {app.kubernetes.io/managed-by: inferenceservice-operator` + extraLabels + `}
spec:
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec:
      serviceAccountName: ` + sa + `
      containers: [{name: c, image: registry.example.com/x:v1}]
`
	}
	binding := func(name, role, sa string) string {
		return `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: ` + name + `
  namespace: ` + team + `
  labels: {app.kubernetes.io/managed-by: inferenceservice-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ` + role + `}
subjects: [{kind: ServiceAccount, name: ` + sa + `, namespace: ` + team + `}]
`
	}
	deploy := []string{"create", "deployments"}
	checkDeputyRefusals(t, "system:serviceaccount:"+opNS+":inferenceservice-operator", team, len(applied) > 0, []deputyAttempt{
		{what: "a Deployment in kube-system running as its ServiceAccount generic-garbage-collector",
			canI: deploy, args: []string{"create"}, manifest: deployment("kube-system", "miner", "generic-garbage-collector", ""),
			want: "the operator writes only in namespaces labelled ai.example.com/inferenceservice-operator=managed; kube-system is not"},
		{what: "a labelled Deployment in a namespace not labelled for the operator", canI: deploy, args: []string{"create"},
			manifest: deployment(other, "miner", "default", ""),
			want:     "the operator writes only in namespaces labelled ai.example.com/inferenceservice-operator=managed; " + other + " is not"},
		{what: "a Deployment in the model's namespace running as the tenant's tenant-admin", canI: deploy, args: []string{"create"},
			manifest: deployment(team, "miner", "tenant-admin", ""),
			want:     "the operator's pods run as their namespace's default ServiceAccount, or an endpoint picker as its own <model>-epp"},
		{what: "a Deployment in the model's namespace mounting the node's root", canI: deploy, args: []string{"create"},
			manifest: strings.Replace(deployment(team, "miner", "default", ""), "      containers:",
				"      volumes: [{name: root, hostPath: {path: /}}]\n      containers:", 1),
			want: "the operator's pods use neither the node's namespaces, a hostPath volume nor a privileged container"},
		{what: "relabelling the tenant's own Service as the operator's", canI: []string{"patch", "services"},
			args: []string{"label", "service", "tenant-api", "-n", team, "app.kubernetes.io/managed-by=inferenceservice-operator"},
			want: "the operator writes only objects it labels app.kubernetes.io/managed-by=inferenceservice-operator, and changes only its own"},
		{what: "deleting the tenant's own Service", canI: []string{"delete", "services"},
			args: []string{"delete", "service", "tenant-api", "-n", team},
			want: "the operator writes only objects it labels app.kubernetes.io/managed-by=inferenceservice-operator, and changes only its own"},
		{what: "binding the picker's ClusterRole to the tenant's tenant-admin", canI: []string{"create", "rolebindings"}, args: []string{"create"},
			manifest: binding("llama-epp", "inferenceservice-operator-endpoint-picker", "tenant-admin"),
			want:     "the operator binds only the endpoint picker's ClusterRole, to the picker's own ServiceAccount"},
		{what: "a model's Deployment, as the default ServiceAccount", canI: deploy, args: []string{"create"},
			manifest: deployment(team, "llama", "default", "")},
		{what: "a picker's Deployment, as its own llama-epp", canI: deploy, args: []string{"create"},
			manifest: deployment(team, "llama-epp", "llama-epp", ", ai.example.com/endpoint-picker: llama")},
		{what: "the picker's RoleBinding", canI: []string{"create", "rolebindings"}, args: []string{"create"},
			manifest: binding("llama-epp", "inferenceservice-operator-endpoint-picker", "llama-epp")},
	})

	// What the operator itself creates for a model with two replicas and a pool route passes:
	// the children reconcile builds, as the operator's ServiceAccount would create them.
	isvc := &crd.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: team, UID: "0f1e2d3c-0000-4000-8000-000000000001"},
		Spec: crd.InferenceServiceSpec{Model: "Qwen/Qwen3-8B", Replicas: 2}}
	d := reconcile.DesiredChildren(isvc, &crd.SpecExtensions{Gateway: &crd.Gateway{}},
		reconcile.Features{HTTPRoutes: true, InferencePools: true, GatewayParent: types.NamespacedName{Namespace: team, Name: "gw"}})
	var children []deputyAttempt
	for _, o := range []any{d.Deployment, d.Service, d.HPA, d.PDB, d.Pool.Picker, d.Pool.PickerService, d.Pool.ServiceAccount, d.Pool.RoleBinding} {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(b)) == "null" {
			continue // a child this spec does not have (the PDB, below its pod count)
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		_ = yaml.Unmarshal(b, &meta)
		children = append(children, deputyAttempt{what: "the operator's own " + meta.Kind, args: []string{"create"}, manifest: string(b)})
	}
	checkDeputyRefusals(t, "system:serviceaccount:"+opNS+":inferenceservice-operator", team, false, children)

	// The suite's operator runs as the install's ServiceAccount, held by the policy too: a model
	// in the labelled namespace serves, one in another says why it has no children.
	t.Cleanup(func() {
		env.Kubectl(t, "delete", "isvc", "--all", "-n", team, "--wait=true", "--timeout=60s")
		env.Kubectl(t, "delete", "isvc", "--all", "-n", other, "--wait=true", "--timeout=60s")
	})
	for _, ns := range []string{team, other} {
		if _, err := env.CreateISVC(testenv.Ctx(t, time.Minute), ns, "qwen3", map[string]any{"model": "Qwen/Qwen3-0.6B", "replicas": int64(1)}); err != nil {
			t.Fatal(err)
		}
	}
	env.WaitPhase(t, team, "qwen3", crd.PhaseReady, 90*time.Second)
	testenv.Eventually(t, 60*time.Second, "the unlabelled namespace's model saying it was refused", func() error {
		i, err := env.ISVC(other, "qwen3")
		if err != nil {
			return err
		}
		for _, c := range i.Status.Conditions {
			if strings.Contains(c.Message, "is not") && strings.Contains(c.Message, "ai.example.com/inferenceservice-operator=managed") {
				t.Logf("%s/qwen3: phase %s reason %s: %s: %s", other, i.Status.Phase, i.Status.Reason, c.Type, c.Message)
				return nil
			}
		}
		return fmt.Errorf("phase %s reason %s conditions %+v", i.Status.Phase, i.Status.Reason, i.Status.Conditions)
	})
}
