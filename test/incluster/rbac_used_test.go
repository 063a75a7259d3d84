package incluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// access is one permission as RBAC sees a request: API group, resource (with its subresource,
// "pods/status"), verb and, for requests on one object, its name.
type access struct {
	group, resource, verb, name string
}

func (a access) String() string {
	s := a.resource + ":" + a.verb
	if a.group != "" {
		s = a.group + "/" + s
	}
	if a.name != "" {
		s += "@" + a.name
	}
	return s
}

// accessOf reads a request's path the way the API server's RequestInfo does; ok is false for
// non-resource paths (discovery, /version), which every authenticated user may read.
func accessOf(r testenv.Request) (access, bool) {
	var a access
	rest, ok := strings.CutPrefix(r.Path, "/api/v1/")
	if !ok {
		p, isAPIs := strings.CutPrefix(r.Path, "/apis/")
		parts := strings.SplitN(p, "/", 3) // group, version, rest
		if !isAPIs || len(parts) < 3 {
			return a, false
		}
		a.group, rest = parts[0], parts[2]
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:] // a namespaced resource; a namespace itself keeps its own path
	}
	a.resource = parts[0]
	if len(parts) > 1 {
		a.name = parts[1]
	}
	if len(parts) > 2 {
		a.resource += "/" + parts[2]
	}
	q, _ := url.ParseQuery(r.Query)
	switch r.Method {
	case http.MethodGet:
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			a.verb = "watch"
		case a.name == "":
			a.verb = "list"
		default:
			a.verb = "get"
		}
	case http.MethodPost:
		a.verb, a.name = "create", "" // a create names no object in its path
	case http.MethodPut:
		a.verb = "update"
	case http.MethodPatch:
		a.verb = "patch"
	case http.MethodDelete:
		a.verb = "delete"
		if a.name == "" {
			a.verb = "deletecollection"
		}
	default:
		return a, false
	}
	return a, true
}

// grants reports whether rule allows a.
func grants(rule rbacv1.PolicyRule, a access) bool {
	in := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	return in(rule.APIGroups, a.group) && in(rule.Resources, a.resource) && in(rule.Verbs, a.verb) &&
		(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, a.name))
}

// ruleAccesses expands a rule into one access per group, resource and verb, for the check that
// each is used; a rule scoped to names is used by a request on any of them.
func ruleAccesses(rule rbacv1.PolicyRule) []access {
	var out []access
	for _, g := range rule.APIGroups {
		for _, r := range rule.Resources {
			for _, v := range rule.Verbs {
				out = append(out, access{group: g, resource: r, verb: v})
			}
		}
	}
	return out
}

// accessesUsed maps what the process sent to the permissions RBAC checked for it. Besides the
// request's own, a child written with blockOwnerDeletion needs update on the owner's
// finalizers: the API server's admission (OwnerReferencesPermissionEnforcement) checks it.
func accessesUsed(reqs []testenv.Request) map[access]int {
	used := map[access]int{}
	for _, r := range reqs {
		a, ok := accessOf(r)
		if !ok {
			continue
		}
		used[a]++
		// Binding a ClusterRole needs bind on it (or every permission it grants): RBAC checks
		// it on the RoleBinding's create.
		if a.group == "rbac.authorization.k8s.io" && a.resource == "rolebindings" && a.verb == "create" {
			used[access{group: "rbac.authorization.k8s.io", resource: "clusterroles", verb: "bind", name: reconcile.DefaultPickerClusterRole}]++
		}
		if r.BlockOwnerDeletion && (a.verb == "create" || a.verb == "update") {
			used[access{group: crd.Group, resource: crd.Plural + "/finalizers", verb: "update"}]++
		}
	}
	return used
}

// checkExactRBAC fails the test on a request RBAC denied or none of granted grants, and on a
// rule (group, resource, verb) of mustUse no request used. It logs what each rule was used for.
func checkExactRBAC(t *testing.T, mode string, granted, mustUse []rbacv1.PolicyRule, reqs []testenv.Request) {
	t.Helper()
	used := checkGranted(t, mode, granted, reqs)
	rules := mustUse
	var report []string
	for _, rule := range rules {
		for _, want := range ruleAccesses(rule) {
			n := 0
			for a, c := range used {
				if a.group == want.group && a.resource == want.resource && a.verb == want.verb &&
					(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, a.name)) {
					n += c
				}
			}
			report = append(report, fmt.Sprintf("%5d  %s", n, want))
			if n == 0 {
				t.Errorf("%s: the rule %s (resourceNames %v) was never used: no code path of this install calls it", mode, want, rule.ResourceNames)
			}
		}
	}
	t.Logf("%s: %d requests recorded; uses per rule:\n%s", mode, len(reqs), strings.Join(report, "\n"))
}

