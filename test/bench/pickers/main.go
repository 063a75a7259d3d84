// Command pickers measures the pool route's cost per model (issue 55): at each N, on a fresh
// local cluster, N models with spec.gateway and room to scale (replicas 1, so the HPA may reach
// 3: each gets an endpoint picker), created one after another. Per N: the time from each
// model's create to Routed InferencePoolRoute (p50, p99), the operator's writes per model to
// that point, the objects the pool route adds per model, and the picker processes' resident
// memory and CPU, at rest and under a bounded load through the test gateway (every request goes
// through a picker's ext_proc). The pickers run for real: the local kubelet runs EPP_BIN (the
// extension's cmd/epp v1.5.0, make epp) for each picker pod. Everything is on loopback.
//
//	go run ./test/bench/pickers                    # make bench-pickers: N = 10, 100, 1000
//	go run ./test/bench/pickers -n 10 -rest 10s -load 10s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	c := Config{Log: os.Stderr}
	ns := flag.String("n", "10,100,1000", "comma-separated model counts, each on a fresh cluster")
	flag.IntVar(&c.MaxPickers, "max-pickers", 0, "the most picker processes this machine runs at once (0: estimated from free memory after the first N); a larger N is not run, and its row is extrapolated per picker")
	flag.DurationVar(&c.Rest, "rest", 30*time.Second, "window of the at-rest reading")
	flag.DurationVar(&c.Load, "load", 30*time.Second, "window of the bounded load")
	flag.IntVar(&c.Workers, "workers", 8, "requests in flight during the load, spread over the models")
	flag.DurationVar(&c.RouteTimeout, "route-timeout", 20*time.Minute, "bound on the wait for every model's InferencePoolRoute")
	out := flag.String("out", "bench-pickers.json", "where to write the JSON results")
	flag.Parse()
	for _, f := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bad count %q in -n %q\n", f, *ns)
			os.Exit(2)
		}
		c.N = append(c.N, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	rs, err := Run(ctx, c)
	PrintTable(os.Stdout, rs)
	if b, jerr := json.MarshalIndent(rs, "", "  "); jerr == nil {
		_ = os.WriteFile(*out, b, 0o644)
		fmt.Println("wrote", *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-pickers:", err)
		os.Exit(1)
	}
}
