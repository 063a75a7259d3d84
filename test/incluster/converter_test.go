package incluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/crd/storage"
	"github.com/example/inferenceservice-operator/crd/webhook"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// startConverter serves the operator's own ConversionReview handler on loopback with a
// certificate from servingcert, for the suite's CRD: the local cluster's API server cannot call
// the default install's webhook through its Service (no kube-proxy: a ClusterIP leads nowhere,
// and a Service name goes out through this machine's HTTPS proxy), so after applying the default
// install the tests point its CRD's clientConfig here (pointConversionAtSuite). The in-cluster
// operator still serves its own webhook and writes its CA into the same caBundle.
func startConverter(dir string) (url string, ca []byte, stop func(), err error) {
	p, err := servingcert.EnsureDir(filepath.Join(dir, "converter-certs"), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		return "", nil, nil, err
	}
	cfg, err := p.TLSConfig()
	if err != nil {
		return "", nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(crd.WebhookPath, webhook.ConvertHandler())
	srv := &http.Server{Handler: mux, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return "https://" + ln.Addr().String() + crd.WebhookPath, p.CA, func() { _ = srv.Close() }, nil
}

// pointConversionAtSuite sets the CRD's conversion webhook to the suite's converter (its URL
// and CA) in place of the install's Service, after an apply of the default install. It applies
// the last applied configuration with that change, so the next kubectl apply of the install
// replaces the URL with its Service (a merge patch would leave both, which the API server
// refuses).
// probes counts the conversion probes, each in a namespace of its own.
var probes int

func pointConversionAtSuite(t *testing.T) {
	t.Helper()
	u, err := env.Dyn.Resource(crd.CRDResource).Get(context.Background(), crd.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(u.GetAnnotations()[corev1.LastAppliedConfigAnnotation]), &last); err != nil {
		t.Fatalf("the CRD's last applied configuration: %v", err)
	}
	if err := unstructured.SetNestedField(last, map[string]any{"url": env.convertURL, "caBundle": base64.StdEncoding.EncodeToString(env.convertCA)},
		"spec", "conversion", "webhook", "clientConfig"); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(last)
	if err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "apply", "-f", writeFile(t, "crd-converter.json", string(raw)))
	// Conversions answer through it: a v1beta1 object read as v1alpha1 converts whatever else
	// is stored, where a list of an empty store converts nothing and passed while the API
	// server still called the manifests' Service, whose name, looked up outside the cluster,
	// reached whatever answers it there.
	probes++
	ns := env.CreateNamespace(t, fmt.Sprintf("conversion-probe-%d", probes))
	beta := crd.Resource.GroupResource().WithVersion(crd.VersionV1beta1)
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersionV1beta1.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": "conversion-probe", "namespace": ns},
		"spec":     map[string]any{"baseModel": "Qwen/Qwen3-0.6B", "replicas": int64(0)},
	}}
	if _, err := env.Dyn.Resource(beta).Namespace(ns).Create(context.Background(), probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "conversions through the suite's converter", func() error {
		_, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Get(context.Background(), "conversion-probe", metav1.GetOptions{})
		return err
	})
	if err := env.Dyn.Resource(beta).Namespace(ns).Delete(context.Background(), "conversion-probe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// restoreSuiteCRD rolls the CRD back to the suite's (manifests/crd, as
// manifests/overlays/v1alpha1 installs it) the documented way: v1alpha1 stored with both served
// (conversions through the suite's converter), every object rewritten by crd/storage's
// migration, storedVersions [v1alpha1], then the v1alpha1-only CRD.
func restoreSuiteCRD(t *testing.T) {
	t.Helper()
	u, err := env.Dyn.Resource(crd.CRDResource).Get(context.Background(), crd.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored, _, _ := unstructured.NestedStringSlice(u.Object, "status", "storedVersions"); slices.Equal(stored, []string{crd.Version}) {
		if s, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "strategy"); s != "Webhook" {
			return // already the suite's
		}
	}
	def := crd.DefinitionWithV1beta1(apiextensionsv1.WebhookClientConfig{URL: &env.convertURL, CABundle: env.convertCA})
	def.Spec.Versions[0].Storage, def.Spec.Versions[1].Storage = true, false
	raw, err := yaml.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "apply", "-f", writeFile(t, "crd-rollback.yaml", string(raw)))
	testenv.Eventually(t, 2*time.Minute, "storedVersions [v1alpha1]", func() error {
		if _, err := storage.Migrate(context.Background(), env.Dyn); err != nil {
			return err
		}
		_, stored, _, err := storage.State(context.Background(), env.Dyn)
		if err != nil {
			return err
		}
		if !slices.Equal(stored, []string{crd.Version}) {
			return fmt.Errorf("storedVersions %v", stored)
		}
		return nil
	})
	env.Kubectl(t, "apply", "-k", filepath.Join(env.Root, "manifests", "crd"))
}

// rollBackInstall is the documented rollback of the default install to
// manifests/overlays/v1alpha1: storage back to v1alpha1 (restoreSuiteCRD), the overlay applied
// (the operator without its webhook), and what the overlay no longer has deleted. The rest of
// the suite then runs on the install as it was before v1beta1 became the default.
func rollBackInstall(t *testing.T) {
	t.Helper()
	restoreSuiteCRD(t)
	env.Kubectl(t, "apply", "-k", filepath.Join(env.Root, "manifests", "overlays", "v1alpha1"))
	env.Kubectl(t, "delete", "--ignore-not-found", "-n", systemNamespace, "service", "inferenceservice-operator-webhook")
	env.Kubectl(t, "delete", "--ignore-not-found", "clusterrole,clusterrolebinding", "inferenceservice-operator-storage-migration")
}
