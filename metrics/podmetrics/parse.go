// Package podmetrics reads vLLM's queue from the model pods themselves: each ready pod's
// /metrics, on a bounded period and concurrency, for the custom metrics API the HPA reads.
// It sits beside the operator, not in it: the informers feed it pods, custommetrics serves
// what it read.
package podmetrics

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/example/inferenceservice-operator/controller/engine/vllm"
)

// WaitingMetric is the engine's count of requests queued for a slot, one series per served
// model name (vLLM's, the engine every model pod runs).
const WaitingMetric = vllm.QueueSeries

// ParseWaiting sums WaitingMetric over its series (the base model and every adapter share one
// engine, so their queues add). Only that family's lines are handed to the exposition parser:
// a vLLM page is mostly histogram buckets, and the HPA needs none of them.
func ParseWaiting(r io.Reader) (float64, error) {
	var family bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if isFamilyLine(line) {
			family.Write(line)
			family.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(&family)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", WaitingMetric, err)
	}
	f, ok := families[WaitingMetric]
	if !ok || len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("no %s in the pod's metrics", WaitingMetric)
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		switch {
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		default:
			return 0, fmt.Errorf("%s is a %s, want a gauge", WaitingMetric, f.GetType())
		}
	}
	if sum != sum || sum < 0 { // NaN or negative: a broken exporter, not a queue
		return 0, fmt.Errorf("%s is %v", WaitingMetric, sum)
	}
	return sum, nil
}

// isFamilyLine is a sample of WaitingMetric or its HELP/TYPE comment.
func isFamilyLine(line []byte) bool {
	if rest, ok := bytes.CutPrefix(line, []byte("# ")); ok {
		if r, ok := bytes.CutPrefix(rest, []byte("HELP ")); ok {
			rest = r
		} else if r, ok := bytes.CutPrefix(rest, []byte("TYPE ")); ok {
			rest = r
		} else {
			return false
		}
		name, _, _ := bytes.Cut(rest, []byte(" "))
		return string(name) == WaitingMetric
	}
	rest, ok := bytes.CutPrefix(line, []byte(WaitingMetric))
	return ok && len(rest) > 0 && (rest[0] == '{' || rest[0] == ' ')
}
