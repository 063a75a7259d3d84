package reconcile

// The autoscaler's and the picker's words per engine: each model's HPA, ScaledObject,
// AutoscalingActive readings and endpoint picker name its own engine's series. Tables over
// engine.Names(), the engine given to the functions directly (engineOf is the spec's).

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/engine"
	// Registered here for the tables; the operator registers it where spec.engine is read.
	_ "github.com/example/inferenceservice-operator/controller/engine/sglang"
)

// engineQueues is what each engine's model must be scaled on: the Pods metric the custom
// metrics API serves and the series Prometheus holds.
var engineQueues = []struct{ engine, metric, series string }{
	{"sglang", "num_queue_reqs", "sglang:num_queue_reqs"},
	{"vllm", "num_requests_waiting", "vllm:num_requests_waiting"},
}

func TestEveryEngineHasAQueueCase(t *testing.T) {
	var names []string
	for _, q := range engineQueues {
		names = append(names, q.engine)
	}
	if !slices.Equal(names, engine.Names()) {
		t.Fatalf("cases for %v, engines %v", names, engine.Names())
	}
}

// TestHPAAndScaledObjectOnTheEnginesQueue: the HPA asks for the engine's queue metric, KEDA's
// trigger sums the engine's series, at the HPA's target.
func TestHPAAndScaledObjectOnTheEnginesQueue(t *testing.T) {
	for _, c := range engineQueues {
		t.Run(c.engine, func(t *testing.T) {
			e := engine.For(c.engine)
			w := newWorld(3)
			hpa := desiredHPAOn(e, w.isvc, &w.ext, scaleOf(w.isvc, &w.ext), sharedOf(w.isvc))
			if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Pods == nil || hpa.Spec.Metrics[0].Pods.Metric.Name != c.metric {
				t.Fatalf("HPA metrics %+v, want the Pods metric %s", hpa.Spec.Metrics, c.metric)
			}
			so := desiredScaledObjectOn(e, w.isvc, hpa, kedaProm)
			triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
			md, _ := triggers[0].(map[string]interface{})["metadata"].(map[string]interface{})
			want := `sum(` + c.series + `{namespace="default",ai_example_com_inferenceservice="qwen3"})`
			if md["query"] != want {
				t.Errorf("query %v, want %s", md["query"], want)
			}
			if target := hpa.Spec.Metrics[0].Pods.Target.AverageValue.String(); md["threshold"] != target || target == "0" {
				t.Errorf("threshold %v, want the HPA's target %s", md["threshold"], target)
			}
		})
	}
}

// TestAutoscalingReadsTheEnginesMetric: AutoscalingActive reads the HPA's value of the
// engine's metric and names it; the write threshold parses either engine's reading.
func TestAutoscalingReadsTheEnginesMetric(t *testing.T) {
	for _, c := range engineQueues {
		t.Run(c.engine, func(t *testing.T) {
			e := engine.For(c.engine)
			w := servingWorld(t)
			want := desiredHPAOn(e, w.isvc, &w.ext, scaleOf(w.isvc, &w.ext), sharedOf(w.isvc))
			live := w.obs.HPA.DeepCopy()
			live.Spec.Metrics = want.Spec.Metrics
			live.Status = hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", "", 7400)
			live.Status.CurrentMetrics[0].Pods.Metric.Name = c.metric
			a, _ := decideAutoscaling(w.isvc, live, want, nil, w.cached().MetricsAPI, w.now().Time)
			if a.status != metav1.ConditionTrue || a.message != c.metric+" 7/5 per pod" {
				t.Fatalf("got %s %q, want True %q", a.status, a.message, c.metric+" 7/5 per pod")
			}
			// Before any pod serves: the message names what the pods will report.
			blind := w.obs.HPA.DeepCopy()
			blind.Spec.Metrics = want.Spec.Metrics
			blind.Status = hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", blindMessage, "", -1)
			a, _ = decideAutoscaling(w.isvc, blind, want, []*corev1.Pod{readyPod("qwen3-0", time.Time{})}, w.cached().MetricsAPI, w.now().Time)
			if a.reason != ReasonAwaitingReadyPod || !strings.Contains(a.message, "report "+c.metric+" yet") {
				t.Fatalf("before a pod serves: %s %q", a.reason, a.message)
			}
			r := func(cur, target int64) string {
				return queueReading(c.metric, *resource.NewQuantity(cur, resource.DecimalSI), *resource.NewQuantity(target, resource.DecimalSI))
			}
			if !queueMoved(r(0, 5), r(5, 5)) || queueMoved(r(0, 5), r(1, 5)) || !queueMoved("a", r(0, 5)) {
				t.Fatalf("queueMoved does not read %s's readings", c.metric)
			}
		})
	}
	// A reading stored under the old engine's name, the new one's under its own.
	if cur, target, ok := parseReading("num_requests_waiting 3/5 per pod; num_queue_reqs 9/5 per pod"); !ok || cur != 9 || target != 5 {
		t.Fatalf("parseReading read %d/%d %v, want the last reading, 9/5", cur, target, ok)
	}
}

