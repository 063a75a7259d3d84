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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestWeightsFill is issue 50's items 5 to 8, on the local hub as the images' own
// huggingface_hub reaches it (test/localcluster/vllm/hf_download.go, hub.go): the fill runs on an
// image whose hub has no `hf` (v0.9) and its progress is read from the default image's 0.3x
// hub; it fetches the format vLLM would (gpt2's repo carries four) onto a claim that holds
// only that, and names a claim too small before downloading; a cached model loads its hf://
// adapters offline; a cached --trust-remote-code model starts on its read-only cache. The
// cases share one webhook CRD swap and run side by side, each in its own namespace.
func TestWeightsFill(t *testing.T) {
	w := useWebhookCRD(t)
	start := time.Now()
	// volume is a PersistentVolume of capacity behind a link of mbps MB/s (0: the kubelet's),
	// of a class of its own, deleted with the test.
	volume := func(t *testing.T, ns, name, capacity string, mbps float64) string {
		t.Helper()
		pv := name + "-" + ns
		t.Cleanup(func() { env.Kubectl(t, "delete", "pv", pv, "--wait=false") })
		ann := "{}"
		if mbps > 0 {
			ann = fmt.Sprintf(`{kubelet.fake/download-mb-per-s: "%g"}`, mbps)
		}
		applyYAML(t, ns, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s
  annotations: %s
spec:
  capacity: {storage: %s}
  accessModes: [ReadWriteMany]
  storageClassName: %s
  hostPath: {path: /tmp/%s}
`, pv, ann, capacity, pv, pv))
		return pv
	}
	apply := func(t *testing.T, ns, yaml string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "isvc.yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	}
	model := func(name, baseModel, class, size, extra string) string {
		return fmt.Sprintf(`apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: %s}
spec:
  baseModel: %s
  replicas: 1
  gpusPerReplica: 1
  cache: {size: %s, storageClassName: %s}
%s`, name, baseModel, size, class, extra)
	}
	ready := func(t *testing.T, ns, name string, within time.Duration) {
		t.Helper()
		testenv.Eventually(t, within, name+" Ready", func() error {
			i, err := env.ISVC(ns, name)
			if err != nil {
				return err
			}
			if i.Status.Phase != crd.PhaseReady {
				return fmt.Errorf("%s %s: %s", i.Status.Phase, i.Status.Reason, readyMessage(i))
			}
			return nil
		})
		t.Logf("%s Ready %.1fs into the test", name, time.Since(start).Seconds())
	}
	fillLog := func(t *testing.T, ns, claim string) string {
		t.Helper()
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: reconcile.WeightsLabel + "=" + claim})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("fill pods of %s: %v %d", claim, err, len(pods.Items))
		}
		log, err := env.Kube.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return string(log)
	}

	t.Run("group", func(t *testing.T) {
		// Item 5: the default image's hub (0.3x) prints per-file bars; the fill's progress is
		// still read into status. An image from before huggingface_hub 0.34 has no `hf`.
		t.Run("EveryImage", func(t *testing.T) {
			t.Parallel()
			ns := modelNamespace(t)
			slow := volume(t, ns, "slow", "20Gi", 0.5) // Qwen3-0.6B's weights: about 25 s at the suite's scale
			apply(t, ns, model("current", "Qwen/Qwen3-0.6B", slow, "10Gi", ""))
			figure := regexp.MustCompile(`: ([0-9.]+ [kMG]?B) of `)
			var seen []string
			testenv.Eventually(t, 2*time.Minute, "the default image's fill progress moving in status", func() error {
				i, err := env.ISVC(ns, "current")
				if err != nil {
					return err
				}
				msg := readyMessage(i)
				if m := figure.FindStringSubmatch(msg); m != nil && i.Status.Reason == reconcile.ReasonWeightsDownloading && !slices.Contains(seen, m[1]) {
					seen = append(seen, m[1])
					t.Logf("%5.1fs %s", time.Since(start).Seconds(), msg)
				}
				if len(seen) < 3 {
					return fmt.Errorf("progress seen %v; now %s %q", seen, i.Status.Reason, msg)
				}
				return nil
			})
			ready(t, ns, "current", 3*time.Minute)
		})
		t.Run("OlderImage", func(t *testing.T) {
			t.Parallel()
			ns := modelNamespace(t)
			pv := volume(t, ns, "older", "20Gi", 0)
			apply(t, ns, model("older", "Qwen/Qwen2.5-0.5B", pv, "10Gi", "  image: vllm/vllm-openai:v0.9.2\n"))
			ready(t, ns, "older", 2*time.Minute)
		})

		// Item 6: gpt2's repo carries its weights four times (safetensors, bin, h5, msgpack);
		// a claim of 600Mi holds one format, not the repo.
		t.Run("WhatVLLMFetches", func(t *testing.T) {
			t.Parallel()
			ns := modelNamespace(t)
			pv := volume(t, ns, "gpt2", "600Mi", 50)
			apply(t, ns, model("gpt2", "gpt2", pv, "600Mi", ""))
			ready(t, ns, "gpt2", 3*time.Minute)
			log := fillLog(t, ns, reconcile.WeightsClaimName("gpt2", "main"))
			for _, dup := range []string{"pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "No space left"} {
				if strings.Contains(log, dup) {
					t.Errorf("the fill fetched %s:\n%s", dup, log)
				}
			}
		})

		// Item 6: Qwen3-8B's 16 GB on a 10Gi claim is refused before a byte is fetched, in
		// status, by one fill pod (not retried: it cannot fit on a retry either).
		t.Run("ClaimTooSmall", func(t *testing.T) {
			t.Parallel()
			ns := modelNamespace(t)
			pv := volume(t, ns, "small", "10Gi", 1)
			apply(t, ns, model("big", "Qwen/Qwen3-8B", pv, "10Gi", ""))
			testenv.Eventually(t, 90*time.Second, "the claim named too small", func() error {
				i, err := env.ISVC(ns, "big")
				if err != nil {
					return err
				}
				if msg := readyMessage(i); i.Status.Reason != reconcile.ReasonWeightsDownloadFailed || !strings.Contains(msg, "more than the volume") {
					return fmt.Errorf("%s %q", i.Status.Reason, msg)
				}
				t.Logf("%.1fs: %s", time.Since(start).Seconds(), readyMessage(i))
				return nil
			})
			claim := reconcile.WeightsClaimName("Qwen/Qwen3-8B", "main")
			pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: reconcile.WeightsLabel + "=" + claim})
			if err != nil || len(pods.Items) != 1 {
				t.Fatalf("fill pods: %v %d, want 1", err, len(pods.Items))
			}
			if log := fillLog(t, ns, claim); strings.Contains(log, ".safetensors:") {
				t.Errorf("the fill downloaded before refusing:\n%s", log)
			}
			job, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), reconcile.WeightsJobName(claim), metav1.GetOptions{})
			if err != nil || !slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
				return c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue
			}) {
				t.Fatalf("fill Job not failed: %v %+v", err, job.Status)
			}
		})

		// Item 7: a cached model's pods run offline on a read-only cache; its hf:// adapter is
		// fetched by the fill, so vLLM's get_adapter_absolute_path finds it there.
		t.Run("Adapters", func(t *testing.T) {
			t.Parallel()
			ns := modelNamespace(t)
			pv := volume(t, ns, "lora", "20Gi", 0)
			apply(t, ns, model("lora", "Qwen/Qwen3-0.6B", pv, "10Gi", "  adapters:\n  - {name: sql, storageURI: \"hf://org/sql-lora\"}\n"))
			testenv.Eventually(t, 3*time.Minute, "the adapter loaded from the cache", func() error {
				b, err := getV1beta1(t, ns, "lora")
				if err != nil {
					return err
				}
				c := meta.FindStatusCondition(b.Status.Conditions, crd.ConditionAdaptersReady)
				if b.Status.Phase != crd.PhaseReady || !slices.Equal(b.Status.LoadedAdapters, []string{"sql"}) || c == nil || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("phase %s loadedAdapters %v AdaptersReady %+v", b.Status.Phase, b.Status.LoadedAdapters, c)
				}
				return nil
			})
			t.Logf("adapter sql served %.1fs into the test", time.Since(start).Seconds())
		})

		// Item 8: transformers imports a custom-code model's .py from HF_MODULES_CACHE, which it
		// creates first; the cache's claim is read-only.
		t.Run("RemoteCode", func(t *testing.T) {
			t.Parallel()
			ns := modelNamespace(t)
			pv := volume(t, ns, "code", "20Gi", 0)
			apply(t, ns, model("code", "org/tiny-1B-custom-code", pv, "10Gi", "  engineArgs: [--trust-remote-code]\n"))
			ready(t, ns, "code", 3*time.Minute)
		})
	})
}
