package reconcile

import (
	"testing"

	"github.com/example/inferenceservice-operator/controller/engine"
)

func TestStartPhasesSlowest(t *testing.T) {
	cases := []struct {
		name    string
		phases  []engine.Phase
		slowest string
		message string
	}{
		{"the issue's", []engine.Phase{{Name: engine.PhaseProcessStart, Seconds: 40}, {Name: engine.PhaseWeightsDownload, Seconds: 840},
			{Name: engine.PhaseWeightsLoad, Seconds: 100}, {Name: engine.PhaseServing, Seconds: 1020}}, engine.PhaseWeightsDownload,
			"SlowStart: weights download 14m of 17m"},
		{"seconds", []engine.Phase{{Name: engine.PhaseProcessStart, Seconds: 12}, {Name: engine.PhaseCompile, Seconds: 41.26},
			{Name: engine.PhaseServing, Seconds: 80}}, engine.PhaseCompile, "SlowStart: torch.compile 41s of 80s"},
		{"hours", []engine.Phase{{Name: engine.PhaseWeightsDownload, Seconds: 3900}, {Name: engine.PhaseServing, Seconds: 4000}},
			engine.PhaseWeightsDownload, "SlowStart: weights download 1h05m of 1h07m"},
		{"a total shorter than its part (stamps to the second)", []engine.Phase{{Name: engine.PhaseWeightsLoad, Seconds: 25.07},
			{Name: engine.PhaseServing, Seconds: 25}}, engine.PhaseWeightsLoad, "SlowStart: weights load 25s of 25s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, msg, ok := SlowestPhase(c.phases)
			if !ok || p.Name != c.slowest || msg != c.message {
				t.Errorf("got %q %q %v, want %q %q", p.Name, msg, ok, c.slowest, c.message)
			}
		})
	}
	for _, ps := range [][]engine.Phase{nil, {{Name: engine.PhaseServing, Seconds: 10}}} {
		if p, msg, ok := SlowestPhase(ps); ok || msg != "" || p.Name != "" {
			t.Errorf("SlowestPhase(%v) = %v %q %v, want nothing", ps, p, msg, ok)
		}
	}
}
