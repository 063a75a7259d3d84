// The slowest phase of a start, said in the status: "SlowStart: weights download 14m of 17m".

package reconcile

import (
	"fmt"
	"math"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// SlowestPhase is the longest part of a start (engine.PhaseServing aside) and what to say of it:
// "SlowStart: weights download 14m of 17m", measured against the whole start (engine.PhaseServing),
// or for a start still going against its time so far, "SlowStart: weights download 14m of 17m
// so far". ok is false when there is no part.
func SlowestPhase(phases []engine.Phase) (slowest engine.Phase, message string, ok bool) {
	total, served, sum := 0.0, false, 0.0
	for _, p := range phases {
		if p.Name == engine.PhaseServing {
			total, served = p.Seconds, true
			continue
		}
		sum += p.Seconds
		if !ok || p.Seconds > slowest.Seconds {
			slowest, ok = p, true
		}
	}
	if !ok {
		return engine.Phase{}, "", false
	}
	if !served {
		total = sum
	}
	total = math.Max(total, slowest.Seconds)
	message = fmt.Sprintf("SlowStart: %s %s of %s", slowest.Name, shortDuration(slowest.Seconds), shortDuration(total))
	if !served {
		message += " so far"
	}
	return slowest, message, true
}

// shortDuration is seconds as a person says them: "40s", "14m", "1h05m".
func shortDuration(secs float64) string {
	s := int(math.Round(secs))
	switch {
	case s < 90:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm", int(math.Round(secs/60)))
	default:
		m := int(math.Round(secs / 60))
		return fmt.Sprintf("%dh%02dm", m/60, m%60)
	}
}
