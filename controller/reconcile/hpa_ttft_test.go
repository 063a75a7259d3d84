package reconcile

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
)

var updateTTFTGolden = flag.Bool("update-ttft", false, "rewrite testdata/hpa-ttft-*.yaml from desiredHPAOn")

// TestHPAOnTheTTFT is the HPA of metric ttft against its golden file, per engine and case:
// the Pods metric time_to_first_token_p95_milliseconds with the window in its selector, the
// objective as the target in milliseconds, scale-up at once and doubling, and a scale-down
// window of at least the TTFT window.
func TestHPAOnTheTTFT(t *testing.T) {
	for _, c := range []struct {
		name string
		a    *crd.Autoscaling
	}{
		{"defaults", &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 8, Metric: crd.AutoscalingMetricTTFT}},
		{"window-over-the-delay", &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 8, Metric: crd.AutoscalingMetricTTFT,
			TargetTTFTMilliseconds: ptr.To[int32](250), TTFTWindowSeconds: ptr.To[int32](120), ScaleDownDelaySeconds: ptr.To[int32](30)}},
		{"delay-over-the-window", &crd.Autoscaling{MinReplicas: 2, MaxReplicas: 8, Metric: crd.AutoscalingMetricTTFT,
			TargetTTFTMilliseconds: ptr.To[int32](1500), TTFTWindowSeconds: ptr.To[int32](15), ScaleDownDelaySeconds: ptr.To[int32](90)}},
		{"long-window", &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 8, Metric: crd.AutoscalingMetricTTFT, TTFTWindowSeconds: ptr.To[int32](600)}},
	} {
		for _, name := range engine.Names() {
			e := engine.For(name)
			t.Run(c.name+"/"+name, func(t *testing.T) {
				w := newWorld(3)
				w.ext.Autoscaling = c.a
				hpa := desiredHPAOn(e, w.isvc, &w.ext, scaleOf(w.isvc, &w.ext), sharedOf(w.isvc))
				got, err := yaml.Marshal(hpa.Spec)
				if err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join("testdata", "hpa-ttft-"+c.name+".yaml")
				if *updateTTFTGolden {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Fatalf("the HPA's spec:\n%s\nwant (%s):\n%s", got, golden, want)
				}
				_, window := c.a.TTFTTarget()
				if d := *hpa.Spec.Behavior.ScaleDown.StabilizationWindowSeconds; d < window {
					t.Errorf("scale-down window %d s under the TTFT window %d s", d, window)
				}
				// The live HPA as the API server defaults it is not drifted; a changed
				// window, objective or scale-up policy is, and setHPA restores it.
				live := hpa.DeepCopy()
				live.Spec.Behavior.ScaleDown.Policies = []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}
				live.Spec.Behavior.ScaleDown.SelectPolicy = ptr.To(autoscalingv2.MaxChangePolicySelect)
				if hpaDrifted(live, hpa) {
					t.Fatal("the defaulted HPA reads as drifted")
				}
				for what, edit := range map[string]func(h *autoscalingv2.HorizontalPodAutoscaler){
					"window": func(h *autoscalingv2.HorizontalPodAutoscaler) {
						h.Spec.Metrics[0].Pods.Metric.Selector.MatchLabels["window_seconds"] = "30"
					},
					"selector": func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics[0].Pods.Metric.Selector = nil },
					"objective": func(h *autoscalingv2.HorizontalPodAutoscaler) {
						h.Spec.Metrics[0].Pods.Target.AverageValue = resource.NewQuantity(9, resource.DecimalSI)
					},
					"scale-up": func(h *autoscalingv2.HorizontalPodAutoscaler) {
						h.Spec.Behavior.ScaleUp.StabilizationWindowSeconds = ptr.To[int32](60)
					},
					"behavior": func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Behavior = nil },
				} {
					l := live.DeepCopy()
					edit(l)
					if !hpaDrifted(l, hpa) {
						t.Errorf("%s changed: not drifted", what)
					}
					setHPA(l, hpa)
					if hpaDrifted(l, hpa) {
						t.Errorf("%s changed: still drifted after setHPA", what)
					}
				}
				// KEDA's trigger: the p95 over the same window, the objective in ms.
				so := desiredScaledObjectOn(e, w.isvc, hpa, kedaProm)
				triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
				md := triggers[0].(map[string]interface{})["metadata"].(map[string]interface{})
				ms, win := c.a.TTFTTarget()
				wantQuery := `sum(histogram_quantile(0.95, sum by (pod, le) (rate(` + e.Metrics().TTFT + `_bucket{namespace="default",ai_example_com_inferenceservice="qwen3"}[` +
					strconv.Itoa(int(win)) + `s]))) >= 0) * 1000`
				if md["query"] != wantQuery || md["threshold"] != strconv.Itoa(int(ms)) {
					t.Errorf("KEDA's trigger %v, want %s at %d", md, wantQuery, ms)
				}
				if up, _, _ := unstructured.NestedMap(so.Object, "spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", "scaleUp"); up == nil {
					t.Error("KEDA's HPA is not given the scale-up rules")
				}
			})
		}
	}
}

// TestTTFTReading: AutoscalingActive's reading of the TTFT objective, and parseReading's of
// it, which decides whether a new one is written.
func TestTTFTReading(t *testing.T) {
	metric := engine.For(engine.VLLM).Metrics().TTFTName
	r := queueReading(metric, *resource.NewMilliQuantity(180400, resource.DecimalSI), *resource.NewQuantity(500, resource.DecimalSI))
	if r != "time to first token p95 180 ms against a target of 500 ms per pod" {
		t.Fatalf("reading %q", r)
	}
	if cur, target, ok := parseReading("the HPA was able to compute the replica count; " + r); !ok || cur != 180 || target != 500 {
		t.Fatalf("parseReading(%q) = %d/%d %v", r, cur, target, ok)
	}
	for _, c := range []struct {
		old, new string
		moved    bool
	}{
		{"time to first token p95 180 ms against a target of 500 ms per pod", "time to first token p95 300 ms against a target of 500 ms per pod", false},
		{"time to first token p95 180 ms against a target of 500 ms per pod", "time to first token p95 430 ms against a target of 500 ms per pod", true},
		{"time to first token p95 480 ms against a target of 500 ms per pod", "time to first token p95 520 ms against a target of 500 ms per pod", true},
		{"time to first token p95 480 ms against a target of 500 ms per pod", "time to first token p95 480 ms against a target of 400 ms per pod", true},
	} {
		if got := queueMoved(c.old, c.new); got != c.moved {
			t.Errorf("queueMoved(%q, %q) = %v, want %v", c.old, c.new, got, c.moved)
		}
	}
}
