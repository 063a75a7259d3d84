package chart

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

var apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// customMetrics are the APIServices the metrics adapter registers.
var customMetrics = []string{"v1beta2.custom.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io"}

const adapterName = "inferenceservice-metrics-adapter"

// within polls cond until it returns nil and reports whether it did before timeout; on a
// timeout the test is marked failed with cond's last error and goes on, so one run shows every
// step that fails.
func within(t *testing.T, timeout time.Duration, what string, cond func() error) bool {
	t.Helper()
	timeout = testenv.Scaled(timeout)
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("timed out after %s waiting for %s: %v", timeout, what, err)
			return false
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

// runAdapter runs the metrics adapter binary as the chart's adapter pod in ns would run: the
// Deployment's args and env (the downward API resolved), its volumes' Secrets written to local
// directories standing in for the mounts, and its ServiceAccount's token. The local cluster's
// pods have no network and EndpointSlices refuse loopback addresses, so the chart's Service is
// turned into an ExternalName for 127.0.0.1 on the adapter's port, which the aggregator dials
// as it would the Service's endpoints (the TLS server name stays <service>.<ns>.svc).
func runAdapter(t *testing.T, ns string) *operator.MetricsAdapter {
	t.Helper()
	ctx := testenv.Ctx(t, 3*time.Minute)
	d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, adapterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	// Each mount is a local directory; a Secret volume's keys are written into it.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		dir := t.TempDir()
		mounts[m.MountPath] = dir
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			var s *corev1.Secret
			testenv.Eventually(t, time.Minute, "the adapter's Secret "+v.Secret.SecretName, func() error {
				s, err = env.Kube.CoreV1().Secrets(ns).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
				return err
			})
			for k, b := range s.Data {
				if err := os.WriteFile(filepath.Join(dir, k), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	local := func(a string) string {
		for from, to := range mounts {
			a = strings.ReplaceAll(a, "="+from, "="+to)
		}
		return a
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var args []string
	certDir := t.TempDir()
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--secure-port="):
		case strings.HasPrefix(a, "--cert-dir="):
			certDir = local(a)[len("--cert-dir="):]
		default:
			args = append(args, local(a))
		}
	}
	args = append(args, fmt.Sprintf("--apiservice-port=%d", port), "--apiservice-resync=2s", "-v=2")
	var envs []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			envs = append(envs, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			envs = append(envs, e.Name+"="+ns)
		default:
			t.Fatalf("env %s: a source the test does not resolve", e.Name)
		}
	}
	env.Kubectl(t, "patch", "service", "-n", ns, adapterName, "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"type":"ExternalName","externalName":"127.0.0.1","selector":null,"ports":[{"name":"https","port":%d,"targetPort":%d}]}}`, port, port))
	kubeconfig, err := env.Cluster.ServiceAccountKubeconfig(ctx, ns, adapterName)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := operator.BuildMetricsAdapter(ctx, env.Dir)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(env.Dir, "metrics-adapter-"+ns+".log")
	a, err := operator.StartMetricsAdapterEnv(ctx, envs, bin, log, kubeconfig, certDir, port, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Kill)
	t.Logf("metrics adapter running with %v and %v (log %s)", envs, args, log)
	return a
}

// asServiceAccount is a dynamic client with ns/name's token.
func asServiceAccount(t *testing.T, ns, name string) dynamic.Interface {
	t.Helper()
	kc, err := env.Cluster.ServiceAccountKubeconfig(testenv.Ctx(t, time.Minute), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// noAdapterAPIServices waits until neither of the adapter's APIServices exists, else marks the
// test failed and goes on.
func noAdapterAPIServices(t *testing.T, ctx context.Context) bool {
	t.Helper()
	return within(t, 2*time.Minute, "no APIService of the adapter's left", func() error {
		var left []string
		for _, name := range customMetrics {
			if _, err := env.Dyn.Resource(apiServicesGVR).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%s (%v)", name, err))
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
}

// apiServiceNames lists every APIService by name, one a line, but the one the chart's CRD adds
// (kept on uninstall with the CRD, crds.keep).
func apiServiceNames(t *testing.T) string {
	t.Helper()
	l, err := env.Dyn.Resource(apiServicesGVR).List(testenv.Ctx(t, time.Minute), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range l.Items {
		if !strings.HasSuffix(u.GetName(), ".ai.example.com") {
			names = append(names, u.GetName())
		}
	}
	return strings.Join(names, "\n")
}

// available says whether the aggregator reports the APIService Available, else why not.
func available(ctx context.Context, name string) error {
	u, err := env.Dyn.Resource(apiServicesGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" {
			if m["status"] == "True" {
				return nil
			}
			return fmt.Errorf("%s Available %v: %v %v", name, m["status"], m["reason"], m["message"])
		}
	}
	return fmt.Errorf("%s: no Available condition", name)
}

// TestHelmInstallInAnotherNamespace: installed with helm install -n my-ns --create-namespace, as the README
// documents, the metrics adapter registers custom.metrics.k8s.io against its own Service in
// my-ns, verified by the CA bundle the install provides, and the aggregator serves it; its
// ServiceAccount can register no other APIService; helm uninstall removes the APIServices it
// registered, and only those, so a namespace deletion afterwards completes.
func TestHelmInstallInAnotherNamespace(t *testing.T) {
	const ns = "my-ns"
	bin, err := Bin(testenv.Ctx(t, 15*time.Minute), env.Root)
	if err != nil {
		t.Fatal(err)
	}
	h := Helm{Bin: bin, Home: t.TempDir(), Kubeconfig: env.Cluster.KubeconfigPath()}
	apiServices := env.Dyn.Resource(apiServicesGVR)
	t.Cleanup(func() {
		_, _, _ = h.Run(context.Background(), env.Root, "uninstall", release, "-n", ns, "--wait")
		for _, name := range append(customMetrics, "v1.evil.example.com") {
			_ = apiServices.Delete(context.Background(), name, metav1.DeleteOptions{})
		}
		adoptCRD(t, systemNamespace)
	})
	ctx := testenv.Ctx(t, 12*time.Minute)
	// Every other component's APIServices (the API server's own here): an uninstall leaves them.
	before := apiServiceNames(t)

	adoptCRD(t, ns) // kept by an earlier test's release in inferenceservice-system
	helmCmd(t, h, "install", release, Dir, "-n", ns, "--create-namespace", "--wait", "--timeout", testenv.Scaled(3*time.Minute).String())
	a := runAdapter(t, ns)

	// The aggregator reaches the adapter through the Service in my-ns, verifying its certificate.
	if within(t, 2*time.Minute, "custom.metrics.k8s.io Available", func() error { return available(ctx, customMetrics[0]) }) {
		t.Logf("$ kubectl get apiservice %s\n%s", customMetrics[0], env.Kubectl(t, "get", "apiservice", customMetrics[0]))
		// What the HPA controller asks goes through: the aggregator proxies to the adapter.
		within(t, time.Minute, "the metric's discovery through the aggregator", func() error {
			out, _, err := env.Cluster.Kubectl(ctx, "get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2")
			if err == nil && !strings.Contains(out, "pods/num_requests_waiting") {
				err = fmt.Errorf("no pods/num_requests_waiting in %s", out)
			}
			return err
		})
	}
	for _, name := range customMetrics {
		u, err := apiServices.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("APIService %s: %v", name, err)
			continue
		}
		svc, _, _ := unstructured.NestedString(u.Object, "spec", "service", "namespace")
		insecure, _, _ := unstructured.NestedBool(u.Object, "spec", "insecureSkipTLSVerify")
		ca, _, _ := unstructured.NestedString(u.Object, "spec", "caBundle")
		if svc != ns || insecure || ca == "" {
			t.Errorf("APIService %s: service namespace %q, insecureSkipTLSVerify %v, caBundle %d bytes; want %s, false, the install's CA", name, svc, insecure, len(ca), ns)
		}
	}

	// The adapter's ServiceAccount cannot claim another API group, nor point ours elsewhere.
	sa := asServiceAccount(t, ns, adapterName).Resource(apiServicesGVR)
	evil := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1.evil.example.com"},
		"spec": map[string]any{"group": "evil.example.com", "version": "v1", "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"insecureSkipTLSVerify": true, "service": map[string]any{"namespace": ns, "name": adapterName, "port": int64(443)}},
	}}
	if _, err := sa.Create(ctx, evil, metav1.CreateOptions{}); err == nil {
		t.Errorf("the adapter's ServiceAccount created APIService %s", evil.GetName())
	} else {
		t.Logf("the adapter's ServiceAccount creating APIService %s: %v", evil.GetName(), err)
	}
	if u, err := apiServices.Get(ctx, customMetrics[1], metav1.GetOptions{}); err == nil {
		_ = unstructured.SetNestedField(u.Object, "elsewhere", "spec", "service", "namespace")
		if _, err := sa.Update(ctx, u, metav1.UpdateOptions{}); err == nil {
			t.Errorf("the adapter's ServiceAccount pointed %s at another namespace's Service", customMetrics[1])
		} else {
			t.Logf("the adapter's ServiceAccount pointing %s elsewhere: %v", customMetrics[1], err)
		}
	}

	// Uninstall: the adapter's pods go (its stand-in with them), then its APIServices, and
	// nothing else's.
	a.Kill()
	if _, _, err := h.Run(ctx, env.Root, "uninstall", release, "-n", ns, "--wait", "--timeout", testenv.Scaled(2*time.Minute).String()); err != nil {
		t.Errorf("helm uninstall: %v", err)
	}
	noAdapterAPIServices(t, ctx)
	if after := apiServiceNames(t); after != before {
		t.Errorf("APIServices after uninstall:\n%s\nwant those before install:\n%s", after, before)
	}

	// A namespace deletion completes: the namespace controller's discovery is whole again.
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "after-uninstall"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ns, "after-uninstall"} { // helm leaves the release's namespace
		if err := env.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{ns, "after-uninstall"} {
		within(t, 2*time.Minute, "namespace "+name+" deleted", func() error {
			n, err := env.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("phase %s, conditions %v", n.Status.Phase, n.Status.Conditions)
		})
	}
}

// TestHelmMetricSourceSwitchRemovesAPIServices: switching autoscaling.metricSource away from
// the adapter (helm upgrade) removes the adapter and, with it, the APIServices it registered
// at run time, which would otherwise point at a Service that no longer exists.
func TestHelmMetricSourceSwitchRemovesAPIServices(t *testing.T) {
	bin, err := Bin(testenv.Ctx(t, 15*time.Minute), env.Root)
	if err != nil {
		t.Fatal(err)
	}
	h := Helm{Bin: bin, Home: t.TempDir(), Kubeconfig: env.Cluster.KubeconfigPath()}
	t.Cleanup(func() {
		_, _, _ = h.Run(context.Background(), env.Root, "uninstall", release, "-n", systemNamespace, "--wait")
		for _, name := range customMetrics {
			_ = env.Dyn.Resource(apiServicesGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	ctx := testenv.Ctx(t, 8*time.Minute)
	releaseNamespace(t, systemNamespace)
	helmCmd(t, h, "install", release, Dir, "-n", systemNamespace, "--wait", "--timeout", testenv.Scaled(3*time.Minute).String())
	a := runAdapter(t, systemNamespace)
	if !within(t, 2*time.Minute, "custom.metrics.k8s.io Available", func() error { return available(ctx, customMetrics[0]) }) {
		return
	}
	a.Kill()
	helmCmd(t, h, "upgrade", release, Dir, "-n", systemNamespace, "--set", "autoscaling.metricSource=none", "--wait", "--timeout", testenv.Scaled(3*time.Minute).String())
	noAdapterAPIServices(t, ctx)
}
