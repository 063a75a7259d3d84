// Command bench measures the operator at scale on the local cluster: API writes per isvc,
// convergence time against a plain-client baseline at the same QPS, event-to-action latency,
// memory at rest and reconcile latency. It prints a table and writes JSON.
//
//	go run ./test/bench -n 100,1000                # the documented run
//	go run ./test/bench -n 20 -hold 2 -resync 3s   # what CI runs (TestBenchSmall in bench_test.go)
//	go run ./test/bench -system=operator,kserve -n 100 -skip-change   # side by side with KServe (make bench-kserve)
//	go run ./test/bench -n 1000 -skip-baseline -skip-change -operator-args=--network-policies=false   # a flag's cost
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

	"k8s.io/apimachinery/pkg/api/resource"
)

func main() {
	ns := flag.String("n", "100,1000", "comma-separated counts of InferenceServices")
	qps := flag.Int("qps", 50, "client QPS of the operator and of the baseline client (KServe's manager has no such flag: controller-runtime leaves its client unthrottled, to the API server's priority and fairness)")
	hold := flag.Int("hold", 3, "resync periods to hold steady")
	resync := flag.Duration("resync", 10*time.Second, "operator resync period")
	out := flag.String("out", "bench.json", "where to write the JSON results")
	skipBaseline := flag.Bool("skip-baseline", false, "leave out the plain client's baseline run (no rate figure)")
	skipChange := flag.Bool("skip-change", false, "stop after the steady period: no spec change, no delete")
	profile := flag.String("profile", "", "directory for the operator's heap profile at rest (runs it with --pprof)")
	env := flag.String("env", "", "space-separated KEY=VALUE added to (and overriding) the operator's env from the shipped Deployment, e.g. GOGC=50")
	operatorArgs := flag.String("operator-args", "", "space-separated extra flags for the operator, after the bench's own (a later flag wins), e.g. --network-policies=false")
	clusterArgs := flag.String("cluster-args", "", "space-separated extra flags for the local cluster, e.g. --controller-qps=200 (its controller manager's client, 20 by default, paces pod creation)")
	adapter := flag.Bool("adapter", false, "run the metrics adapter (every pod serving vLLM's /metrics) and measure what serving the HPAs' metric costs at rest")
	scrapePeriod := flag.Duration("scrape-period", 10*time.Second, "the adapter's --scrape-period, with -adapter")
	systems := flag.String("system", SystemOperator, "comma-separated controllers to measure, each on a fresh cluster per N: operator, kserve (KServe's manager in Standard mode, built by test/kserve/build.sh)")
	memoryLimit := flag.String("memory-limit", "", "run the operator in a kernel memory cgroup of this size (e.g. 128Mi) with MEMORY_LIMIT set as its Deployment sets it; an OOM kill fails the run (cgroup v1, root)")
	settle := flag.Bool("settle", false, "after the steady period, wait for a collection at rest and the scavenger, and read the memory again")
	flag.Parse()
	var limit int64
	if *memoryLimit != "" {
		q, err := resource.ParseQuantity(*memoryLimit)
		if err != nil || q.Value() <= 0 {
			fmt.Fprintln(os.Stderr, "bad -memory-limit:", *memoryLimit, err)
			os.Exit(2)
		}
		limit = q.Value()
	}
	var results []Result
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintln(os.Stderr, "bad -n:", s)
			os.Exit(2)
		}
		for _, sys := range strings.Split(*systems, ",") {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Hour)
			r, err := Run(ctx, Config{N: n, QPS: *qps, HoldPeriods: *hold, Resync: *resync, Log: os.Stderr,
				SkipBaseline: *skipBaseline, SkipChange: *skipChange, ProfileDir: *profile, ClusterArgs: strings.Fields(*clusterArgs), Env: strings.Fields(*env), OperatorArgs: strings.Fields(*operatorArgs),
				Adapter: *adapter, ScrapePeriod: *scrapePeriod, System: strings.TrimSpace(sys), MemoryLimit: limit, Settle: *settle})
			cancel()
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench %s n=%d: %v\n", sys, n, err)
				os.Exit(1)
			}
			results = append(results, r)
			// Print and save after each run, so a later one that fails keeps the earlier ones.
			PrintTable(os.Stdout, results)
			b, _ := json.MarshalIndent(results, "", "  ")
			if err := os.WriteFile(*out, b, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Println("wrote", *out)
		}
	}
}
