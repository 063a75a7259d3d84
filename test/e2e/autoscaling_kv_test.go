package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// The KV-cache load: 8 closed-loop clients sending 100-token completions to a model whose pods
// run 4 requests at once in a KV cache of 30 usable blocks of 16 tokens. A request holds the
// blocks of its prompt and of the tokens it may generate, 7 here (the fake's, as vLLM v1's
// kv_cache_manager allocates them), so 4 running hold 28/30 of the cache (93%) and nothing
// waits: at 2 replicas the queue stays near 0, far under its default target of 5, while KV use
// is above the target of 50% and the HPA asks ceil(2 x 0.93 / 0.5) = 4 replicas. At 4, 2
// requests a pod hold 14/30 (47%), within the HPA's 10% tolerance of the target.
const (
	kvClients = 8
	kvTarget  = 50
)

const kvManifest = `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: kvbusy}
spec:
  baseModel: Qwen/Qwen3-0.6B
  gpusPerReplica: 1
  engineArgs: ["--max-num-seqs", "4", "--num-gpu-blocks-override", "31"]
  autoscaling: {minReplicas: 2, maxReplicas: 4, metric: kvCache, targetKVCacheUsagePercent: 50}
`

// TestAutoscalesOnTheKVCache is spec.autoscaling.metric kvCache on the real HPA controller: a
// vLLM model at 2 replicas under a bounded load that fills its pods' KV caches without forming
// a queue scales to 4 on kv_cache_usage_perc as the operator's metrics adapter serves it, and
// its AutoscalingActive condition names the signal, the HPA's reading and the target.
func TestAutoscalesOnTheKVCache(t *testing.T) {
	w := useWebhookCRD(t)
	adapter := startMetricsAdapter(t)
	adapter.waitAvailable(t)
	ns := env.Namespace(t)
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	applyYAMLWith(t, w.cache, ns, kvManifest)
	env.WaitPhase(t, ns, "kvbusy", "Ready", 2*time.Minute)
	kvMetric := engine.For(engine.VLLM).Metrics().KVCacheName
	h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "kvbusy", metav1.GetOptions{})
	if err != nil || len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Pods == nil || h.Spec.Metrics[0].Pods.Metric.Name != kvMetric ||
		h.Spec.Metrics[0].Pods.Target.AverageValue.String() != "500m" {
		t.Fatalf("the HPA (%v) does not scale on %s at 500m a pod: %+v", err, kvMetric, h.Spec.Metrics)
	}

	start := time.Now()
	kv := &timeline{t: t, ns: ns, name: "kvbusy", metric: kvMetric, start: start}
	queue := &timeline{t: t, ns: ns, name: "kvbusy", metric: engine.For(engine.VLLM).Metrics().QueueName, start: start}
	stopKV, stopQueue := kv.sample(3*time.Second), queue.sample(3*time.Second)
	defer stopKV()
	defer stopQueue()

	load := startLoad(t, ns, "kvbusy", kvClients)
	loadStarted := time.Now()
	var message string
	testenv.Eventually(t, 3*time.Minute, "4 ready replicas, the isvc Ready with them, AutoscalingActive naming the KV cache", func() error {
		isvc, err := env.ISVC(ns, "kvbusy")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(isvc.Status.Conditions, conditionAutoscaling)
		if c != nil {
			message = c.Message
		}
		last := kv.last()
		if isvc.Status.Phase != "Ready" || isvc.Status.ReadyReplicas != 4 || last.ready != 4 || c == nil || c.Status != metav1.ConditionTrue ||
			!strings.Contains(c.Message, fmt.Sprintf("%s ", kvMetric)) || !strings.Contains(c.Message, fmt.Sprintf("/%d%% per pod", kvTarget)) {
			return fmt.Errorf("isvc %s ready %d, AutoscalingActive %+v; last sample %s", isvc.Status.Phase, isvc.Status.ReadyReplicas, c, last)
		}
		return nil
	})
	scaledUp := time.Since(loadStarted)
	sent, failed := load.stop()
	stopKV()
	stopQueue()
	if failed > sent/10 {
		t.Fatalf("%d of %d requests failed", failed, sent)
	}
	if peak := kv.peakAvg(); peak <= 1.1*kvTarget/100 {
		t.Fatalf("KV-cache use never rose above the HPA's threshold (peak %.2f a pod): the load did not fill the caches", peak)
	}
	if peak := queue.peakAvg(); peak >= 5 {
		t.Fatalf("the queue rose to %.1f a pod: the queue's default target would have scaled the model too", peak)
	}
	t.Logf("load: %d clients, %d requests (%d failed); scaled up to 4 ready %s after the load started; KV peak %.2f a pod, queue peak %.1f a pod",
		kvClients, sent, failed, scaledUp.Round(time.Second), kv.peakAvg(), queue.peakAvg())
	t.Logf("AutoscalingActive: %s", message)
	t.Logf("timeline (KV-cache use per pod as the custom metrics API serves it):\n%s", kv)
	t.Logf("queue per pod:\n%s", queue)
	t.Logf("kubectl get hpa:\n%s", env.Kubectl(t, w.cache, "get", "hpa", "-n", ns, "kvbusy"))
}
