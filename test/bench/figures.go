// The figures: the controller's API and Event writes, the wait for writes to settle, quantiles, the printed table.

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	dto "github.com/prometheus/client_model/go"

	"github.com/example/inferenceservice-operator/test/operator"
)

// eventWrites counts the controller's Event writes in ns.
func eventWrites(ctx context.Context, kube kubernetes.Interface, ns string, sys system) (float64, error) {
	l, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0.0
	for i := range l.Items {
		n += sys.eventWrites(&l.Items[i])
	}
	return n, nil
}

// settle waits until the operator's writes have not moved for a resync period (at least 3s)
// and returns their count.
func settle(ctx context.Context, op process, period time.Duration) (float64, error) {
	last, err := op.Writes()
	if err != nil {
		return 0, err
	}
	since := time.Now()
	for time.Since(since) < max(period, 3*time.Second) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond): // sampling interval
		}
		w, err := op.Writes()
		if err != nil {
			return 0, err
		}
		if w != last {
			last, since = w, time.Now()
		}
	}
	return last, nil
}

// histogramQuantile estimates a quantile from a histogram family as Prometheus does, from its
// first series whose labels match (any, when match is nil).
func histogramQuantile(fams map[string]*dto.MetricFamily, name string, match func(map[string]string) bool, q float64) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	var h *dto.Histogram
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if match == nil || match(labels) {
			h = m.GetHistogram()
			break
		}
	}
	if h == nil {
		return 0
	}
	total := float64(h.GetSampleCount())
	if total == 0 {
		return 0
	}
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, b := range h.GetBucket() {
		c := float64(b.GetCumulativeCount())
		if c >= rank {
			if c == prevCount {
				return b.GetUpperBound()
			}
			return prevBound + (b.GetUpperBound()-prevBound)*(rank-prevCount)/(c-prevCount)
		}
		prevBound, prevCount = b.GetUpperBound(), c
	}
	return prevBound
}

