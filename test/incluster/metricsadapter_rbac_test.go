package incluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestMetricsAdapterRBACExactlyWhatIsCalled runs the metrics adapter with its ServiceAccount
// through a recording proxy over each of its code paths (the pod cache and the owner caches, by
// a streaming list or, refused once, a list; its owner ClusterRole read; the serving
// certificate's Secret created, and renewed after a hand edit broke it; an APIService created,
// read back, and put back after a hand edit) and fails on a request its RBAC does not grant and
// on a rule of its ClusterRole or Role no request used.
func TestMetricsAdapterRBACExactlyWhatIsCalled(t *testing.T) {
	ctx := testenv.Ctx(t, 5*time.Minute)
	for _, f := range []string{"service_account.yaml", "rbac.yaml"} {
		env.Kubectl(t, "apply", "-f", filepath.Join(env.Root, "manifests", "metrics-adapter", f))
	}
	// LeaderWorkerSet served (a stand-in CRD), so the owner caches list its kinds too.
	standins := filepath.Join(env.Root, "test", "e2e", "testdata", "standin_crds.yaml")
	env.Kubectl(t, "apply", "-f", standins)
	t.Cleanup(func() {
		_, _, _ = env.Cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=false", "-f", standins)
	})
	env.Kubectl(t, "wait", "--for=condition=Established", "crd/leaderworkersets.leaderworkerset.x-k8s.io", "--timeout=60s")
	kubeconfig, err := env.Cluster.ServiceAccountKubeconfig(ctx, systemNamespace, "inferenceservice-metrics-adapter")
	if err != nil {
		t.Fatal(err)
	}
	wire := env.StartProxyFor(t, kubeconfig)
	// The pod cache's streaming list refused once, so client-go falls back to a list.
	errs := &answers{done: map[string]bool{}}
	wire.Answer(errs.answer)
	bin, err := operator.BuildMetricsAdapter(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	apiServices := env.Dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	t.Cleanup(func() {
		for _, v := range []string{"v1beta2", "v1beta1"} {
			_ = apiServices.Delete(context.Background(), v+".custom.metrics.k8s.io", metav1.DeleteOptions{})
		}
		_ = env.Kube.CoreV1().Secrets(systemNamespace).Delete(context.Background(), "inferenceservice-metrics-adapter-tls", metav1.DeleteOptions{})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	a, err := operator.StartMetricsAdapter(ctx, bin, filepath.Join(env.Dir, "metrics-adapter-rbac.log"), wire.Kubeconfig, t.TempDir(), port,
		"--apiservice-resync=1s", "--scrape-period=1s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Kill)

	waitCalled(t, wire, "the pod and owner caches, the certificate and the registration",
		access{resource: "pods", verb: "list"},
		access{group: "apps", resource: "replicasets", verb: "list"},
		access{group: "apps", resource: "deployments", verb: "list"},
		access{group: "apps", resource: "statefulsets", verb: "list"},
		access{group: "leaderworkerset.x-k8s.io", resource: "leaderworkersets", verb: "list"},
		access{group: "ai.example.com", resource: "inferenceservices", verb: "list"},
		access{group: "rbac.authorization.k8s.io", resource: "clusterroles", verb: "get", name: "inferenceservice-metrics-adapter"},
		access{resource: "secrets", verb: "get", name: "inferenceservice-metrics-adapter-tls"},
		access{resource: "secrets", verb: "create"},
		access{group: "apiregistration.k8s.io", resource: "apiservices", verb: "get", name: "v1beta2.custom.metrics.k8s.io"},
		access{group: "apiregistration.k8s.io", resource: "apiservices", verb: "create"})
	// A hand edit of its own APIService: put back with an update.
	env.Kubectl(t, "patch", "apiservice", "v1beta1.custom.metrics.k8s.io", "--type=merge", "-p", `{"spec":{"versionPriority":7}}`)
	waitCalled(t, wire, "the hand-edited APIService put back",
		access{group: "apiregistration.k8s.io", resource: "apiservices", verb: "update", name: "v1beta1.custom.metrics.k8s.io"})
	testenv.Eventually(t, 30*time.Second, "versionPriority restored", func() error {
		out := env.Kubectl(t, "get", "apiservice", "v1beta1.custom.metrics.k8s.io", "-o", "jsonpath={.spec.versionPriority}")
		if out != "100" {
			return fmt.Errorf("versionPriority %s", out)
		}
		return nil
	})

	// A hand edit that breaks the certificate's Secret: issued again with an update.
	env.Kubectl(t, "patch", "secret", "-n", systemNamespace, "inferenceservice-metrics-adapter-tls", "--type=json", "-p", `[{"op":"replace","path":"/data/tls.crt","value":"eA=="}]`)
	waitCalled(t, wire, "the broken certificate renewed",
		access{resource: "secrets", verb: "update", name: "inferenceservice-metrics-adapter-tls"})

	a.Kill() // its watches end, so the proxy has their status
	ours := readRules(t, "manifests", "metrics-adapter", "rbac.yaml")
	// What the two bindings to Kubernetes' own roles grant: delegated authentication and
	// authorization, and the request-header CA in kube-system (that Role names the ConfigMap;
	// its list and watch select it by a field selector, which the proxy's record does not name).
	delegated := []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
	}
	checkExactRBAC(t, "metrics adapter", append(ours, delegated...), ours, wire.Requests())
}
