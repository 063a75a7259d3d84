// Where a start's minutes went (reconcile.StartsWanted): the head of each serving run's log is
// read through pods/log once, when the run is first seen ready, and with a pod's first run its
// pod's Events (the kubelet's Pulled), and told as a start (reconcile.StartOf); each phase of a
// start that just ended is counted in the start phase histogram. A log read that fails is
// remembered as nothing for that run: its start is not told; an Events read that fails leaves
// the image's pull inside "container started".

package evidence

import (
	"bytes"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

const (
	// startLimitBytes bounds one read of a start log. The read takes the log's head (no tail:
	// the kubelet cuts at the limit from the first line), where a start is told: vLLM v0.11
	// prints about 100 lines, 20-40 KiB, before it serves, more with many workers.
	startLimitBytes = 128 << 10
	// startObservedWithin is how recent a start must be to be counted in the histogram: a
	// restarted operator reads the serving runs again, whose starts were counted already.
	startObservedWithin = 10 * time.Minute
)

// starts returns the start of each wanted run, by run ID, reading the log of each run not read
// before. Only the runs this sync wanted stay remembered.
func (r *Reader) starts(ctx context.Context, key queue.Key, wanted []reconcile.StartRun, now time.Time) map[string]*crd.StartRecord {
	if len(wanted) == 0 {
		r.startReads.forget(key)
		return nil
	}
	last, _ := r.startReads.get(key)
	out := make(map[string]*crd.StartRecord, len(wanted))
	for _, run := range wanted {
		rec, ok := last.v[run.RunID]
		if !ok {
			rec = r.readStart(ctx, run)
			r.observeStart(rec, now)
		}
		out[run.RunID] = rec
	}
	r.startReads.put(key, time.Time{}, out) // kept per run, not per period
	return out
}

// readStart reads the head of run's log, and for a first run its pod's Events, and tells its
// start; nil when the log's read failed or the log does not say the server serves.
func (r *Reader) readStart(ctx context.Context, run reconcile.StartRun) *crd.StartRecord {
	logCtx, cancel := context.WithTimeout(ctx, logReadTimeout)
	defer cancel()
	body, err := r.kube.CoreV1().Pods(run.Namespace).GetLogs(run.Pod, &corev1.PodLogOptions{
		Container: run.Container, Timestamps: true, LimitBytes: ptr.To[int64](startLimitBytes),
	}).DoRaw(logCtx)
	r.countLogRead(resultOf(err))
	if err != nil {
		klog.V(2).InfoS("Start log of a serving container not read; its start's phases are not told", "pod", klog.KRef(run.Namespace, run.Pod),
			"container", run.Container, "err", err)
		return nil
	}
	if len(body) >= startLimitBytes {
		body = body[:bytes.LastIndexByte(body, '\n')+1] // cut at the limit: the last line may be a part of one
	}
	server := engine.For(run.Engine).StartPhases(string(body), run.StartedAt)
	rec := reconcile.StartOf(run, nil, server)
	if rec == nil || run.Restarted {
		return rec // no start, or one without the pod's phases: no Events to read
	}
	events, err := r.listPodEvents(ctx, run.Namespace, run.PodUID)
	if err != nil {
		klog.V(2).InfoS("Events of a started pod not read; its image's pull is not told apart", "pod", klog.KRef(run.Namespace, run.Pod), "err", err)
	}
	return reconcile.StartOf(run, events, server)
}

// observeStart counts a start that just ended in the histogram, phase by phase.
func (r *Reader) observeStart(rec *crd.StartRecord, now time.Time) {
	if rec == nil {
		return
	}
	served, err := time.Parse(time.RFC3339Nano, rec.ServingAt)
	if err != nil || now.Sub(served) > startObservedWithin {
		return
	}
	for _, p := range rec.Phases {
		r.observeStartPhase(p.Name, p.Seconds)
	}
}
