package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// istioDestinationRules is Istio's DestinationRule resource, as the test gateway's Istio mode
// reads it (spelled here so the test also runs against an operator that knows nothing of it).
var istioDestinationRules = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}

// withIstioGateway is withGateway on an Istio-like cluster: Istio's DestinationRule CRD
// (istio.io/api v1.32.0's, test/epp/gateway) installed before the operator starts (it
// discovers optional kinds at start), and the test gateway in its Istio mode: plaintext to a
// pool's picker unless a DestinationRule for the picker's host says TLS.
func withIstioGateway(t *testing.T, ns, logName string) string {
	t.Helper()
	eppBin, _ := poolBins(t)
	return withGatewayWorld(t, ns, logName, gatewayWorld{
		crds:           []string{filepath.Join(operator.EPPManifests(eppBin), "crd")},
		serverSideCRDs: []string{filepath.Join("..", "epp", "gateway", "destinationrule-crd.yaml")},
		gatewayArgs:    []string{"--istio"},
	})
}

// TestGatewayPickerIstio: on Istio the picker (cmd/epp v1.5.0, TLS by default) is reached in
// plaintext unless a DestinationRule says TLS, so with FailClose every pooled request fails
// while the model says Routed. The operator makes the rule the extension's chart ships (TLS,
// insecureSkipVerify) for each model's picker, corrects it, and deletes it with the model;
// Routed is True only once it is in place, and the requests are served by the pool's pods.
func TestGatewayPickerIstio(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	gwAddr := withIstioGateway(t, ns, "gateway-istio.log")
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: m
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"gateway":{"route":"/`+ns+`/m"}}'}
spec: {model: Qwen/Qwen3-8B, replicas: 1, gpusPerReplica: 1}
`)
	var routed *metav1.Condition
	testenv.Eventually(t, 3*time.Minute, "Routed through the pool", func() error {
		i, err := env.ISVC(ns, "m")
		if err != nil {
			return err
		}
		routed = meta.FindStatusCondition(i.Status.Conditions, crd.ConditionRouted)
		if routed == nil || routed.Status != metav1.ConditionTrue || routed.Reason != reconcile.ReasonPoolRoute || i.Status.ReadyReplicas < 1 {
			return fmt.Errorf("ready %d, Routed %+v", i.Status.ReadyReplicas, routed)
		}
		return nil
	})
	t.Logf("Routed: %s %s: %s", routed.Status, routed.Reason, routed.Message)

	// Routed says the gateway can use the pool: then a request through it is served.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
	url := "http://" + gwAddr + "/" + ns + "/m/v1/completions"
	ask := func(n int) (string, error) {
		body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-8B", "prompt": fmt.Sprintf("request %d", n), "max_tokens": 1})
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
		}
		return resp.Header.Get("x-gateway-destination-endpoint"), nil
	}
	failed, n := 0, 0
	testenv.Eventually(t, 30*time.Second, "a request through the pool served, with Routed True", func() error {
		n++
		_, err := ask(n)
		if err != nil {
			failed++
		}
		return err
	})
	for i := 0; i < 10; i++ {
		if ep, err := ask(100 + i); err != nil || ep == "" {
			t.Fatalf("request %d through the pool: %q %v", i, ep, err)
		}
	}
	t.Logf("%d requests failed before the first served (the gateway's rule cache catching up), then 10 of 10 served", failed)

	dr, err := env.Dyn.Resource(istioDestinationRules).Namespace(ns).Get(ctx, reconcile.PickerName("m"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the picker's DestinationRule: %v", err)
	}
	host, _, _ := unstructured.NestedString(dr.Object, "spec", "host")
	mode, _, _ := unstructured.NestedString(dr.Object, "spec", "trafficPolicy", "tls", "mode")
	if ref := metav1.GetControllerOf(dr); ref == nil || ref.Kind != "InferenceService" || ref.Name != "m" || host != "m-epp."+ns+".svc.cluster.local" || mode != "SIMPLE" {
		t.Fatalf("DestinationRule: controller %v, host %q, tls %q", metav1.GetControllerOf(dr), host, mode)
	}
	svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, reconcile.PickerName("m"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range svc.Spec.Ports {
		if p.AppProtocol != nil {
			t.Fatalf("picker Service port %s has appProtocol %q; the chart's has none", p.Name, *p.AppProtocol)
		}
	}

	// Someone turns TLS off: the operator restores it.
	env.Kubectl(t, "-n", ns, "patch", "destinationrules.networking.istio.io", reconcile.PickerName("m"), "--type=merge", "-p", `{"spec":{"trafficPolicy":{"tls":{"mode":"DISABLE"}}}}`)
	testenv.Eventually(t, time.Minute, "the DestinationRule's TLS restored", func() error {
		u, err := env.Dyn.Resource(istioDestinationRules).Namespace(ns).Get(ctx, reconcile.PickerName("m"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if m, _, _ := unstructured.NestedString(u.Object, "spec", "trafficPolicy", "tls", "mode"); m != "SIMPLE" {
			return fmt.Errorf("tls mode %q", m)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "a request served after the correction", func() error { _, err := ask(200); return err })

	env.Kubectl(t, "delete", "isvc", "m", "-n", ns, "--wait=true", "--timeout=60s")
	testenv.Eventually(t, time.Minute, "the DestinationRule gone with the model", func() error {
		if _, err := env.Dyn.Resource(istioDestinationRules).Namespace(ns).Get(ctx, reconcile.PickerName("m"), metav1.GetOptions{}); err == nil {
			return fmt.Errorf("DestinationRule %s still there", reconcile.PickerName("m"))
		} else if !strings.Contains(err.Error(), "not found") {
			return err
		}
		return nil
	})
}
