package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestWeightsFetchedOnce is issue 36's acceptance: two models on the same weights with a
// managed cache (spec.cache.size) share one claim filled by one Job; while it fills, the status
// names the download with its progress moving; both turn Ready on the filled claim, and
// neither's pods nor a scale-up's download (they run offline on it: a download would fail).
func TestWeightsFetchedOnce(t *testing.T) {
	ns := modelNamespace(t)
	w := useWebhookCRD(t)
	kubectl := func(args ...string) string { return env.Kubectl(t, append([]string{w.cache}, args...)...) }
	ctx := context.Background()

	// A volume behind a slow link (the fake kubelet's kubelet.fake/download-mb-per-s): Qwen3-0.6B's
	// weights take about 25 s to fill at the suite's time scale, long enough to watch.
	class := slowVolume(t, ns, "weights", 0.5)
	model := func(name string) string {
		return fmt.Sprintf(`apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: %s}
spec:
  baseModel: Qwen/Qwen3-0.6B
  replicas: 1
  gpusPerReplica: 1
  cache: {size: 10Gi, storageClassName: %s}
`, name, class)
	}
	f := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(f, []byte(model("first")+"---\n"+model("second")), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	kubectl("apply", "-n", ns, "-f", f)
	claim := reconcile.WeightsClaimName("Qwen/Qwen3-0.6B", "main")

	// While it fills: the status names the download, and its byte count moves.
	figure := regexp.MustCompile(`: ([0-9.]+ [kMG]?B) of `)
	var seen []string
	var bytes []int64 // v1beta1's status.cache.bytes
	testenv.Eventually(t, 3*time.Minute, "the download's progress moving in status", func() error {
		i, err := env.ISVC(ns, "second")
		if err != nil {
			return err
		}
		msg := readyMessage(i)
		if m := figure.FindStringSubmatch(msg); m != nil && i.Status.Reason == reconcile.ReasonWeightsDownloading && !slices.Contains(seen, m[1]) {
			seen = append(seen, m[1])
			t.Logf("%5.1fs %s", time.Since(start).Seconds(), msg)
		}
		if u, err := getVersion(t, true, ns, "second"); err == nil {
			if b, ok := nested(u, "status", "cache", "bytes").(int64); ok && nested(u, "status", "cache", "phase") == crd.CacheFilling && !slices.Contains(bytes, b) {
				bytes = append(bytes, b)
			}
		}
		if len(seen) < 3 || len(bytes) < 2 {
			return fmt.Errorf("progress seen %v, status.cache.bytes %v; now %s %q", seen, bytes, i.Status.Reason, msg)
		}
		return nil
	})
	t.Logf("status.cache.bytes seen %v", bytes)
	row := getRow(t, ns, "first")
	if !strings.Contains(row, reconcile.ReasonWeightsDownloading) {
		t.Logf("first while filling: %s", row)
	}
	// No model pod while the cache fills.
	if pods := modelPods(t, ns, ""); len(pods) > 0 {
		t.Fatalf("%d model pods before the weights are filled", len(pods))
	}

	for _, name := range []string{"first", "second"} {
		env.WaitPhase(t, ns, name, crd.PhaseReady, 3*time.Minute)
	}
	t.Logf("both Ready %.1fs after the create", time.Since(start).Seconds())
	for _, name := range []string{"first", "second"} {
		u, err := getVersion(t, true, ns, name)
		if err != nil || nested(u, "status", "cache", "phase") != crd.CacheFilled || nested(u, "status", "cache", "claim") != claim {
			t.Fatalf("%s status.cache: %v %v", name, err, nested(u, "status", "cache"))
		}
	}

	// One claim, one Job, one fill pod; each model an owner of both.
	pvcs, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: reconcile.WeightsLabel})
	if err != nil || len(pvcs.Items) != 1 || pvcs.Items[0].Name != claim || len(pvcs.Items[0].OwnerReferences) != 2 ||
		pvcs.Items[0].Annotations[reconcile.WeightsFilledAnnotation] != "true" {
		t.Fatalf("claims: %v %+v", err, pvcs)
	}
	jobs, err := env.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: reconcile.WeightsLabel})
	if err != nil || len(jobs.Items) != 1 || len(jobs.Items[0].OwnerReferences) != 2 || jobs.Items[0].Status.Succeeded != 1 {
		t.Fatalf("jobs: %v %+v", err, jobs)
	}
	fills, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: reconcile.WeightsLabel})
	if err != nil || len(fills.Items) != 1 {
		t.Fatalf("fill pods: %v %d", err, len(fills.Items))
	}

	// A scale-up starts on the filled cache too.
	kubectl("scale", "inferenceservices.v1beta1.ai.example.com/first", "-n", ns, "--replicas=2")
	testenv.Eventually(t, 2*time.Minute, "first at 2 ready replicas", func() error {
		i, err := env.ISVC(ns, "first")
		if err != nil {
			return err
		}
		if i.Status.ReadyReplicas != 2 || i.Status.Phase != crd.PhaseReady {
			return fmt.Errorf("%s %d ready", i.Status.Phase, i.Status.ReadyReplicas)
		}
		return nil
	})
	pods := modelPods(t, ns, "")
	if len(pods) != 3 {
		t.Fatalf("%d model pods, want 3", len(pods))
	}
	for _, p := range pods {
		log, err := env.Kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), "Time spent downloading weights") || !strings.Contains(string(log), "Starting to load model") {
			t.Fatalf("pod %s downloaded, or never loaded:\n%s", p.Name, log)
		}
		v := slices.IndexFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil })
		if v < 0 || p.Spec.Volumes[v].PersistentVolumeClaim.ClaimName != claim || !p.Spec.Volumes[v].PersistentVolumeClaim.ReadOnly {
			t.Fatalf("pod %s volumes %+v", p.Name, p.Spec.Volumes)
		}
	}
	if fills, _ := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: reconcile.WeightsLabel}); len(fills.Items) != 1 {
		t.Fatalf("%d fill pods after the scale-up", len(fills.Items))
	}
	t.Logf("3 model pods started on %s without a download; one fill", claim)
}

// modelPods are the namespace's model server pods (of one model, or all with "").
func modelPods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	sel := "ai.example.com/inferenceservice"
	if name != "" {
		sel += "=" + name
	}
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
			out = append(out, p)
		}
	}
	return out
}

// slowVolume is a PersistentVolume NAME-ns of its own storage class (the same name), 20Gi,
// behind a link of mbps MB/s (the fake kubelet's kubelet.fake/download-mb-per-s); it returns
// the name. Deleted at the test's end.
func slowVolume(t *testing.T, ns, name string, mbps float64) string {
	t.Helper()
	pv := name + "-" + ns
	t.Cleanup(func() { env.Kubectl(t, "delete", "pv", pv, "--wait=false") })
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s
  annotations: {kubelet.fake/download-mb-per-s: "%g"}
spec:
  capacity: {storage: 20Gi}
  accessModes: [ReadWriteMany]
  storageClassName: %s
  hostPath: {path: /tmp/%s}
`, pv, mbps, pv, pv))
	return pv
}
