package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestScaleDownDelay: spec.autoscaling.scaleDownDelaySeconds, applied with kubectl on the
// v1beta1 install, is the HPA's scale-down stabilization window; an edit moves it with one HPA
// spec update, removing it leaves the window to the HPA controller, a change of another child
// leaves the HPA unwritten, v1alpha1 reads keep the value, and the API server refuses a value
// outside 0..3600 with the CRD's message.
func TestScaleDownDelay(t *testing.T) {
	ns := modelNamespace(t)
	w := useWebhookCRD(t)
	kubectlOut := func(args ...string) (string, error) { return kubectlErr(t, nil, append([]string{w.cache}, args...)...) }
	apply := func(spec string, dryRun bool) (string, error) {
		f := filepath.Join(t.TempDir(), "sd.yaml")
		manifest := "apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: sd}\nspec:\n  baseModel: Qwen/Qwen3-0.6B\n  gpusPerReplica: 1\n" + spec
		if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"apply", "-n", ns, "-f", f}
		if dryRun {
			args = append(args, "--dry-run=server")
		}
		return kubectlOut(args...)
	}
	mustApply := func(spec string) {
		t.Helper()
		if out, err := apply(spec, false); err != nil {
			t.Fatalf("kubectl apply: %v: %s", err, out)
		}
	}
	ctx := context.Background()
	hpa := func() (*autoscalingv2.HorizontalPodAutoscaler, error) {
		return env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "sd", metav1.GetOptions{})
	}
	window := func(h *autoscalingv2.HorizontalPodAutoscaler) string {
		if b := h.Spec.Behavior; b != nil && b.ScaleDown != nil && b.ScaleDown.StabilizationWindowSeconds != nil {
			return fmt.Sprint(*b.ScaleDown.StabilizationWindowSeconds)
		}
		return "unset"
	}
	// waitWindow waits for the HPA's window and returns the HPA's generation then.
	waitWindow := func(want string) int64 {
		t.Helper()
		var gen int64
		testenv.Eventually(t, 60*time.Second, "the HPA's scale-down window "+want, func() error {
			h, err := hpa()
			if err != nil {
				return err
			}
			if got := window(h); got != want {
				return fmt.Errorf("window %s", got)
			}
			gen = h.Generation
			return nil
		})
		return gen
	}

	mustApply("  autoscaling: {minReplicas: 1, maxReplicas: 3, scaleDownDelaySeconds: 600}\n")
	gen := waitWindow("600")
	behavior, _ := kubectlOut("get", "hpa", "sd", "-n", ns, "-o", "jsonpath={.spec.behavior}")
	t.Logf("applied scaleDownDelaySeconds: 600; the HPA's behavior as stored (the API server fills in the rest): %s", behavior)
	h, err := hpa()
	if err != nil {
		t.Fatal(err)
	}
	if up := h.Spec.Behavior.ScaleUp; up == nil || up.StabilizationWindowSeconds == nil || *up.StabilizationWindowSeconds != 0 {
		t.Fatalf("scale-up must stay immediate (no window): %+v", up)
	}
	if ann, _ := kubectlOut("get", "inferenceservices.v1alpha1.ai.example.com/sd", "-n", ns, "-o", `jsonpath={.metadata.annotations.ai\.example\.com/v1beta1-spec}`); !strings.Contains(ann, `"scaleDownDelaySeconds":600`) {
		t.Fatalf("read as v1alpha1, the delay is lost: annotation %s", ann)
	}

	// An edit: one HPA spec update (generation +1), carrying the new window.
	mustApply("  autoscaling: {minReplicas: 1, maxReplicas: 3, scaleDownDelaySeconds: 120}\n")
	if g := waitWindow("120"); g != gen+1 {
		t.Fatalf("HPA generation %d -> %d: want one spec update for the edit", gen, g)
	} else {
		gen = g
	}
	t.Logf("edited to 120: the HPA followed with one spec update (generation %d)", gen)

	// Another child changes (the Deployment, through engineArgs); the HPA is not written.
	d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "sd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustApply("  autoscaling: {minReplicas: 1, maxReplicas: 3, scaleDownDelaySeconds: 120}\n  engineArgs: [--max-model-len, \"4096\"]\n")
	testenv.Eventually(t, 60*time.Second, "the Deployment updated for engineArgs", func() error {
		d2, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "sd", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d2.Generation == d.Generation {
			return fmt.Errorf("deployment generation still %d", d2.Generation)
		}
		return nil
	})
	if h, err := hpa(); err != nil || h.Generation != gen || window(h) != "120" {
		t.Fatalf("a reconcile that changed only the Deployment wrote the HPA: %v, generation %d -> %d", err, gen, h.Generation)
	}

	// Removed: the window goes back to the HPA controller's default.
	mustApply("  autoscaling: {minReplicas: 1, maxReplicas: 3}\n  engineArgs: [--max-model-len, \"4096\"]\n")
	if g := waitWindow("unset"); g != gen+1 {
		t.Fatalf("HPA generation %d -> %d: want one spec update for the removal", gen, g)
	}
	t.Log("field removed: the window is unset again (the HPA controller's default applies)")

	// Out of range: refused by the API server with the CRD's message, nothing stored.
	for _, bad := range []string{"3601", "-1"} {
		out, err := apply("  autoscaling: {minReplicas: 1, maxReplicas: 3, scaleDownDelaySeconds: "+bad+"}\n", true)
		if err == nil || !strings.Contains(out, crd.RuleScaleDownDelayMessage) {
			t.Fatalf("scaleDownDelaySeconds %s: want a refusal with %q, got %v: %s", bad, crd.RuleScaleDownDelayMessage, err, out)
		}
		t.Logf("kubectl apply --dry-run=server with scaleDownDelaySeconds %s: %s", bad, strings.TrimSpace(out))
	}
}
