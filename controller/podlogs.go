// The last words of crashed containers, I/O before the decision: for each crashed run the
// diagnosis would quote (reconcile.LastWordsWanted), the tail of its log is read through the
// API's pod log endpoint (pods/log), once per run, and its decisive line handed to Reconcile in
// Observed.LastWords, keyed by the run. A read that fails (RBAC denies pods/log, the kubelet
// is unreachable) is remembered for that run too: the status keeps today's message, and the
// next restart is the next attempt.

package controller

import (
	"bytes"
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
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

// Results of a log read, the values of inferenceservice_operator_pod_log_reads_total's label.
const (
	LogReadOK        = "ok"
	LogReadForbidden = "forbidden"
	LogReadError     = "error"
)

// podLogCounter is the part of Metrics that counts log reads (metrics.Metrics has it); a
// Metrics without it counts none.
type podLogCounter interface {
	PodLogRead(result string)
}

// runKey is one run of one container: each is read at most once.
type runKey struct {
	pod       types.UID
	container string
	run       string
}

// lastWords remembers, per InferenceService, the line read for each crashed run its status
// quotes, "" when the read failed or found nothing. Only the runs the latest sync wanted are
// kept: a few per crash-looping model, none for a healthy one.
type lastWords struct {
	mu sync.Mutex
	m  map[queue.Key]map[runKey]string
}

func (l *lastWords) get(k queue.Key, r runKey) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line, ok := l.m[k][r]
	return line, ok
}

// keep replaces what is remembered for k.
func (l *lastWords) keep(k queue.Key, lines map[runKey]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[queue.Key]map[runKey]string{}
	}
	l.m[k] = lines
}

func (l *lastWords) forget(k queue.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, k)
}

// withLastWords returns the decisive line of each crashed run the diagnosis would quote, by the
// run's container ID (reconcile.Observed.LastWords), reading the log of each run not read before.
func (c *Controller) withLastWords(ctx context.Context, key queue.Key, isvc *crd.InferenceService, obs reconcile.Observed, now metav1.Time) map[string]string {
	wanted := reconcile.LastWordsWanted(reconcile.Input{ISVC: isvc, Observed: obs, Now: now})
	if len(wanted) == 0 {
		c.lastWords.forget(key)
		return nil
	}
	lines := make(map[runKey]string, len(wanted))
	out := make(map[string]string, len(wanted))
	for _, run := range wanted {
		r := runKey{run.PodUID, run.Container, run.RunID}
		line, ok := c.lastWords.get(key, r)
		if !ok {
			line = c.readLastWords(ctx, run)
		}
		lines[r] = line
		if line != "" {
			out[run.RunID] = line
		}
	}
	c.lastWords.keep(key, lines)
	return out
}

// readLastWords reads the tail of run's log and returns its decisive line; "" when the read
// failed or the log held none. The pod's status in the cache may lag the kubelet: a run seen
// just exited may already have been restarted, so when the current run's log holds nothing of
// the crashed run, its previous run is read once more.
func (c *Controller) readLastWords(ctx context.Context, run reconcile.CrashedRun) string {
	line, ok := c.readLog(ctx, run, run.Previous)
	if !ok && !run.Previous {
		line, _ = c.readLog(ctx, run, true)
	}
	return line
}

// readLog is one read of the pods/log endpoint; ok is false when nothing read was the run's.
func (c *Controller) readLog(ctx context.Context, run reconcile.CrashedRun, previous bool) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	defer cancel()
	body, err := c.kube.CoreV1().Pods(run.Namespace).GetLogs(run.Pod, &corev1.PodLogOptions{
		Container: run.Container, Previous: previous, Timestamps: true,
		TailLines: ptr.To[int64](logTailLines), LimitBytes: ptr.To[int64](logLimitBytes),
	}).DoRaw(ctx)
	result := LogReadOK
	switch {
	case apierrors.IsForbidden(err):
		result = LogReadForbidden
	case err != nil:
		result = LogReadError
	}
	if m, ok := c.metrics.(podLogCounter); ok {
		m.PodLogRead(result)
	}
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