// PrintTable writes the results as a table.
func PrintTable(out io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tN\twrites/create\t(events)\twrites/change\t(events)\tsteady writes\tchildren s\tready s\tbaseline ready s\trate vs baseline\te2a p50 ms\te2a p99 ms\tRSS MiB\theap MiB\tB/object\treconcile p50 ms\tp99 ms\tCPU s\t")
	for _, r := range rs {
		sys := r.System
		if sys == "" {
			sys = SystemOperator
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.1f\t%.1f\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t%.2f\t%.1f\t\n",
			sys, r.N, r.WritesPerISVCCreate, r.EventWritesPerISVCCreate, r.WritesPerSpecChange, r.EventWritesPerSpecChange, r.WritesSteady, r.ChildrenSeconds, r.ReadySeconds, r.BaselineReadySeconds,
			r.RateVsBaseline, r.EventToActionP50Ms, r.EventToActionP99Ms, r.RSSMiB, r.HeapMiB, r.BytesPerCachedObject, r.ReconcileP50Ms, r.ReconcileP99Ms, r.CPUSeconds)
	}
	tw.Flush()
	printRatios(tw, rs)
	for i, r := range rs {
		if r.AdapterRSSMiB == 0 {
			continue
		}
		if i == 0 || rs[i-1].AdapterRSSMiB == 0 {
			fmt.Fprintln(tw, "\nN\tadapter CPU s/min\tscrape period s\tfailed reads\tadapter RSS MiB\t(anonymous)\t")
		}
		fmt.Fprintf(tw, "%d\t%.2f\t%.1f\t%.0f\t%.1f\t%.1f\t\n", r.N, r.AdapterCPUSecondsPerMin, r.AdapterPeriodSeconds, r.AdapterReadErrors, r.AdapterRSSMiB, r.AdapterRSSAnonMiB)
	}
	tw.Flush()
	for i, r := range rs {
		if i == 0 {
			fmt.Fprintln(tw, "\nN\tpeak RSS MiB\tsettled RSS MiB\t(anonymous)\tsettled heap MiB\tmemory limit MiB\tcgroup peak MiB\tworking set MiB\tOOM kills\t")
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.1f\t%.1f\t%d\t\n", r.N, r.PeakRSSMiB, r.SettledRSSMiB, r.SettledRSSAnonMiB, r.SettledHeapMiB, r.MemoryLimitMiB, r.CgroupPeakMiB, r.WorkingSetMiB, r.OOMKills)
	}
	tw.Flush()
}

// printRatios writes, for each N measured with both systems, KServe's figures over the
// operator's (above 1: KServe writes, waits or holds more).
func printRatios(tw *tabwriter.Writer, rs []Result) {
	header := false
	for _, k := range rs {
		if k.System != SystemKServe {
			continue
		}
		for _, o := range rs {
			if o.N != k.N || (o.System != "" && o.System != SystemOperator) {
				continue
			}
			if !header {
				fmt.Fprintln(tw, "\nkserve/operator N\twrites/create\tsteady writes\tchildren s\tready s\tRSS\theap\treconcile p50\tp99\tCPU s\t")
				header = true
			}
			ratio := func(a, b float64) string {
				if b == 0 {
					return fmt.Sprintf("%.4g/0", a)
				}
				return fmt.Sprintf("%.2f", a/b)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k.N,
				ratio(k.WritesPerISVCCreate, o.WritesPerISVCCreate), ratio(k.WritesSteady, o.WritesSteady),
				ratio(k.ChildrenSeconds, o.ChildrenSeconds), ratio(k.ReadySeconds, o.ReadySeconds),
				ratio(k.RSSMiB, o.RSSMiB), ratio(k.HeapMiB, o.HeapMiB),
				ratio(k.ReconcileP50Ms, o.ReconcileP50Ms), ratio(k.ReconcileP99Ms, o.ReconcileP99Ms), ratio(k.CPUSeconds, o.CPUSeconds))
			break
		}
	}
	tw.Flush()
}

// settledMemory waits for the runtime's own collection at rest (it forces one when none has
// run for 2 minutes) and then for the scavenger to hand back what it freed, and reads the
// memory: what a cluster carries for hours, where the reading right after a burst still holds
// the burst's garbage below the next collection's goal.
func settledMemory(ctx context.Context, op process) (rss, anon int64, heap float64, err error) {
	gcs := func() (float64, float64, error) {
		fams, err := op.Scrape()
		if err != nil {
			return 0, 0, err
		}
		return operator.SumCounter(fams, "go_gc_duration_seconds", nil), operator.SumCounter(fams, "go_memstats_heap_inuse_bytes", nil), nil
	}
	tick := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second): // sampling interval
			return nil
		}
	}
	first, _, err := gcs()
	if err != nil {
		return 0, 0, 0, err
	}
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if err := tick(); err != nil {
			return 0, 0, 0, err
		}
		n, h, err := gcs()
		if err != nil {
			return 0, 0, 0, err
		}
		if n > first {
			heap = h
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("no collection at rest in 3m (%v so far)", n)
		}
	}
	// The scavenger returns freed pages at a bounded pace: read until the resident set holds
	// still for a sample, or 2 minutes.
	last, err := op.RSSAnonBytes()
	if err != nil {
		return 0, 0, 0, err
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		if err := tick(); err != nil {
			return 0, 0, 0, err
		}
		a, err := op.RSSAnonBytes()
		if err != nil {
			return 0, 0, 0, err
		}
		if still := last - a; still < 1<<20 && still > -(1<<20) {
			break
		}
		last = a
	}
	if rss, err = op.RSSBytes(); err != nil {
		return 0, 0, 0, err
	}
	anon, err = op.RSSAnonBytes()
	return rss, anon, heap, err
}

// profilePeaks keeps at path the heap profile taken when the operator's anonymous memory was
// the highest seen, sampled every 30 s until stop: what a memory limit has to hold is the
// peak, which an OOM kill can end before the profile at rest is taken.
func profilePeaks(op *operator.Process, path string, stop <-chan struct{}) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "peak profiles:", err)
		return
	}
	var most int64
	for {
		select {
		case <-stop:
			return
		case <-op.Exited():
			return
		case <-time.After(30 * time.Second): // sampling interval
		}
		anon, err := op.RSSAnonBytes()
		if err != nil || anon < most+1<<20 {
			continue
		}
		most = anon
		// Written aside then renamed: a kill mid-copy leaves the last whole profile.
		if err := op.HeapProfile(path + ".tmp"); err == nil {
			_ = os.Rename(path+".tmp", path)
		}
	}
}