// pickerConfig is what the picker reads of an EndpointPickerConfig: the plugins' types and
// parameters and the profile's references.
type pickerConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Plugins    []struct {
		Type       string `json:"type"`
		Parameters *struct {
			DefaultEngine string `json:"defaultEngine"`
			EngineConfigs []struct {
				Name                string  `json:"name"`
				QueuedRequestsSpec  string  `json:"queuedRequestsSpec"`
				RunningRequestsSpec string  `json:"runningRequestsSpec"`
				KVUsageSpec         string  `json:"kvUsageSpec"`
				LoRASpec            *string `json:"loraSpec"`
				CacheInfoSpec       *string `json:"cacheInfoSpec"`
			} `json:"engineConfigs"`
			AutoTune                  *bool  `json:"autoTune"`
			BlockSizeTokens           int    `json:"blockSizeTokens"`
			LRUCapacityPerServer      int    `json:"lruCapacityPerServer"`
			MetricsStalenessThreshold string `json:"metricsStalenessThreshold"`
		} `json:"parameters"`
	} `json:"plugins"`
	SaturationDetector *struct {
		PluginRef string `json:"pluginRef"`
	} `json:"saturationDetector"`
	SchedulingProfiles []struct {
		Name    string `json:"name"`
		Plugins []struct {
			PluginRef string  `json:"pluginRef"`
			Weight    float64 `json:"weight"`
		} `json:"plugins"`
	} `json:"schedulingProfiles"`
}

// TestPickerArgsPerEngine: a vLLM model's picker runs exactly the configuration written out
// here (a change of it rolls every vLLM model's picker once: say so in CHANGELOG.md); an SGLang model's reads SGLang's queue,
// running requests and token usage as its default engine, and no LoRA nor cache-config
// series, which SGLang v0.5 does not export; both score alike.
func TestPickerArgsPerEngine(t *testing.T) {
	isvc := newWorld(1).isvc
	configOf := func(e engine.Engine) (string, pickerConfig) {
		t.Helper()
		args := PickerArgsOn(e, isvc, DefaultPickerRefreshMetricsInterval)
		i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--config-text=") })
		if i < 0 {
			t.Fatalf("%s: no --config-text in %v", e.Name(), args)
		}
		for _, deprecated := range []string{"--total-queued-requests-metric", "--kv-cache-usage-percentage-metric", "--lora-info-metric"} {
			if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, deprecated) }) {
				t.Errorf("%s: %s, which v1.5.0 refuses", e.Name(), deprecated)
			}
		}
		text := strings.TrimPrefix(args[i], "--config-text=")
		var c pickerConfig
		if err := yaml.UnmarshalStrict([]byte(text), &c); err != nil {
			t.Fatalf("%s: %v\n%s", e.Name(), err, text)
		}
		return text, c
	}

	text, v := configOf(engine.For(engine.VLLM))
	const want = "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: queue-scorer\n- type: kv-cache-utilization-scorer\n- type: prefix-cache-scorer\n  parameters: {autoTune: true, blockSizeTokens: 16, lruCapacityPerServer: 31250}\n- type: lora-affinity-scorer\n- type: utilization-detector\n  parameters: {metricsStalenessThreshold: 1s}\nsaturationDetector: {pluginRef: utilization-detector}\nschedulingProfiles:\n- name: default\n  plugins:\n  - {pluginRef: queue-scorer, weight: 2}\n  - {pluginRef: kv-cache-utilization-scorer, weight: 2}\n  - {pluginRef: prefix-cache-scorer, weight: 3}\n  - {pluginRef: lora-affinity-scorer, weight: 1}\n"
	if text != want {
		t.Errorf("vLLM's picker config changed:\n%s", text)
	}

	_, s := configOf(engine.For("sglang"))
	var types []string
	for _, p := range s.Plugins {
		types = append(types, p.Type)
	}
	if want := []string{"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer", "lora-affinity-scorer", "utilization-detector", "core-metrics-extractor"}; !slices.Equal(types, want) {
		t.Fatalf("SGLang's plugins %v, want %v", types, want)
	}
	ex := s.Plugins[5].Parameters
	if ex == nil || ex.DefaultEngine != "sglang" || len(ex.EngineConfigs) != 1 {
		t.Fatalf("the extractor's parameters %+v: want SGLang's one engine config as the default", ex)
	}
	ec := ex.EngineConfigs[0]
	if ec.Name != "sglang" || ec.QueuedRequestsSpec != "sglang:num_queue_reqs" || ec.RunningRequestsSpec != "sglang:num_running_reqs" ||
		ec.KVUsageSpec != "sglang:token_usage" || ec.LoRASpec == nil || *ec.LoRASpec != "" || ec.CacheInfoSpec == nil || *ec.CacheInfoSpec != "" {
		t.Fatalf("SGLang's engine config %+v", ec)
	}
	if len(s.SchedulingProfiles) != 1 || len(v.SchedulingProfiles) != 1 ||
		!slices.Equal(s.SchedulingProfiles[0].Plugins, v.SchedulingProfiles[0].Plugins) {
		t.Fatalf("the engines' profiles differ: %+v, %+v", s.SchedulingProfiles, v.SchedulingProfiles)
	}
	if PickerArgs(isvc, Features{})[5] != "--config-text="+PickerConfigFor(engineOf(isvc), DefaultPickerRefreshMetricsInterval) {
		t.Fatal("PickerArgs is not the model's engine's")
	}
}

// TestPickerConfigGolden keeps testdata/picker-config-ENGINE.yaml what PickerConfigFor writes
// at the default interval: test/epp/picker's TestOperatorConfigsReadEachEngine loads them into
// v1.5.0's picker (that module does not import this one) and reads each engine's page through
// them, and TestOperatorConfigsKeepReadingsFreshForTheirInterval asks their saturation detector.
func TestPickerConfigGolden(t *testing.T) {
	for _, name := range engine.Names() {
		path := filepath.Join("testdata", "picker-config-"+name+".yaml")
		want := PickerConfigFor(engine.For(name), DefaultPickerRefreshMetricsInterval)
		got, err := os.ReadFile(path)
		if os.Getenv("UPDATE_GOLDEN") != "" {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("%s (%v) differs from PickerConfigFor(%s) (UPDATE_GOLDEN=1 rewrites it):\n%s", path, err, name, want)
		}
	}
}
