package reconcile

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPickerRefreshArgs: each picker reads its pods at --endpoint-picker-refresh-metrics-interval
// (250 ms by default, not v1.5.0's 50 ms), its saturation detector takes a reading as stale after
// four reads (v1.5.0's 200 ms at 50 ms), and its pool gauges keep v1.5.0's 2s unless four reads
// are longer.
func TestPickerRefreshArgs(t *testing.T) {
	for _, c := range []struct {
		refresh                    time.Duration
		interval, gauges, detector string
	}{
		{0, "250ms", "2s", "1s"},
		{50 * time.Millisecond, "50ms", "2s", "200ms"},
		{10 * time.Millisecond, "10ms", "2s", "40ms"},
		{time.Second, "1s", "4s", "4s"},
		{time.Minute, "1m0s", "4m0s", "4m0s"},
	} {
		w := poolWorld()
		w.f.PickerRefreshMetricsInterval = c.refresh
		w.apply(w.reconcile().Actions)
		args := w.obs.Picker.Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--refresh-metrics-interval=" + c.interval, "--metrics-staleness-threshold=" + c.gauges} {
			if !slices.Contains(args, want) {
				t.Errorf("refresh %s: no %s in the picker's args\n%s", c.refresh, want, strings.Join(args, " "))
			}
		}
		if want := "- type: utilization-detector\n  parameters: {metricsStalenessThreshold: " + c.detector + "}\n"; !strings.Contains(strings.Join(args, " "), want) {
			t.Errorf("refresh %s: the config does not hold %q", c.refresh, want)
		}
	}
}

// TestPickerRefreshChangeRollsOnce: a picker made at another interval (v1.5.0's 50 ms, or an
// earlier default) is updated once when the operator's changes, then left alone: a template
// change, one rollout of each picker, never a loop.
func TestPickerRefreshChangeRollsOnce(t *testing.T) {
	w := poolWorld()
	w.f.PickerRefreshMetricsInterval = 50 * time.Millisecond
	w.apply(w.reconcile().Actions)
	w.apply(w.reconcile().Actions) // the RoleBinding
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("converged at 50ms: %s", verbs(out.Actions))
	}
	w.f.PickerRefreshMetricsInterval = 0 // restarted with the default
	out := w.reconcile()
	if got := verbs(out.Actions); got != "update EndpointPicker" {
		t.Fatalf("after the interval changed: %s", got)
	}
	w.apply(out.Actions)
	if args := w.obs.Picker.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--refresh-metrics-interval=250ms") {
		t.Fatalf("updated picker args %v", args)
	}
	for i := 0; i < 3; i++ {
		if out := w.reconcile(); len(out.Actions) != 0 {
			t.Fatalf("reconcile %d after the update: %s", i, verbs(out.Actions))
		}
	}
}