// checkGranted fails the test on a request RBAC denied or no rule grants, and returns the
// permissions the requests used.
func checkGranted(t *testing.T, mode string, rules []rbacv1.PolicyRule, reqs []testenv.Request) map[access]int {
	t.Helper()
	used := accessesUsed(reqs)
	for _, r := range reqs {
		if r.Code == http.StatusForbidden {
			t.Errorf("%s: denied: %s %s?%s", mode, r.Method, r.Path, r.Query)
		}
	}
	for a := range used {
		if !slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return grants(r, a) }) {
			t.Errorf("%s: %s was called but no rule grants it", mode, a)
		}
	}
	return used
}

// readRules reads the rules of the Roles and ClusterRoles in a manifest file.
func readRules(t *testing.T, path ...string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{env.Root}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var r struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r.Rules...)
	}
	return rules
}

// matches reports whether a has w's group, resource, verb and, unless w names none, name.
func matches(a, w access) bool {
	return a.group == w.group && a.resource == w.resource && a.verb == w.verb && (w.name == "" || a.name == w.name)
}

// called reports whether the process has made a request with access w.
func called(reqs []testenv.Request, w access) bool {
	return slices.ContainsFunc(mapsKeys(accessesUsed(reqs)), func(a access) bool { return matches(a, w) })
}

// waitCalled waits until the process has made a request with each access in want (the name
// ignored when empty) that the API server carried out.
func waitCalled(t *testing.T, wire *testenv.Proxy, what string, want ...access) {
	t.Helper()
	testenv.Eventually(t, time.Minute, what, func() error {
		reqs := wire.Requests()
		for _, r := range reqs {
			if a, ok := accessOf(r); ok && r.Code == http.StatusForbidden && slices.ContainsFunc(want, func(w access) bool { return matches(a, w) }) {
				t.Fatalf("%s: %s denied (%s %s): no rule grants it", what, a, r.Method, r.Path)
			}
		}
		done := slices.DeleteFunc(reqs, func(r testenv.Request) bool { return r.Code < 200 || r.Code > 299 })
		used := accessesUsed(done)
		var missing []string
		for _, w := range want {
			if !slices.ContainsFunc(mapsKeys(used), func(a access) bool { return matches(a, w) }) {
				missing = append(missing, w.String())
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not called yet: %v", missing)
		}
		return nil
	})
}

func mapsKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// answers are the API server errors the proxy stands in for, each once per resource: a
// streaming list (watch with sendInitialEvents) refused, as by an API server that does not
// serve it, after which client-go's reflector lists instead; and, once armed, a 409 Conflict
// on the first write of each listed kind, as a concurrent writer would cause, after which the
// operator re-reads the child (get) and writes it whole (update).
type answers struct {
	mu        sync.Mutex
	conflicts map[string]string // resource -> method to conflict once; nil until armed
	done      map[string]bool
}

func (c *answers) answer(r *http.Request) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := accessOf(testenv.Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery})
	if !ok {
		return 0
	}
	switch key := a.verb + " " + a.resource; {
	case a.verb == "watch" && r.URL.Query().Get("sendInitialEvents") == "true" && !c.done[key]:
		c.done[key] = true
		return http.StatusInternalServerError
	case c.conflicts[a.resource] == r.Method && !c.done[key]:
		c.done[key] = true
		return http.StatusConflict
	}
	return 0
}

func (c *answers) armConflicts(m map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conflicts = m
}

