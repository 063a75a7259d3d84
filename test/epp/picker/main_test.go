package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datalayer"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/datastore"
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
