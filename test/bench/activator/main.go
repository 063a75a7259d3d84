// Command activator measures the activator (issue 55) on the local cluster, side by side with
// the model's pod called directly, in one run: the latency it adds to a completion and to a
// stream (headers, first token, last byte), whether it buffers a stream, requests per second at
// a fixed concurrency, its resident memory with 0, 100 and 1,000 requests held against models at
// zero, and the time to the first byte of 1, 10 and 100 requests sent at once to a model at
// zero. The activator runs as manifests/activator installs it (its binary run by the local
// kubelet for its image, on its pod IP, with the shipped flags and GOMEMLIMIT); the models are
// the local cluster's fake vLLM at its default pace (20 ms a token). Everything is on loopback.
//
//	go run ./test/bench/activator                  # make bench-activator: the documented size
//	go run ./test/bench/activator -pairs 50 -stream-pairs 10 -rps-seconds 5 -held 100 -cold 1
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
	flag.IntVar(&c.Pairs, "pairs", 400, "non-streamed completions (1 token) per path, sent in pairs back to back")
	flag.IntVar(&c.StreamPairs, "stream-pairs", 40, "streamed completions per path, in pairs")
	flag.IntVar(&c.StreamTokens, "stream-tokens", 8, "tokens per streamed completion")
	conc := flag.String("concurrency", "16,128", "comma-separated requests in flight of the throughput runs: 16 is paced by the model server, 128 by this machine's CPU")
	rps := flag.Int("rps-seconds", 20, "seconds of the throughput run, per path")
	held := flag.String("held", "100,1000", "comma-separated counts of requests held at once for the memory rows (the last, when 1000, the shipped --max-held-total: only then is the request sent past it refused)")
	cold := flag.String("cold", "1,10,100", "comma-separated counts of requests sent at once to a model at zero (100 is the shipped --max-held)")
	flag.DurationVar(&c.Timeout, "phase-timeout", 5*time.Minute, "bound on each phase")
	flag.BoolVar(&c.Keep, "keep", false, "keep the cluster's directory")
	out := flag.String("out", "bench-activator.json", "where to write the JSON results")
	flag.Parse()
	c.RPSDuration = time.Duration(*rps) * time.Second
	var err error
	if c.Held, err = counts(*held); err == nil {
		if c.Cold, err = counts(*cold); err == nil {
			c.Concurrency, err = counts(*conc)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r, err := Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-activator:", err)
		os.Exit(1)
	}
	PrintTable(os.Stdout, r)
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("wrote", *out)
}

// counts parses a comma-separated list of positive counts, in increasing order.
func counts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("bad count %q in %q: want positive counts in increasing order", f, s)
		}
		out = append(out, n)
	}
	return out, nil
}