// TestRBACExactlyWhatIsCalled runs the operator of the default install (the ClusterRole and
// the leader election Role of manifests/rbac, copied for a ServiceAccount of its own) behind a
// recording proxy, with every optional feature on (leader election, --metrics-secure, the
// gateway registrar, ServiceMonitor and HTTPRoute CRDs served), and drives each code path that
// calls the API: caches filled by a streaming list or, where the API server refuses one, a
// list (client-go's fallback, forced once per resource); creates; a crash-looping model's log
// read (pods/log); patches of drifted children;
// conflicts (get, then update); a relabelled child (create, get, update); scale to zero and
// removed adapters (deletes); a Deployment that stops being the isvc's (its dependents
// deleted); a deletion whose deregistration fails (the namespace read); a secure scrape
// (TokenReview, SubjectAccessReview); a repeated Event (patched into a series). The
// permissions those requests needed must be exactly the rules: one no request used fails, as
// does one a request needed and no rule grants. The operator watches one namespace, which
// needs the same verbs as watching all.
func TestRBACExactlyWhatIsCalled(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testenv.Ctx(t, 10*time.Minute)
	optionalCRDs := filepath.Join(env.Root, "test", "e2e", "testdata", "optional_crds.yaml")
	env.Kubectl(t, "apply", "-f", optionalCRDs)
	t.Cleanup(func() {
		_, _, _ = env.Cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=false", "-f", optionalCRDs)
	})
	// LeaderWorkerSet's and Kueue's Workload and ClusterQueue CRDs (stand-ins: no controller is
	// needed to see the operator's calls).
	standins := filepath.Join(env.Root, "test", "e2e", "testdata", "standin_crds.yaml")
	env.Kubectl(t, "apply", "-f", standins)
	t.Cleanup(func() {
		_, _, _ = env.Cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=false", "-f", standins)
	})
	// The Inference Extension's InferencePool (a stand-in): the pool route's children.
	poolCRD := filepath.Join(env.Root, "test", "e2e", "testdata", "inferencepool_crd.yaml")
	env.Kubectl(t, "apply", "-f", poolCRD)
	t.Cleanup(func() {
		_, _, _ = env.Cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=false", "-f", poolCRD)
	})
	// The gateways' objects for the picker: Istio's DestinationRule (its CRD as Istio ships it)
	// and GKE's HealthCheckPolicy (a stand-in).
	gatewayCRDs := []string{filepath.Join(env.Root, "test", "epp", "gateway", "destinationrule-crd.yaml"), filepath.Join(env.Root, "test", "incluster", "testdata", "healthcheckpolicy_crd.yaml")}
	for _, f := range gatewayCRDs {
		env.Kubectl(t, "apply", "--server-side", "-f", f)
		t.Cleanup(func() {
			_, _, _ = env.Cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=false", "-f", f)
		})
	}
	env.Kubectl(t, "wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com", "crd/httproutes.gateway.networking.k8s.io",
		"crd/leaderworkersets.leaderworkerset.x-k8s.io", "crd/workloads.kueue.x-k8s.io", "crd/clusterqueues.kueue.x-k8s.io",
		"crd/inferencepools.inference.networking.k8s.io", "crd/referencegrants.gateway.networking.k8s.io",
		"crd/destinationrules.networking.istio.io", "crd/healthcheckpolicies.networking.gke.io", "--timeout=60s")
	// The activator's namespace, watched too: a model at zero's route gets a ReferenceGrant there.
	actNS := ns + "-activator"
	env.Kubectl(t, "create", "namespace", actNS)
	t.Cleanup(func() {
		_, _, _ = env.Cluster.Kubectl(context.Background(), "delete", "namespace", actNS, "--wait=false")
	})

	// The install's rules, for a ServiceAccount of the test's own.
	const name = "isvc-rbac-exact"
	clusterRules := readRules(t, "manifests", "rbac", "cluster_role.yaml")
	leaseRules := readRules(t, "manifests", "rbac", "leader_election_role.yaml")
	kc := serviceAccountWithRole(t, ns, name, &rbacv1.ClusterRole{Rules: clusterRules})
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: systemNamespace}, Rules: leaseRules}
	if _, err := env.Kube.RbacV1().Roles(systemNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: systemNamespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
	if _, err := env.Kube.RbacV1().RoleBindings(systemNamespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().RoleBindings(systemNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = env.Kube.RbacV1().Roles(systemNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	// A gateway admin API that can refuse deregistrations.
	var gwDown sync.Map
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, down := gwDown.Load("down"); down && r.Method == http.MethodDelete {
			http.Error(w, "gateway unavailable", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(gw.Close)

	wire := env.StartProxyFor(t, kc)
	errs := &answers{done: map[string]bool{}}
	wire.Answer(errs.answer)
	const lease = "isvc-rbac-exact"
	p := startOperator(t, env.Bin, "rbac-exact", "--kubeconfig="+wire.Kubeconfig, "--namespaces="+ns+","+actNS, "--activator-service="+actNS+"/activator:80",
		"--leader-elect", "--leader-election-namespace="+systemNamespace, "--leader-election-id="+lease,
		"--metrics-secure", "--gateway-url="+gw.URL, "--gateway-parent=gateway-system/public",
		"--backoff-max=2s", "--creating-evidence-after=2s", "-v=2")
	waitHolder(t, systemNamespace, lease, identity(t, p), time.Now(), 30*time.Second)

	// A secure scrape with a token the API server authenticates: TokenReview, then
	// SubjectAccessReview (which denies it: the test's ServiceAccount may not read /metrics).
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for _, ai := range cfg.AuthInfos {
		token = ai.Token
	}
	scrape := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} // self-signed
	req, _ := http.NewRequest(http.MethodGet, "https://"+p.MetricsAddr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := scrape.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	// Every child: Deployment, Service, HPA, PDB (4 replicas keep 2+ pods), the adapters'
	// ConfigMap, ServiceMonitor, HTTPRoute (spec.gateway).
	ext := func(adapterURI string, route string) string {
		e := map[string]any{"gateway": map[string]any{"route": route}}
		if adapterURI != "" {
			e["adapters"] = []any{map[string]any{"name": "a", "storageURI": adapterURI}}
		}
		b, _ := json.Marshal(e)
		return string(b)
	}
	isvc := map[string]any{"model": "m", "replicas": int64(4), "gpusPerReplica": int64(0),
		"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}}}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": "m", "namespace": ns, "annotations": map[string]any{crd.AnnotationV1beta1Spec: ext("hf://org/a", "/"+ns+"/m")}},
		"spec":     isvc,
	}}
	u, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	children := []access{
		{group: "apps", resource: "deployments"}, {resource: "services"}, {group: "autoscaling", resource: "horizontalpodautoscalers"},
		{group: "policy", resource: "poddisruptionbudgets"},
		{group: "monitoring.coreos.com", resource: "servicemonitors"}, {group: "gateway.networking.k8s.io", resource: "httproutes"},
		// The pool route's: the InferencePool, the picker's ServiceAccount and RoleBinding (its
		// Deployment and Service are among the kinds above).
		{group: "inference.networking.k8s.io", resource: "inferencepools"}, {resource: "serviceaccounts"},
		{group: "rbac.authorization.k8s.io", resource: "rolebindings"},
		// The model's NetworkPolicy (and its picker's).
		{group: "networking.k8s.io", resource: "networkpolicies"},
		// Where the gateways' kinds are served: the picker's DestinationRule, the pool's
		// HealthCheckPolicy.
		{group: "networking.istio.io", resource: "destinationrules"}, {group: "networking.gke.io", resource: "healthcheckpolicies"},
	}
	with := func(verb string, as ...access) []access {
		out := slices.Clone(as)
		for i := range out {
			out[i].verb = verb
		}
		return out
	}
	waitCalled(t, wire, "every child created", with("create", children...)...)

	// The adapters readiness gate: the model's pods wait behind it (no server answers here, so
	// no adapter is ever seen); with the adapters removed, the pods still running are let
	// through (pods/status) while the Deployment rolls to pods without the gate.
	testenv.Eventually(t, 2*time.Minute, "a gated pod whose server is ready", func() error {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=m"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if kinds.HasAdaptersGate(&p.Spec) && c.Type == corev1.ContainersReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		return fmt.Errorf("none of %d pods", len(pods.Items))
	})
	updateISVC(t, ns, "m", isvc, ext("", "/"+ns+"/m"))
	waitCalled(t, wire, "the adapters gate opened", access{resource: "pods/status", verb: "patch"})
	updateISVC(t, ns, "m", isvc, ext("hf://org/a", "/"+ns+"/m"))

	// A model spanning two nodes: a LeaderWorkerSet created, a drifted one re-read and updated
	// after a conflict, and deleted when the model goes back to one node.
	lws := access{group: "leaderworkerset.x-k8s.io", resource: "leaderworkersets"}
	bigSpec := map[string]any{"model": "m", "replicas": int64(1), "gpusPerReplica": int64(2),
		"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}}}
	big := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": "big", "namespace": ns, "annotations": map[string]any{crd.AnnotationV1beta1Spec: `{"multiNode":{"nodes":2}}`}},
		"spec":     bigSpec,
	}}
	if _, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCalled(t, wire, "a LeaderWorkerSet created", with("create", lws)...)
	errs.armConflicts(map[string]string{"leaderworkersets": http.MethodPut})
	env.Kubectl(t, "-n", ns, "patch", "leaderworkersets", "big", "--type=merge", "-p", `{"spec":{"startupPolicy":"LeaderReady"}}`)
	waitCalled(t, wire, "the LeaderWorkerSet re-read and updated after a conflict", append(with("get", lws), with("update", lws)...)...)
	errs.armConflicts(nil)
	updateISVC(t, ns, "big", bigSpec, `{}`)
	waitCalled(t, wire, "the LeaderWorkerSet deleted", with("delete", lws)...)

	// A model that scales to zero, routed through the activator in another namespace: that
	// namespace's ReferenceGrant is created there (list and watch from the start).
	zero := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": "zero", "namespace": ns, "annotations": map[string]any{
			crd.AnnotationV1beta1Spec: `{"gateway":{"route":"/` + ns + `/zero"},"autoscaling":{"minReplicas":0,"maxReplicas":1},"replicasUnset":true}`}},
		"spec": map[string]any{"model": "m", "replicas": int64(0), "gpusPerReplica": int64(0),
			"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}}},
	}}
	if _, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Create(ctx, zero, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCalled(t, wire, "the activator's ReferenceGrant created", access{group: "gateway.networking.k8s.io", resource: "referencegrants", verb: "create"})
	// The namespace's last model at zero gone, its grant goes with it.
	if err := env.Dyn.Resource(crd.Resource).Namespace(ns).Delete(ctx, "zero", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCalled(t, wire, "the activator's ReferenceGrant deleted with its last model", access{group: "gateway.networking.k8s.io", resource: "referencegrants", verb: "delete"})
	if err := env.Dyn.Resource(crd.Resource).Namespace(ns).Delete(ctx, "big", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Two models on the same weights with a managed cache (spec.cache.size): the claim and its
	// fill Job read by name, created by the first, and patched by the second to add itself as
	// an owner. (No volume binds the claim here: the fill never runs.)
	for _, name := range []string{"cached-a", "cached-b"} {
		m := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
			"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{crd.AnnotationV1beta1Spec: `{"cache":{"size":"1Gi"}}`}},
			"spec": map[string]any{"model": "m", "replicas": int64(1), "gpusPerReplica": int64(0),
				"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}}},
		}}
		if _, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	claims, jobs := access{resource: "persistentvolumeclaims"}, access{group: "batch", resource: "jobs"}
	waitCalled(t, wire, "the weights claim and Job read, created and adopted",
		append(append(with("get", claims, jobs), with("create", claims, jobs)...), with("patch", claims, jobs)...)...)
	for _, name := range []string{"cached-a", "cached-b"} {
		if err := env.Dyn.Resource(crd.Resource).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A crash-looping model: the last words of its crashed run are read (pods/log), then it
	// goes, so the conflicts below meet only the first model's writes.
	crash := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": "crash", "namespace": ns},
		"spec": map[string]any{"model": "m", "replicas": int64(1), "gpusPerReplica": int64(0), "image": "kubelet.fake/crashloop:v1",
			"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}}},
	}}
	if _, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Create(ctx, crash, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCalled(t, wire, "a crashed run's log read", access{resource: "pods/log", verb: "get"})

	// A model whose image is still being pulled past the threshold: its pod's Events are listed.
	env.Kubectl(t, "annotate", "nodes", "--all", "--overwrite", "kubelet.fake/pull-seconds=20")
	t.Cleanup(func() {
		_, _, _ = env.Cluster.Kubectl(context.Background(), "annotate", "nodes", "--all", "kubelet.fake/pull-seconds-")
	})
	pulling := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": "pulling", "namespace": ns},
		"spec": map[string]any{"model": "m", "replicas": int64(1), "gpusPerReplica": int64(0), "image": "registry.example/llm-server:" + ns,
			"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}}},
	}}
	if _, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Create(ctx, pulling, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCalled(t, wire, "a creating pod's Events listed", access{resource: "events", verb: "list"})
	env.Kubectl(t, "annotate", "nodes", "--all", "kubelet.fake/pull-seconds-")
	if err := env.Dyn.Resource(crd.Resource).Namespace(ns).Delete(ctx, "pulling", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Dyn.Resource(crd.Resource).Namespace(ns).Delete(ctx, "crash", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the crash-looping isvc gone", func() error {
		if _, err := env.ISVC(ns, "crash"); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})

	// An adapter ConfigMap an earlier version created (adapters were mounted then; they are
	// loaded at run time now): deleted, since no Deployment of this version mounts it.
	legacy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: reconcile.AdaptersConfigMapName("m"), Namespace: ns,
		Labels: map[string]string{kinds.ManagedByLabel: kinds.ManagedByValue, kinds.InstanceLabel: "m"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: crd.GroupVersion.String(), Kind: crd.Kind, Name: "m", UID: u.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
	}, Data: map[string]string{"adapters.json": `[{"name":"a","path":"hf://org/a"}]`}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, legacy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCalled(t, wire, "the earlier version's adapter ConfigMap deleted", access{resource: "configmaps", verb: "delete"})

	// Drift and conflicts: the first patch of each typed child and the first update of each
	// custom one and of the status is answered 409, as a concurrent writer would cause.
	errs.armConflicts(map[string]string{
		"deployments": http.MethodPatch, "services": http.MethodPatch, "horizontalpodautoscalers": http.MethodPatch,
		"poddisruptionbudgets": http.MethodPatch,
		"servicemonitors":      http.MethodPut, "httproutes": http.MethodPut, crd.Plural + "/status": http.MethodPut,
		"inferencepools": http.MethodPut, "serviceaccounts": http.MethodPut, "rolebindings": http.MethodPut,
		"networkpolicies": http.MethodPut, "destinationrules": http.MethodPut, "healthcheckpolicies": http.MethodPut,
	})
	isvc["replicas"], isvc["image"] = int64(5), "vllm/vllm-openai:v0.11.1"
	updateISVC(t, ns, "m", isvc, ext("hf://org/a", "/"+ns+"/m2")) // Deployment, HPA, HTTPRoute
	env.Kubectl(t, "-n", ns, "patch", "service", "m", "--type=merge", "-p", `{"spec":{"selector":{"drift":"x"}}}`)
	env.Kubectl(t, "-n", ns, "patch", "pdb", "m", "--type=merge", "-p", `{"spec":{"maxUnavailable":3}}`)
	env.Kubectl(t, "-n", ns, "patch", "servicemonitor", "m", "--type=merge", "-p", `{"spec":{"endpoints":[{"port":"x"}]}}`)
	env.Kubectl(t, "-n", ns, "patch", "inferencepool", "m", "--type=merge", "-p", `{"spec":{"targetPorts":[{"number":1}]}}`)
	env.Kubectl(t, "-n", ns, "label", "serviceaccount", reconcile.PickerName("m"), "app.kubernetes.io/component=tampered", "--overwrite")
	env.Kubectl(t, "-n", ns, "label", "rolebinding", reconcile.PickerName("m"), "app.kubernetes.io/component=tampered", "--overwrite")
	env.Kubectl(t, "-n", ns, "patch", "networkpolicy", "m", "--type=merge", "-p", `{"spec":{"ingress":[{}]}}`)
	env.Kubectl(t, "-n", ns, "patch", "destinationrules.networking.istio.io", reconcile.PickerName("m"), "--type=merge", "-p", `{"spec":{"trafficPolicy":{"tls":{"mode":"DISABLE"}}}}`)
	env.Kubectl(t, "-n", ns, "patch", "healthcheckpolicies.networking.gke.io", "m", "--type=merge", "-p", `{"spec":{"default":{"checkIntervalSec":9}}}`)
	waitCalled(t, wire, "each child re-read and updated after a conflict",
		append(with("get", children...), append(with("update", children...),
			access{group: crd.Group, resource: crd.Plural, verb: "get"}, access{group: crd.Group, resource: crd.Plural + "/status", verb: "update"})...)...)
	errs.armConflicts(nil)
	// A child of ours relabelled (out of the label-scoped cache): its create finds it, and it is
	// read and rewritten with its labels back.
	env.Kubectl(t, "-n", ns, "label", "hpa", "m", "app.kubernetes.io/managed-by-")
	testenv.Eventually(t, time.Minute, "the relabelled HPA restored", func() error {
		h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "m", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h.Labels["app.kubernetes.io/managed-by"] == "" {
			return fmt.Errorf("labels %v", h.Labels)
		}
		return nil
	})

	// The same Event twice about an unchanged isvc is patched into a series: the Service
	// deleted again and again is created again and again ("Created Service m", about the
	// same objects). Once a second, until the series is patched.
	var deleted time.Time
	series := access{group: "events.k8s.io", resource: "events", verb: "patch"}
	testenv.Eventually(t, time.Minute, "an Event series patched", func() error {
		if called(wire.Requests(), series) {
			return nil
		}
		if time.Since(deleted) > time.Second {
			deleted = time.Now()
			_ = env.Kube.CoreV1().Services(ns).Delete(ctx, "m", metav1.DeleteOptions{})
		}
		return fmt.Errorf("no series patched yet")
	})

	// Deletes: scale to zero (the HPA and PDB).
	isvc["replicas"] = int64(0)
	updateISVC(t, ns, "m", isvc, ext("", "/"+ns+"/m2"))
	waitCalled(t, wire, "HPA and PDB deleted", with("delete", children[2], children[3])...)
	// A Deployment that is no longer the isvc's (its controller reference removed): the
	// Service, ServiceMonitor and HTTPRoute that act on it or its pods are deleted.
	isvc["replicas"] = int64(1)
	updateISVC(t, ns, "m", isvc, ext("", "/"+ns+"/m2"))
	env.Kubectl(t, "-n", ns, "patch", "deployment", "m", "--type=json", "-p", `[{"op":"remove","path":"/metadata/ownerReferences"}]`)
	waitCalled(t, wire, "Service, ServiceMonitor, HTTPRoute, the pool route's children and the NetworkPolicies deleted",
		with("delete", children[0], children[1], children[4], children[5], children[6], children[7], children[8], children[9], children[10], children[11])...)

	// Deletion while the gateway refuses: the finalizer reads the namespace.
	gwDown.Store("down", true)
	if err := env.Dyn.Resource(crd.Resource).Namespace(ns).Delete(ctx, "m", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(u.GetUID())}}); err != nil {
		t.Fatal(err)
	}
	waitCalled(t, wire, "the namespace read by the finalizer", access{resource: "namespaces", verb: "get", name: ns})
	gwDown.Delete("down")
	testenv.Eventually(t, time.Minute, "the isvc gone", func() error {
		if _, err := env.ISVC(ns, "m"); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})

	rules := append(slices.Clone(clusterRules), leaseRules...)
	// Only a running Kueue serves its visibility API (an aggregated API server): its rule is
	// proven by TestKueueTeamQuotaOnlinePreemptsOffline (test/e2e), whose operator runs with the
	// install's RBAC and fails when a waiting model's position is not read.
	mustUse := slices.DeleteFunc(slices.Clone(rules), func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, "visibility.kueue.x-k8s.io")
	})
	checkExactRBAC(t, "manifests/rbac", rules, mustUse, wire.Requests())
}

