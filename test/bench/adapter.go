package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// adapterRun is the metrics adapter as the default install runs it, serving the HPAs of the
// benchmark's models from their pods' /metrics.
type adapterRun struct {
	*operator.Adapter
	tls                    *rest.Config
	cpu0, passes0, errors0 float64
	at0                    time.Time
}

// startAdapter registers and starts it (its ServiceAccount and RBAC, an ExternalName Service
// on 127.0.0.1) and waits until the aggregator serves custom.metrics.k8s.io through it.
func startAdapter(ctx context.Context, e *testenv.Env, period time.Duration) (*adapterRun, error) {
	for _, f := range []string{"service_account.yaml", "rbac.yaml"} {
		if _, _, err := e.Cluster.Kubectl(ctx, "apply", "-f", filepath.Join(e.Root, "manifests", "metrics-adapter", f)); err != nil {
			return nil, err
		}
	}
	bin, err := operator.BuildAdapter(ctx, e.Dir)
	if err != nil {
		return nil, err
	}
	sa, err := e.Cluster.ServiceAccountKubeconfig(ctx, "inferenceservice-system", "inferenceservice-metrics-adapter")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	svc := filepath.Join(e.Dir, "adapter-service.yaml")
	if err := os.WriteFile(svc, []byte(fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: inferenceservice-metrics-adapter, namespace: inferenceservice-system}\nspec:\n  type: ExternalName\n  externalName: 127.0.0.1\n  ports: [{name: https, port: %d}]\n", port)), 0o600); err != nil {
		return nil, err
	}
	if _, _, err := e.Cluster.Kubectl(ctx, "apply", "-f", svc); err != nil {
		return nil, err
	}
	a, err := operator.StartAdapter(ctx, bin, filepath.Join(e.Dir, "metrics-adapter.log"), sa, filepath.Join(e.Dir, "adapter-certs"), port,
		fmt.Sprintf("--apiservice-port=%d", port), "--scrape-period="+period.String())
	if err != nil {
		return nil, err
	}
	if _, _, err := e.Cluster.Kubectl(ctx, "wait", "--for=condition=Available", "apiservice/v1beta2.custom.metrics.k8s.io", "--timeout=120s"); err != nil {
		a.Kill()
		return nil, err
	}
	return &adapterRun{Adapter: a, tls: e.Cluster.RESTConfig()}, nil
}

// counters reads its CPU time and its passes and failed reads so far.
func (a *adapterRun) counters() (cpu, passes, errs float64, err error) {
	if cpu, err = a.CPUSeconds(); err != nil {
		return
	}
	tlsCfg, err := rest.TLSConfigFor(a.tls)
	if err != nil {
		return
	}
	fams, err := a.Scrape(tlsCfg)
	if err != nil {
		return
	}
	passes = operator.SumCounter(fams, "inferenceservice_metrics_adapter_scrape_passes_total", nil)
	errs = operator.SumCounter(fams, "inferenceservice_metrics_adapter_scrapes_total", func(l map[string]string) bool { return l["result"] == "error" })
	return
}

// begin marks the start of the measured period.
func (a *adapterRun) begin() error {
	var err error
	a.cpu0, a.passes0, a.errors0, err = a.counters()
	a.at0 = time.Now()
	return err
}

// end fills r with the period's figures.
func (a *adapterRun) end(r *Result) error {
	cpu, passes, errs, err := a.counters()
	if err != nil {
		return err
	}
	minutes := time.Since(a.at0).Minutes()
	r.AdapterCPUSecondsPerMin = (cpu - a.cpu0) / minutes
	if passes > a.passes0 {
		r.AdapterPeriodSeconds = time.Since(a.at0).Seconds() / (passes - a.passes0)
	}
	r.AdapterReadErrors = errs - a.errors0
	if rss, err := a.RSSBytes(); err == nil {
		r.AdapterRSSMiB = float64(rss) / (1 << 20)
	}
	if anon, err := a.RSSAnonBytes(); err == nil {
		r.AdapterRSSAnonMiB = float64(anon) / (1 << 20)
	}
	return nil
}
