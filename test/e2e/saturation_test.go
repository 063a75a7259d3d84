package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestSaturatedAtMax is the runbook's "reachable but slow" row: a model held at its autoscaling
// maximum with the queue above target says so in AutoscalingActive (False, TooManyReplicas,
// with the queue the HPA read), while it stays Ready: a condition to act on (raise
// maxReplicas or add GPUs), never a failure; it clears when the load stops.
func TestSaturatedAtMax(t *testing.T) {
	ns := modelNamespace(t)
	w := useWebhookCRD(t)
	adapter := startMetricsAdapter(t)
	adapter.waitAvailable(t)
	applyYAMLWith(t, w.cache, ns, strings.NewReplacer("name: busy", "name: capped", "minReplicas: 2, maxReplicas: 4", "minReplicas: 1, maxReplicas: 1").Replace(scaleManifest(engines[0])))
	env.WaitPhase(t, ns, "capped", "Ready", 2*time.Minute)

	load := startLoad(t, ns, "capped", loadClients)
	start := time.Now()
	var active string
	testenv.Eventually(t, 3*time.Minute, "AutoscalingActive False TooManyReplicas while Ready", func() error {
		i, err := env.ISVC(ns, "capped")
		if err != nil {
			return err
		}
		for _, c := range i.Status.Conditions {
			if c.Type == crd.ConditionAutoscalingActive {
				active = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
				if c.Status == "False" && c.Reason == "TooManyReplicas" {
					if i.Status.Phase != crd.PhaseReady {
						return fmt.Errorf("phase %s/%s: saturation is not a failure", i.Status.Phase, i.Status.Reason)
					}
					return nil
				}
			}
		}
		return fmt.Errorf("AutoscalingActive %s", active)
	})
	t.Logf("saturated %s after the load started:\n%s\nAutoscalingActive %s", time.Since(start).Round(time.Second), getRow(t, ns, "capped"), active)
	sent, failed := load.stop()
	t.Logf("load: %d requests, %d failed", sent, failed)
	testenv.Eventually(t, 3*time.Minute, "AutoscalingActive True once the queue drains", func() error {
		i, err := env.ISVC(ns, "capped")
		if err != nil {
			return err
		}
		for _, c := range i.Status.Conditions {
			if c.Type == crd.ConditionAutoscalingActive && c.Status == "True" {
				return nil
			}
		}
		return fmt.Errorf("phase %s", i.Status.Phase)
	})
}
