package main

import (
	"context"
	"time"

	"k8s.io/client-go/rest"

	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// adapterRun is the metrics adapter as the default install runs it, serving the HPAs of the
// benchmark's models from their pods' /metrics.
type adapterRun struct {
	*operator.MetricsAdapter
	tls                    *rest.Config
	cpu0, passes0, errors0 float64
	at0                    time.Time
}

// startAdapter runs it as the default install does, reading every pod once a period.
func startAdapter(ctx context.Context, e *testenv.Env, period time.Duration) (*adapterRun, error) {
	a, err := operator.InstallMetricsAdapter(ctx, e.Cluster, e.Dir, "--scrape-period="+period.String())
	if err != nil {
		return nil, err
	}
	return &adapterRun{MetricsAdapter: a, tls: e.Cluster.RESTConfig()}, nil
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
