package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/config"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datalayer"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datastore"
	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	sourcemetrics "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/source/metrics"
	runserver "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/server"
)

// readmeConfig is test/epp/README.md's queue + KV cache + prefix + LoRA configuration.
const readmeConfig = `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
  parameters: {autoTune: true, blockSizeTokens: 16, lruCapacityPerServer: 31250}
- type: lora-affinity-scorer
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: queue-scorer, weight: 2}
  - {pluginRef: kv-cache-utilization-scorer, weight: 2}
  - {pluginRef: prefix-cache-scorer, weight: 3}
  - {pluginRef: lora-affinity-scorer, weight: 1}
`

// TestConfigurations loads the default configuration (no --config-*) and the README's
// through the same two phases setup runs, and checks the scheduler's profile.
func TestConfigurations(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"default", "", []string{"queue-scorer: 2.0", "kv-cache-utilization-scorer: 2.0", "prefix-cache-scorer: 3.0", "max-score-picker"}},
		{"readme", readmeConfig, []string{"queue-scorer: 2.0", "kv-cache-utilization-scorer: 2.0", "prefix-cache-scorer: 3.0", "lora-affinity-scorer: 1.0", "max-score-picker"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := runserver.NewOptions()
			opts.ConfigText = c.text
			raw, _, err := parseConfigurationPhaseOne(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			ds := datastore.NewDatastore(ctx, datalayer.NewRuntime(time.Second), 0)
			cfg, _, parser, err := parseConfigurationPhaseTwo(ctx, raw, ds)
			if err != nil {
				t.Fatal(err)
			}
			if parser == nil || cfg.SchedulerConfig == nil {
				t.Fatal("no parser or scheduler config")
			}
			s := fmt.Sprintf("%+v", cfg.SchedulerConfig)
			for _, w := range c.want {
				if !strings.Contains(s, w) {
					t.Errorf("scheduler config lacks %s: %s", w, s)
				}
			}
			t.Logf("%s", s)
		})
	}
}

// TestOperatorConfigsReadEachEngine loads the configurations the operator writes for each
// engine's picker (controller/reconcile/testdata/picker-config-ENGINE.yaml, kept equal to
// PickerConfigFor by the operator's TestPickerConfigGolden) through setup's two phases, and
// hands the data layer's metrics extractor a page of that engine's /metrics, as the picker's
// metrics source does: it must read the pod's queue, running requests and KV cache from the
// engine's own series, and a page of the other engine's as nothing.
func TestOperatorConfigsReadEachEngine(t *testing.T) {
	pages := map[string]string{
		"vllm": `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="55477"} 1.0
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql-lora",waiting_lora_adapters=""} 1.0
`,
		// SGLang v0.5.3 with --enable-metrics (python/sglang/srt/metrics/collector.py), labels
		// as its multiprocess collector sorts them.
		"sglang": `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 3.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 0.25
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 7.0
`,
	}
	for _, name := range []string{"vllm", "sglang"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := loadOperatorConfig(ctx, t, name, time.Second)
			var extractors []fwkdl.Extractor
			if cfg.DataConfig != nil {
				for _, s := range cfg.DataConfig.Sources {
					extractors = append(extractors, s.Extractors...)
				}
			}
			if len(extractors) != 1 {
				t.Fatalf("%d extractors, want the core metrics extractor", len(extractors))
			}
			read := func(page string) (fwkdl.Metrics, error) {
				// As the picker's metrics source parses a page (source/metrics/datasource.go).
				parser := expfmt.NewTextParser(model.LegacyValidation)
				families, err := parser.TextToMetricFamilies(strings.NewReader(page))
				if err != nil {
					t.Fatal(err)
				}
				// No engine-type label: the pods the operator makes carry none.
				ep := fwkdl.NewEndpoint(&fwkdl.EndpointMetadata{Labels: map[string]string{"ai.example.com/inferenceservice": "m"}}, nil)
				err = extractors[0].Extract(ctx, sourcemetrics.PrometheusMetricMap(families), ep)
				return *ep.GetMetrics(), err
			}
			// Every series the configuration names is on the page: no "not found".
			m, err := read(pages[name])
			if err != nil {
				t.Errorf("extracting %s's page: %v", name, err)
			}
			// vLLM's adapters and cache geometry; SGLang exports neither (LoRA affinity
			// scores every pod alike, the prefix scorer keeps its configured block size).
			if wantAdapters := name == "vllm"; (m.MaxActiveModels == 4) != wantAdapters || (m.CacheBlockSize == 16) != wantAdapters {
				t.Errorf("%s: adapters %v (max %d), cache block %d", name, m.ActiveModels, m.MaxActiveModels, m.CacheBlockSize)
			}
			if m.WaitingQueueSize != 7 || m.RunningRequestsSize != 3 || m.KVCacheUsagePercent != 0.25 {
				t.Errorf("read %+v from %s's page, want queue 7, running 3, KV cache 0.25", m, name)
			}
			other := "sglang"
			if name == "sglang" {
				other = "vllm"
			}
			if m, err := read(pages[other]); err == nil || m.WaitingQueueSize != 0 {
				t.Errorf("%s's picker read %s's page as %+v, %v", name, other, m, err)
			}
		})
	}
}

// TestOperatorConfigsKeepReadingsFreshForTheirInterval: the operator's pickers read their pods
// every 250 ms (--endpoint-picker-refresh-metrics-interval's default), not v1.5.0's 50 ms, so
// their saturation detector (the utilization detector every v1.5.0 picker runs: it sheds
// sheddable requests when the pool is saturated, and counts a pod whose reading is older than
// its threshold as saturated) must take a reading up to four reads old as fresh: v1.5.0's own
// 200 ms would call every pod saturated for most of each 250 ms. A reading older than four
// reads is still stale.
func TestOperatorConfigsKeepReadingsFreshForTheirInterval(t *testing.T) {
	for _, name := range []string{"vllm", "sglang"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := loadOperatorConfig(ctx, t, name, 250*time.Millisecond)
			pod := func(age time.Duration) fwkdl.Endpoint {
				m := fwkdl.NewMetrics()
				m.KVCacheUsagePercent, m.UpdateTime = 0.4, time.Now().Add(-age)
				return fwkdl.NewEndpoint(&fwkdl.EndpointMetadata{}, m)
			}
			// Half of the detector's 0.8 KV threshold: a fresh reading is half saturated.
			for _, c := range []struct {
				age  time.Duration
				want float64
			}{{0, 0.5}, {600 * time.Millisecond, 0.5}, {900 * time.Millisecond, 0.5}, {1500 * time.Millisecond, 1}} {
				if got := cfg.SaturationDetector.Saturation(ctx, []fwkdl.Endpoint{pod(c.age)}); got != c.want {
					t.Errorf("a reading %s old: saturation %.2f, want %.2f", c.age, got, c.want)
				}
			}
		})
	}
}

// loadOperatorConfig loads the operator's golden picker configuration for engine (its
// testdata, controller/reconcile) as the picker's main does, reading pods every interval.
func loadOperatorConfig(ctx context.Context, t *testing.T, engine string, interval time.Duration) *config.Config {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "..", "controller", "reconcile", "testdata", "picker-config-"+engine+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	opts := runserver.NewOptions()
	opts.ConfigText = string(text)
	raw, _, err := parseConfigurationPhaseOne(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, _, err := parseConfigurationPhaseTwo(ctx, raw, datastore.NewDatastore(ctx, datalayer.NewRuntime(interval), 0))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
