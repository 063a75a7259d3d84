// The figures: the operator's API and Event writes, the wait for writes to settle, quantiles, the printed table.

package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	dto "github.com/prometheus/client_model/go"

	"github.com/example/inferenceservice-operator/test/operator"
)

// eventWrites counts the operator's Event writes in ns: one create per Event, one patch per
// further occurrence in its series.
func eventWrites(ctx context.Context, kube kubernetes.Interface, ns string) (float64, error) {
	l, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0.0
	for _, e := range l.Items {
		if e.ReportingController != "inferenceservice-operator" {
			continue
		}
		n++
		if e.Series != nil {
			n += float64(e.Series.Count - 1)
		}
	}
	return n, nil
}

// settle waits until the operator's writes have not moved for a resync period (at least 3s)
// and returns their count.
func settle(ctx context.Context, op *operator.Process, period time.Duration) (float64, error) {
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

// histogramQuantile estimates a quantile from a histogram family as Prometheus does.
func histogramQuantile(fams map[string]*dto.MetricFamily, name string, q float64) float64 {
	f, ok := fams[name]
	if !ok || len(f.GetMetric()) == 0 {
		return 0
	}
	h := f.GetMetric()[0].GetHistogram()
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
	fmt.Fprintln(tw, "N\twrites/create\t(events)\twrites/change\t(events)\tsteady writes\tchildren s\tready s\tbaseline ready s\trate vs baseline\te2a p50 ms\te2a p99 ms\tRSS MiB\theap MiB\tB/object\treconcile p50 ms\tp99 ms\tCPU s\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.1f\t%.1f\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t%.2f\t%.1f\t\n",
			r.N, r.WritesPerISVCCreate, r.EventWritesPerISVCCreate, r.WritesPerSpecChange, r.EventWritesPerSpecChange, r.WritesSteady, r.ChildrenSeconds, r.ReadySeconds, r.BaselineReadySeconds,
			r.RateVsBaseline, r.EventToActionP50Ms, r.EventToActionP99Ms, r.RSSMiB, r.HeapMiB, r.BytesPerCachedObject, r.ReconcileP50Ms, r.ReconcileP99Ms, r.CPUSeconds)
	}
	tw.Flush()
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
}
