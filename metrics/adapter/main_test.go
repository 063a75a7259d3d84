package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/metrics/custommetrics"
)

func TestBackendOf(t *testing.T) {
	for _, tc := range []struct {
		service, podNamespace string
		wantNS, wantName      string
	}{
		// The default: the adapter's own Service in the namespace it was installed in.
		{"", "my-ns", "my-ns", "inferenceservice-metrics-adapter"},
		{"", "inferenceservice-system", "inferenceservice-system", "inferenceservice-metrics-adapter"},
		// Named explicitly: that Service, wherever the pod runs.
		{"other/adapter", "my-ns", "other", "adapter"},
	} {
		got, err := backendOf(tc.service, tc.podNamespace, 443)
		if err != nil || got.Namespace != tc.wantNS || got.Name != tc.wantName || got.Port != 443 {
			t.Errorf("backendOf(%q, %q) = %+v, %v; want %s/%s", tc.service, tc.podNamespace, got, err, tc.wantNS, tc.wantName)
		}
	}
	for _, bad := range []struct {
		service, podNamespace string
		port                  int32
	}{{"adapter", "", 443}, {"/adapter", "", 443}, {"ns/", "", 443}, {"ns/a/b", "", 443}, {"ns/adapter", "", 0}, {"ns/adapter", "", 70000},
		// No flag and no downward API: no guess at a namespace.
		{"", "", 443}} {
		if _, err := backendOf(bad.service, bad.podNamespace, bad.port); err == nil {
			t.Errorf("backendOf(%q, %q, %d) accepted", bad.service, bad.podNamespace, bad.port)
		}
	}
}

func TestRegistrationPass(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	newReg := func(kube *fake.Clientset, dyn *dynamicfake.FakeDynamicClient) *registration {
		return &registration{kube: kube, dyn: dyn, ownerName: serviceName, certDir: t.TempDir(), last: map[string]string{},
			backend: custommetrics.Backend{Namespace: "my-ns", Name: serviceName, Port: 443},
			certs: &servingcert.Source{Secrets: kube.CoreV1(), Namespace: "my-ns", Name: serviceName + "-tls",
				DNSNames: servingcert.DNSNames("my-ns", serviceName), Issue: true, Now: time.Now}}
	}
	dynClient := func() *dynamicfake.FakeDynamicClient {
		return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "APIServiceList"})
	}

	// The install is being removed (its ClusterRole gone): nothing is created that nothing
	// would remove.
	kube, dyn := fake.NewClientset(), dynClient()
	r := newReg(kube, dyn)
	if err := r.pass(context.Background()); err == nil {
		t.Fatal("a pass without the owner ClusterRole succeeded")
	}
	if len(dyn.Actions()) != 0 {
		t.Fatalf("without an owner: %v", dyn.Actions())
	}
	if l, _ := kube.CoreV1().Secrets("my-ns").List(context.Background(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Fatal("a Secret was created without an owner")
	}

	kube = fake.NewClientset(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: serviceName, UID: "cr-uid"}})
	r = newReg(kube, dyn)
	if err := r.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	sec, err := kube.CoreV1().Secrets("my-ns").Get(context.Background(), serviceName+"-tls", metav1.GetOptions{})
	if err != nil || len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != "cr-uid" {
		t.Fatalf("Secret %v, %v", sec, err)
	}
	for _, name := range []string{"v1beta2.custom.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io"} {
		u, err := dyn.Resource(gvr).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ca, _, _ := unstructured.NestedString(u.Object, "spec", "caBundle")
		ns, _, _ := unstructured.NestedString(u.Object, "spec", "service", "namespace")
		if refs := u.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "cr-uid" || ns != "my-ns" ||
			ca != base64.StdEncoding.EncodeToString(sec.Data[servingcert.CAKey]) {
			t.Fatalf("%s: owners %v, service namespace %s, caBundle %q", name, refs, ns, ca)
		}
	}
	if b, err := os.ReadFile(r.certFile); err != nil || !bytes.Equal(b, sec.Data[servingcert.CertKey]) {
		t.Fatalf("the served certificate is not the Secret's: %v", err)
	}
}

// TestKubeconfigDefaults: $KUBECONFIG fills the kubeconfig flags not given (the release image's
// adapter run outside a cluster crashed reading the in-cluster ServiceAccount), never one given,
// and nothing for a list of files or no $KUBECONFIG.
func TestKubeconfigDefaults(t *testing.T) {
	none := func(string) bool { return false }
	for _, tc := range []struct {
		name, env string
		given     func(string) bool
		want      map[string]string
	}{
		{"every client", "/k/config", none, map[string]string{
			"lister-kubeconfig": "/k/config", "authentication-kubeconfig": "/k/config", "authorization-kubeconfig": "/k/config"}},
		{"a flag given wins", "/k/config", func(f string) bool { return f == "lister-kubeconfig" }, map[string]string{
			"authentication-kubeconfig": "/k/config", "authorization-kubeconfig": "/k/config"}},
		{"unset: in-cluster", "", none, nil},
		{"a list: left alone", "/a:/b", none, nil},
	} {
		got := kubeconfigDefaults(tc.env, tc.given)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s=%q, want %q", tc.name, k, got[k], v)
			}
		}
	}
}
