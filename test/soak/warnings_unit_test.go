package soak

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestUnexplainedWarnings(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	spans := []span{
		{from: at(0), to: at(10), key: "", what: "apiserver-restart"},
		{from: at(600), to: at(610), key: "", what: "adapter-kill"},
		{from: at(700), to: at(710), key: "", what: "leader-kill"},
		{from: at(200), to: at(205), key: "soak-1/m-0001", what: "image"},
		{from: at(400), to: at(460), key: "soak-2/*", what: "namespace"},
	}
	// The world converged at these: the restart settles at 20, the image edit at 300, the
	// namespace remade at 560, the adapter's kill at 620.
	settled := []time.Time{at(20), at(300), at(560), at(620)}
	w := func(ns, name string, first, last int) warning {
		return warning{ns: ns, kind: "Pod", name: name, reason: "R", first: at(first), last: at(last), count: 1}
	}
	hpaWarning := func(at0 int) warning {
		x := w("soak-3", "m-0007", at0, at0)
		x.kind, x.reason = "HorizontalPodAutoscaler", "FailedGetPodsMetric"
		return x
	}
	for _, c := range []struct {
		name string
		w    warning
		want bool // explained
	}{
		{"during a fault", w("soak-3", "m-0007", 5, 5), true},
		{"within the grace after a fault", w("soak-3", "m-0007", 65, 65), true},
		{"the HPA's metric lost while the adapter is down", hpaWarning(615), true},
		{"another reason while the adapter is down", w("soak-3", "m-0007", 615, 615), false},
		{"anything after the operator's own fault", hpaWarning(705), false},
		{"long after every fault", w("soak-3", "m-0007", 150, 150), false},
		{"a child of the model an action edited", w("soak-1", "m-0001-7d9f-abcde", 230, 230), true},
		{"another model than the action's", w("soak-1", "m-0010", 230, 230), false},
		{"before the action began", w("soak-1", "m-0001", 150, 150), false},
		{"anything in a namespace being remade", w("soak-2", "m-0042", 470, 470), true},
		{"repeated until long after its cause", w("soak-3", "m-0007", 5, 300), false},
		{"while the world settles after a namespace remade", w("soak-2", "m-0042", 580, 580), true},
		{"after it settled, past the grace", w("soak-2", "m-0042", 700, 700), false},
		{"an action's edit settling late", w("soak-1", "m-0001-7d9f-abcde", 330, 330), true},
	} {
		got := len(unexplained([]warning{c.w}, spans, settled)) == 0
		if got != c.want {
			t.Errorf("%s: explained %v, want %v", c.name, got, c.want)
		}
	}
}

func TestGrowth(t *testing.T) {
	at := []float64{0, 15, 30, 45, 60, 75, 90, 105, 120}
	for _, c := range []struct {
		name  string
		xs    []float64
		grows bool
	}{
		{"flat", []float64{40, 44, 42, 43, 41, 44, 42, 43, 42}, false},
		{"one spike after a restart", []float64{40, 44, 42, 43, 41, 44, 42, 90, 42}, false},
		{"a restart's drop", []float64{40, 44, 42, 43, 41, 30, 31, 30, 31}, false},
		{"a steady leak", []float64{40, 44, 48, 52, 56, 60, 64, 68, 72}, true},
		{"growth only in the warm-up", []float64{20, 30, 42, 43, 41, 44, 42, 43, 42}, false},
	} {
		err := growth("rss", at, c.xs, 0.2, 5)
		if (err != nil) != c.grows {
			t.Errorf("%s: %v, want growth %v", c.name, err, c.grows)
		}
	}
	if err := growth("rss", at[:5], []float64{40, 50, 60, 70, 80}, 0.2, 5); err != nil {
		t.Errorf("too few samples to judge: %v", err)
	}
}

func TestScheduleHasEveryKind(t *testing.T) {
	for _, minutes := range []float64{2, 60} {
		seen := map[string]int{}
		for _, f := range schedule(rand.New(rand.NewPCG(7, 38)), time.Duration(minutes*float64(time.Minute))) {
			seen[f.Kind]++
		}
		for _, k := range faultKinds {
			if seen[k] == 0 {
				t.Errorf("%g minutes: no %s in the schedule %v", minutes, k, seen)
			}
		}
		// A run that falls behind skips the tail: every kind must be in the first round.
		first := map[string]bool{}
		for _, f := range schedule(rand.New(rand.NewPCG(7, 38)), time.Duration(minutes*float64(time.Minute)))[:len(faultKinds)] {
			first[f.Kind] = true
		}
		if len(first) != len(faultKinds) {
			t.Errorf("%g minutes: the first %d faults are %d kinds: %v", minutes, len(faultKinds), len(first), first)
		}
	}
}

func TestPlotSVG(t *testing.T) {
	svg := plotSVG("leader RSS (MiB) <seed 1>", []float64{0, 60, 120}, []float64{40, 44, 42}, 480, 160)
	for _, want := range []string{`<svg xmlns="http://www.w3.org/2000/svg"`, "&lt;seed 1&gt;", `<polyline`, "2 min", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("no %q in\n%s", want, svg)
		}
	}
	if n := strings.Count(strings.SplitN(strings.SplitN(svg, `points="`, 2)[1], `"`, 2)[0], ","); n != 3 {
		t.Errorf("%d points, want 3", n)
	}
}
