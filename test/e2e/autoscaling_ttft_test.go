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

// The TTFT load: 4 closed-loop clients sending 100-token completions (2 s each at the fake's
// 20 ms a token) to a model whose pods run 2 requests at once. At 1 replica 2 requests wait
// a whole request's time for a slot, so the time to first token is about 2 s, over the
// objective of 500 ms; at 2 replicas nothing waits and it is the prefill and one token, tens
// of ms. The fake vLLM's first token grows with load through the batch's steps and through
// queueing (its slots are --max-num-seqs); the queue's wait alone misses the objective here.
const (
	ttftClients = 4
	ttftTarget  = 500 // ms
	ttftWindow  = 15  // s
)

const ttftManifest = `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: ttftbusy}
spec:
  baseModel: Qwen/Qwen3-0.6B
  gpusPerReplica: 1
  engineArgs: ["--max-num-seqs", "2"]
  autoscaling: {minReplicas: 1, maxReplicas: 2, metric: ttft, targetTTFTMilliseconds: 500, ttftWindowSeconds: 15, scaleDownDelaySeconds: 15}
`

// TestAutoscalesOnTheTTFT is spec.autoscaling.metric ttft on the real HPA controller: a vLLM
// model at 1 replica under a load that queues its requests, so that the p95 of its time to
// first token over the window rises above the objective, scales to 2 on
// time_to_first_token_p95_milliseconds as the operator's metrics adapter computes it from
// each pod's histogram; AutoscalingActive names the signal, the reading and the target; when
// the load stops, the window empties, the reading falls to 0 and the model returns to 1.
func TestAutoscalesOnTheTTFT(t *testing.T) {
	w := useWebhookCRD(t)
	adapter := startMetricsAdapter(t)
	adapter.waitAvailable(t)
	ns := env.Namespace(t)
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	applyYAMLWith(t, w.cache, ns, ttftManifest)
	env.WaitPhase(t, ns, "ttftbusy", "Ready", 2*time.Minute)
	metric := engine.For(engine.VLLM).Metrics().TTFTName
	h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "ttftbusy", metav1.GetOptions{})
	if err != nil || len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Pods == nil || h.Spec.Metrics[0].Pods.Metric.Name != metric ||
		h.Spec.Metrics[0].Pods.Target.AverageValue.String() != "500" {
		t.Fatalf("the HPA (%v) does not scale on %s at 500 a pod: %+v", err, metric, h.Spec.Metrics)
	}

	start := time.Now()
	tl := &timeline{t: t, ns: ns, name: "ttftbusy", metric: metric, selector: fmt.Sprintf("%s=%d", engine.TTFTWindowLabel, ttftWindow), start: start}
	stop := tl.sample(3 * time.Second)
	defer stop()

	load := startLoad(t, ns, "ttftbusy", ttftClients)
	loadStarted := time.Now()
	var message string
	testenv.Eventually(t, 2*time.Minute, "2 ready replicas, AutoscalingActive naming the time to first token", func() error {
		isvc, err := env.ISVC(ns, "ttftbusy")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(isvc.Status.Conditions, conditionAutoscaling)
		if c != nil && strings.Contains(c.Message, "time to first token p95") {
			message = c.Message
		}
		if last := tl.last(); isvc.Status.ReadyReplicas != 2 || last.ready != 2 || message == "" ||
			!strings.Contains(message, fmt.Sprintf("against a target of %d ms", ttftTarget)) {
			return fmt.Errorf("isvc %s ready %d, AutoscalingActive %+v; last sample %s", isvc.Status.Phase, isvc.Status.ReadyReplicas, c, last)
		}
		return nil
	})
	scaledUp := time.Since(loadStarted)
	sent, failed := load.stop()
	loadStopped := time.Now()
	if failed > sent/10 {
		t.Fatalf("%d of %d requests failed", failed, sent)
	}
	if peak := tl.peakAvg(); peak <= 1.1*ttftTarget {
		t.Fatalf("the time to first token never rose above the HPA's threshold (peak %.0f ms a pod): the load did not queue", peak)
	}
	testenv.Eventually(t, 2*time.Minute, "back to 1 replica once the window holds no request", func() error {
		isvc, err := env.ISVC(ns, "ttftbusy")
		if err != nil {
			return err
		}
		if last := tl.last(); isvc.Status.Replicas != 1 || last.desired != 1 {
			return fmt.Errorf("isvc %s replicas %d; last sample %s", isvc.Status.Phase, isvc.Status.Replicas, last)
		}
		return nil
	})
	stop()
	t.Logf("load: %d clients, %d requests (%d failed); scaled up to 2 ready %s after the load started; back to 1 %s after it stopped (window %ds, scale-down delay 15s)",
		ttftClients, sent, failed, scaledUp.Round(time.Second), time.Since(loadStopped).Round(time.Second), ttftWindow)
	t.Logf("AutoscalingActive: %s", message)
	t.Logf("timeline (TTFT p95 per pod in ms as the custom metrics API serves it):\n%s", tl)
	t.Logf("kubectl get hpa:\n%s", env.Kubectl(t, w.cache, "get", "hpa", "-n", ns, "ttftbusy"))
}
