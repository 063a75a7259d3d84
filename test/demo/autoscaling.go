package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/operator"
)

// startAdapter runs the metrics adapter as manifests/metrics-adapter does (its ServiceAccount
// and RBAC, the APIServices it registers), reached through an ExternalName Service on
// 127.0.0.1, and waits until the aggregator serves custom.metrics.k8s.io through it.
func startAdapter(ctx context.Context, c *cluster.Cluster, root, dir string, kubectl func(...string) error) (stop func(), err error) {
	bin, err := operator.BuildAdapter(ctx, dir)
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"service_account.yaml", "rbac.yaml"} {
		if err := kubectl("apply", "-f", filepath.Join(root, "manifests", "metrics-adapter", f)); err != nil {
			return nil, err
		}
	}
	sa, err := c.ServiceAccountKubeconfig(ctx, "inferenceservice-system", "inferenceservice-metrics-adapter")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	svc := filepath.Join(dir, "adapter-service.yaml")
	if err := writeFile(svc, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: inferenceservice-metrics-adapter, namespace: inferenceservice-system}
spec:
  type: ExternalName
  externalName: 127.0.0.1
  ports: [{name: https, port: %d}]
`, port)); err != nil {
		return nil, err
	}
	if err := kubectl("apply", "-f", svc); err != nil {
		return nil, err
	}
	a, err := operator.StartAdapter(ctx, bin, filepath.Join(dir, "metrics-adapter.log"), sa, filepath.Join(dir, "adapter-certs"), port,
		fmt.Sprintf("--apiservice-port=%d", port), "--scrape-period=3s")
	if err != nil {
		return nil, err
	}
	if err := kubectl("wait", "--for=condition=Available", "apiservice/v1beta2.custom.metrics.k8s.io", "--timeout=60s"); err != nil {
		a.Kill()
		return nil, err
	}
	return a.Kill, kubectl("get", "apiservice", "v1beta2.custom.metrics.k8s.io")
}

// loadStep sends a bounded load (48 clients, 2-second completions, at most 90 s) to qwen3's
// ready pods in turn, prints the HPA as it reads the queue, and stops once the HPA wants more
// pods than the model had.
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
	fmt.Printf("load stopped after %d requests; the HPA scales back down after its scale-down window (5 minutes by default)\n", sent.Load())
	return kubectl("get", "isvc,deploy", "qwen3")
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
