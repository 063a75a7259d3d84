package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
)

// startAdapter runs the metrics adapter as manifests/metrics-adapter does and shows its
// APIService available.
func startAdapter(ctx context.Context, c *cluster.Cluster, dir string, kubectl func(...string) error) (stop func(), err error) {
	a, err := operator.InstallMetricsAdapter(ctx, c, dir, "--scrape-period=3s")
	if err != nil {
		return nil, err
	}
	return a.Kill, kubectl("get", "apiservice", "v1beta2.custom.metrics.k8s.io")
}

// loadStep sends a bounded load (48 clients, 2-second completions, at most 90 s) to qwen3's
// ready pods in turn, prints the HPA as it reads the queue, and stops once the HPA wants more
// pods than the model had; an HPA that never does fails the demo, which promised it.
func loadStep(ctx context.Context, c *cluster.Cluster, kubectl func(...string) error) error {
	if err := kubectl("get", "hpa", "qwen3"); err != nil {
		return err
	}
	// The HPA's choice: scaled up once it wants more pods than the Deployment had at the start.
	count := func(kind, path string) int {
		out, _, _ := c.Kubectl(ctx, "get", kind, "qwen3", "-o", "jsonpath={"+path+"}")
		n, _ := strconv.Atoi(out)
		return n
	}
	before := count("deploy", ".spec.replicas")
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var ips atomic.Pointer[[]string]
	ips.Store(&[]string{})
	refresh := func() {
		out, _, err := c.Kubectl(ctx, "get", "pods", "-l", "ai.example.com/inferenceservice=qwen3",
			"-o", `jsonpath={range .items[*]}{.status.podIP} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return
		}
		var list []string
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == "True" {
				list = append(list, f[0])
			}
		}
		ips.Store(&list)
	}
	refresh()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 48}}
	var wg sync.WaitGroup
	var next, sent atomic.Int64
	for range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && sent.Load() < 5000 {
				list := *ips.Load()
				if len(list) == 0 {
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
					continue
				}
				sent.Add(1)
				ip := list[int(next.Add(1))%len(list)]
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ip+":8000/v1/completions",
					strings.NewReader(`{"model":"Qwen/Qwen3-0.6B","prompt":"Kubernetes operators are","max_tokens":100}`))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	fmt.Println("48 clients, each sending 100-token completions to qwen3's ready pods in turn (2 engine slots a pod)")
	start := time.Now()
	scaled := false
	for ctx.Err() == nil && !scaled {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		refresh()
		fmt.Printf("after %2.0fs:\n", time.Since(start).Seconds())
		_ = kubectl("get", "hpa", "qwen3")
		scaled = count("hpa", ".status.desiredReplicas") > before
	}
	cancel()
	wg.Wait()
	if !scaled {
		return fmt.Errorf("the HPA did not scale qwen3 above %d replicas in 90s of load (%d requests sent)", before, sent.Load())
	}
	fmt.Printf("load stopped after %d requests; the HPA scales back down after its scale-down window (5 minutes by default)\n", sent.Load())
	return kubectl("get", isvc+",deploy", "qwen3")
}