// updateISVC sets an isvc's spec and v1beta1 extensions annotation, re-reading on a conflict.
func updateISVC(t *testing.T, ns, name string, spec map[string]any, ext string) {
	t.Helper()
	r := env.Dyn.Resource(crd.Resource).Namespace(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := r.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		u.Object["spec"] = spec
		a := u.GetAnnotations()
		a[crd.AnnotationV1beta1Spec] = ext
		u.SetAnnotations(a)
		_, err = r.Update(context.Background(), u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRBACV1beta1OverlayCalls runs the operator of the default install (the base rules plus the
// overlay's storage_migration_rbac.yaml) behind a recording proxy, serving the conversion
// webhook, while an InferenceService stored as v1alpha1 is migrated: each of the overlay's
// rules must be used (the caBundle patch, the rewrite, the storedVersions patch), and every
// request granted. The base rules' uses are TestRBACExactlyWhatIsCalled's. Storage is then
// rolled back and the default CRD restored, as the rollback in docs/operations.md says.
func TestRBACV1beta1OverlayCalls(t *testing.T) {
	ns := env.Namespace(t)
	createISVC(t, ns, "stored", 1) // stored as v1alpha1: the migration rewrites it
	const name = "isvc-rbac-v1beta1"
	base := readRules(t, "manifests", "rbac", "cluster_role.yaml")
	overlay := readRules(t, "manifests", "components", "v1beta1", "storage_migration_rbac.yaml")
	granted := append(slices.Clone(base), overlay...)
	kc := serviceAccountWithRole(t, ns, name, &rbacv1.ClusterRole{Rules: granted})
	wire := env.StartProxyFor(t, kc)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	def := crd.DefinitionWithV1beta1(apiextensionsv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, crd.WebhookPath))})
	definitionFile := func(def *apiextensionsv1.CustomResourceDefinition) string {
		raw, err := yaml.Marshal(def)
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, "crd.yaml", string(raw))
	}
	back := def.DeepCopy() // the rollback: both served, v1alpha1 stored
	back.Spec.Versions[0].Storage, back.Spec.Versions[1].Storage = true, false
	withV1beta1, rollback := definitionFile(def), definitionFile(back)
	crdGVR := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	storedVersions := func(want ...string) {
		testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("storedVersions %v", want), func() error {
			u, err := env.Dyn.Resource(crdGVR).Get(context.Background(), crd.CRDName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got, _, _ := unstructured.NestedStringSlice(u.Object, "status", "storedVersions"); !slices.Equal(got, want) {
				return fmt.Errorf("storedVersions %v", got)
			}
			return nil
		})
	}
	env.Kubectl(t, "apply", "-f", withV1beta1)
	p := startOperator(t, env.Bin, "rbac-v1beta1", "--kubeconfig="+wire.Kubeconfig, "--namespaces="+ns,
		fmt.Sprintf("--webhook-bind-address=127.0.0.1:%d", port), "--webhook-cert-dir="+filepath.Join(t.TempDir(), "certs"),
		"--webhook-ca-sync-period=1s", "--storage-migration-period=1s", "-v=2")
	// Registered after the operator's own cleanup, so it runs first, with the operator up:
	// storage back to v1alpha1 (the operator rewrites), then the default CRD without it.
	t.Cleanup(func() {
		env.Kubectl(t, "apply", "-f", rollback)
		storedVersions(crd.Version)
		if err := p.Stop(30 * time.Second); err != nil {
			t.Logf("operator stop: %v", err)
		}
		env.Kubectl(t, "apply", "-k", filepath.Join(env.Root, "manifests", "crd"))
		testenv.Eventually(t, time.Minute, "the default CRD back", func() error {
			if _, err := env.Kube.Discovery().ServerResourcesForGroupVersion(crd.GroupVersionV1beta1.String()); err == nil {
				return fmt.Errorf("v1beta1 still served")
			}
			return nil
		})
	})
	storedVersions(crd.VersionV1beta1)
	checkExactRBAC(t, "manifests/ (components/v1beta1)", granted, overlay, wire.Requests())
}

