package incluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestDeleteKRemovesTheAdaptersAPIServices: the metrics adapter installed with
// kubectl apply -k manifests/metrics-adapter registers custom.metrics.k8s.io at run time;
// kubectl delete -k of the same directory, which knows nothing of objects made at run time,
// leaves no APIService of the adapter's behind (an unavailable one blinds every HPA and hangs
// every namespace deletion), and a namespace deletion afterwards completes.
func TestDeleteKRemovesTheAdaptersAPIServices(t *testing.T) {
	ctx := testenv.Ctx(t, 8*time.Minute)
	dir := filepath.Join(env.Root, "manifests", "metrics-adapter")
	apiServices := env.Dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	names := []string{"v1beta2.custom.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io"}
	t.Cleanup(func() {
		for _, n := range names {
			_ = apiServices.Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	env.Kubectl(t, "apply", "-k", dir)
	installed := true
	t.Cleanup(func() {
		if installed {
			_, _, _ = env.Cluster.Kubectl(context.Background(), "delete", "-k", dir, "--ignore-not-found")
		}
	})

	// The adapter as its pod would run it (the local cluster's pods have no network): its
	// ServiceAccount, reached through its Service turned into an ExternalName for 127.0.0.1.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	env.Kubectl(t, "patch", "service", "-n", systemNamespace, "inferenceservice-metrics-adapter", "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"type":"ExternalName","externalName":"127.0.0.1","selector":null,"ports":[{"name":"https","port":%d,"targetPort":%d}]}}`, port, port))
	kubeconfig, err := env.Cluster.ServiceAccountKubeconfig(ctx, systemNamespace, "inferenceservice-metrics-adapter")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := operator.BuildMetricsAdapter(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := operator.StartMetricsAdapter(ctx, bin, filepath.Join(env.Dir, "metrics-adapter-delete-k.log"), kubeconfig, t.TempDir(), port,
		fmt.Sprintf("--apiservice-port=%d", port), "--apiservice-resync=2s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Kill)
	env.Kubectl(t, "wait", "--for=condition=Available", "apiservice/"+names[0], testenv.Timeout(2*time.Minute))
	t.Logf("$ kubectl get apiservice %s\n%s", names[0], env.Kubectl(t, "get", "apiservice", names[0]))

	// Removed: its pods go (its stand-in with them), then the manifests' objects.
	a.Kill()
	t.Logf("$ kubectl delete -k manifests/metrics-adapter\n%s", env.Kubectl(t, "delete", "-k", dir))
	installed = false
	gone := testenv.Scaled(2 * time.Minute)
	for deadline := time.Now().Add(gone); ; time.Sleep(100 * time.Millisecond) {
		var left []string
		for _, n := range names {
			if _, err := apiServices.Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s after kubectl delete -k: %v", gone, left)
			break
		}
	}

	ns := env.CreateNamespace(t, "after-delete-k")
	if err := env.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
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
