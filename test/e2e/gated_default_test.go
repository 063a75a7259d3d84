package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestDefaultInstallServesGatedModel: on the default install's CRD (v1beta1, written as users
// write it), a gated model (meta-llama/*, which the local cluster's hub refuses without a token,
// in huggingface_hub's GatedRepoError words) crash-loops without HF_TOKEN and the operator's
// status quotes why; with spec.env's HF_TOKEN from a Secret (valueFrom.secretKeyRef, as
// manifests/samples/llama-70b.yaml) it becomes Ready and serves, the token never copied into the
// Deployment.
func TestDefaultInstallServesGatedModel(t *testing.T) {
	ns := env.Namespace(t)
	const name, model = "llama", "meta-llama/Llama-3.1-8B-Instruct"
	t.Cleanup(func() { env.Kubectl(t, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=120s") })
	useDefaultInstallCRD(t)
	ctx := context.Background()
	res := env.Dyn.Resource(crd.ResourceV1beta1).Namespace(ns)
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": crd.GroupVersionV1beta1.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"baseModel": model, "replicas": int64(1), "gpusPerReplica": int64(1)}}}
	if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyCondition := func(u *unstructured.Unstructured) (reason, message string) {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Ready" {
				return fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
			}
		}
		return "", ""
	}
	testenv.Eventually(t, 3*time.Minute, "without a token: the gated repo's refusal in status", func() error {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		reason, msg := readyCondition(u)
		if !strings.Contains(msg, "gated repo") && !strings.Contains(msg, "GatedRepoError") && !strings.Contains(msg, "is restricted") {
			return fmt.Errorf("phase %v, Ready %s: %q", nested(u, "status", "phase"), reason, msg)
		}
		t.Logf("without HF_TOKEN: phase %v, Ready %s: %s", nested(u, "status", "phase"), reason, msg)
		return nil
	})

	if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hf-token"},
		StringData: map[string]string{"token": "hf_e2e_token"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := `{"spec":{"env":[{"name":"HF_TOKEN","valueFrom":{"secretKeyRef":{"name":"hf-token","key":"token"}}}]}}`
	if _, err := res.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, "with HF_TOKEN from the Secret: Ready", func() error {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if nested(u, "status", "phase") != string(crd.PhaseReady) || nested(u, "status", "modelName") != model {
			reason, msg := readyCondition(u)
			return fmt.Errorf("phase %v, modelName %v, Ready %s: %q", nested(u, "status", "phase"), nested(u, "status", "modelName"), reason, msg)
		}
		return nil
	})
	servesAs(t, ns, name, model)
	d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "HF_TOKEN" })
	if i < 0 || c.Env[i].Value != "" || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil || c.Env[i].ValueFrom.SecretKeyRef.Name != "hf-token" {
		t.Fatalf("the Deployment's HF_TOKEN: %+v; want a secretKeyRef to hf-token and no value", c.Env)
	}
}