// TestLastWordsDenied runs the operator under the install's ClusterRole minus pods/log: a
// crash-looping model still gets today's message (exit code and restarts, no log line), and the
// denied read is tried once per crashed run, never per resync.
func TestLastWordsDenied(t *testing.T) {
	ns := env.Namespace(t)
	role := manifestClusterRole(t)
	n := len(role.Rules)
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "pods/log") })
	if len(role.Rules) != n-1 {
		t.Fatal("the ClusterRole has no pods/log rule")
	}
	// Optional CRDs another test is still deleting would turn on children the operator then
	// fails to write (ReconcileError outranks the crash).
	crds := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	testenv.Eventually(t, time.Minute, "no optional CRDs left by another test", func() error {
		for _, name := range []string{"servicemonitors.monitoring.coreos.com", "httproutes.gateway.networking.k8s.io"} {
			if _, err := env.Dyn.Resource(crds).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
				return fmt.Errorf("%s still served", name)
			}
		}
		return nil
	})
	kc := serviceAccountWithRole(t, ns, "isvc-operator-no-pod-logs", role)
	p := startOperator(t, env.Bin, "no-pod-logs", "--kubeconfig="+kc, "--namespaces="+ns, "--resync=1s", "-v=2")
	crash := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": "crash", "namespace": ns},
		"spec": map[string]any{"model": "m", "replicas": int64(1), "gpusPerReplica": int64(0), "image": "kubelet.fake/crashloop:v1",
			"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}}},
	}}
	if _, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Create(testenv.Ctx(t, time.Minute), crash, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denied := func() float64 {
		return counter(t, p, "inferenceservice_operator_pod_log_reads_total", func(l map[string]string) bool { return l["result"] == "forbidden" })
	}
	var msg string
	testenv.Eventually(t, time.Minute, "CrashLoopBackOff after a denied log read", func() error {
		i, err := env.ISVC(ns, "crash")
		if err != nil {
			return err
		}
		for _, c := range i.Status.Conditions {
			if c.Type == crd.ConditionReady {
				msg = c.Message
			}
		}
		if i.Status.Reason != reconcile.ReasonCrashLoopBackOff || denied() == 0 {
			return fmt.Errorf("reason %q (%s), %v denied reads", i.Status.Reason, msg, denied())
		}
		return nil
	})
	if !strings.Contains(msg, "last terminated: exit code 1 (Error)") || strings.Contains(msg, "; log: ") {
		t.Fatalf("message %q: want today's, the exit code without a log line", msg)
	}
	// Over a window of resyncs (1s), denied reads follow restarts, not resyncs.
	restarts := func() int32 { return env.Restarts(t, ns) }
	syncs := func() float64 { return counter(t, p, "controller_runtime_reconcile_total", nil) }
	d0, r0, s0 := denied(), restarts(), syncs()
	deadline := time.Now().Add(20 * time.Second)
	testenv.Eventually(t, time.Minute, "the window", func() error {
		if time.Now().Before(deadline) {
			return fmt.Errorf("%s left", time.Until(deadline).Round(time.Second))
		}
		return nil
	})
	d1, r1, s1 := denied(), restarts(), syncs()
	t.Logf("message: %s\nover 20s: %.0f reconciles, %d restarts, %.0f denied log reads", msg, s1-s0, r1-r0, d1-d0)
	if d1-d0 > 2*float64(r1-r0)+2 {
		t.Fatalf("%.0f denied reads for %d restarts over %.0f reconciles: reads follow resyncs", d1-d0, r1-r0, s1-s0)
	}
}
