// The last words of crashed containers: for each crashed run the diagnosis would quote
// (reconcile.LastWordsWanted), the tail of its log is read through the API's pod log endpoint
// (pods/log), once per run, and its decisive line handed to Reconcile in Observed.LastWords,
// keyed by the run. A read that fails (RBAC denies pods/log, the kubelet is unreachable) is
// remembered for that run too: the status keeps today's message, and the next restart is the
// next attempt.

package evidence

import (
	"bytes"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/queue"
)

const (
	// logTailLines and logLimitBytes bound one read: a traceback's end and the lines before
	// it, never the whole log (the kubelet applies the byte limit after the tail).
	logTailLines  = 50
	logLimitBytes = 16 << 10
	// logReadTimeout bounds one read: the API server proxies it to the node's kubelet.
	logReadTimeout = 5 * time.Second
)

// runKey is one run of one container: each is read at most once.
type runKey struct {
	pod       types.UID
	container string
	run       string
}

// lastWords returns the decisive line of each wanted run, by the run's container ID, reading
// the log of each run not read before. Only the runs this sync wanted stay remembered ("" when
// the read failed or found nothing): a few per crash-looping model, none for a healthy one.
func (r *Reader) lastWords(ctx context.Context, key queue.Key, wanted []reconcile.CrashedRun) map[string]string {
	if len(wanted) == 0 {
		r.words.forget(key)
		return nil
	}
	last, _ := r.words.get(key)
	lines := make(map[runKey]string, len(wanted))
	out := make(map[string]string, len(wanted))
	for _, run := range wanted {
		k := runKey{run.PodUID, run.Container, run.RunID}
		line, ok := last.v[k]
		if !ok {
			line = r.readLastWords(ctx, run)
		}
		lines[k] = line
		if line != "" {
			out[run.RunID] = line
		}
	}
	r.words.put(key, time.Time{}, lines) // kept per run, not per period
	return out
}

// readLastWords reads the tail of run's log and returns its decisive line; "" when the read
// failed or the log held none. The pod's status in the cache may lag the kubelet: a run seen
// just exited may already have been restarted, so when the current run's log holds nothing of
// the crashed run, its previous run is read once more.
func (r *Reader) readLastWords(ctx context.Context, run reconcile.CrashedRun) string {
	line, ok := r.readLog(ctx, run, run.Previous)
	if !ok && !run.Previous {
		line, _ = r.readLog(ctx, run, true)
	}
	return line
}

// readLog is one read of the pods/log endpoint; ok is false when nothing read was the run's.
func (r *Reader) readLog(ctx context.Context, run reconcile.CrashedRun, previous bool) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	defer cancel()
	body, err := r.kube.CoreV1().Pods(run.Namespace).GetLogs(run.Pod, &corev1.PodLogOptions{
		Container: run.Container, Previous: previous, Timestamps: true,
		TailLines: ptr.To[int64](logTailLines), LimitBytes: ptr.To[int64](logLimitBytes),
	}).DoRaw(ctx)
	r.countLogRead(resultOf(err))
	if err != nil {
		klog.V(2).InfoS("Log of a crashed container not read; its status keeps the exit code only", "pod", klog.KRef(run.Namespace, run.Pod),
			"container", run.Container, "previous", previous, "err", err)
		return "", true // not retried for this run: the next restart is the next attempt
	}
	if len(body) >= logLimitBytes {
		// Cut at the limit: the last line may be a part of one.
		body = body[:bytes.LastIndexByte(body, '\n')+1]
	}
	return reconcile.LastWordsOf(string(body), run)
}
