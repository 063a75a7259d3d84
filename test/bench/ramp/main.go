// Command ramp compares the autoscaling signals (issue 54) on the local cluster: one model per
// signal (the engine's queue, its KV-cache use), each autoscaled by the real HPA controller on
// the metric the operator's metrics adapter serves, all sent the same bounded ramp at once (a
// request rate that doubles every minute for five minutes, then halves each minute back down),
// and for each: the time the p95 time to first token over a sliding window was above the
// objective, the GPU-minutes its pods held, its most pods, its failed requests; the pods over
// time as an SVG. The pods run the local cluster's fake vLLM, whose prefill and token times
// come from its engine steps (test/localcluster/vllm/step.go). Everything is on loopback.
//
//	go run ./test/bench/ramp                     # make bench-ramp: the documented size (about 12 minutes)
//	go run ./test/bench/ramp -step 10s -base 1   # a quick look
//	go run ./test/bench/ramp -replot bench-ramp.json -svg docs/ramp.svg   # a run's table and plot again
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	c := Config{Log: os.Stderr}
	flag.Float64Var(&c.Schedule.Base, "base", 2, "requests a second of each model's load at the ramp's start and end")
	flag.IntVar(&c.Schedule.Up, "doublings", 5, "steps of the ramp up (the load doubles at each but the first), then as many less one halving down")
	flag.DurationVar(&c.Schedule.Step, "step", time.Minute, "each step's length")
	flag.DurationVar(&c.Objective, "objective", 500*time.Millisecond, "the objective: the p95 time to first token over the window at most this")
	flag.DurationVar(&c.Window, "window", 30*time.Second, "the p95's sliding window")
	flag.IntVar(&c.MinReplicas, "min-replicas", 1, "every model's spec.autoscaling.minReplicas")
	flag.IntVar(&c.MaxReplicas, "max-replicas", 8, "every model's spec.autoscaling.maxReplicas")
	flag.DurationVar(&c.ScaleDownDelay, "scale-down-delay", 2*time.Minute, "every model's spec.autoscaling.scaleDownDelaySeconds")
	flag.DurationVar(&c.LoadTime, "load-time", 20*time.Second, "a new pod's weights load before it is ready (the local cluster's --vllm-load-time)")
	flag.IntVar(&c.MaxInFlight, "max-in-flight", 400, "each model's bound on requests in flight; one past it is not sent and counts as failed")
	sigs := flag.String("signals", "queue,kvcache,ttft", "comma-separated signals, each on a model of its own")
	flag.BoolVar(&c.Keep, "keep", false, "keep the cluster's directory")
	out := flag.String("out", "bench-ramp.json", "where to write the JSON results")
	svg := flag.String("svg", "docs/ramp.svg", "where to write the plot")
	replot := flag.String("replot", "", "a run's JSON: write its table and plot again, without running")
	flag.Parse()
	c.Signals = strings.Split(*sigs, ",")
	if *replot != "" {
		var r Result
		b, err := os.ReadFile(*replot)
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err == nil {
			WriteTable(os.Stdout, r)
			err = writeSVG(*svg, r)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Schedule.Duration()+15*time.Minute)
	defer cancel()
	r, err := Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-ramp:", err)
		os.Exit(1)
	}
	fmt.Printf("%s; the ramp %v req/s a model, a step each %s; objective: p95 time to first token over %s at most %s\n\n",
		r.Machine, c.Schedule.levels(), c.Schedule.Step, c.Window, c.Objective)
	WriteTable(os.Stdout, r)
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := writeSVG(*svg, r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("\nwrote", *out, "and", *svg)
}

func writeSVG(path string, r Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	WriteSVG(f, r)
	return f.Close()
}
