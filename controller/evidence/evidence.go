// Package evidence is what the diagnosis reads beyond the caches, I/O before the decision
// (informers -> queue -> controller sync -> evidence -> reconcile -> controller apply): the
// Events of pods still being created, the crashed run's log, the cluster's GPUs per node, the
// queued Workloads' positions and a multi-node model's refused pod creations. Each is read
// only when the decision wants it (reconcile names what it wants) and remembered in one memo
// type between syncs, so a resync reads nothing new; Forget drops a deleted model's reads.
package evidence

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

// Results of a read, the result label's values of inferenceservice_operator_pod_log_reads_total
// and inferenceservice_operator_pod_event_reads_total.
const (
	ReadOK        = "ok"
	ReadForbidden = "forbidden"
	ReadError     = "error"
)

// Nodes is the node cache's view the GPU survey needs; informers.Set implements it.
type Nodes interface {
	// Nodes are every cached node, stripped to its GPU facts; nil when nodes are not watched.
	Nodes() []*corev1.Node
}

// Enqueuer takes the models a background read has news for; *queue.Queue implements it.
type Enqueuer interface {
	Add(queue.Key)
}

// Config wires a Reader.
type Config struct {
	Kube    kubernetes.Interface // Events, pod logs and the cluster's pods
	Dynamic dynamic.Interface    // Kueue's visibility API
	Nodes   Nodes
	Queue   Enqueuer
	// CountLogRead and CountEventRead count reads by result (metrics.Metrics' PodLogRead and
	// PodEventRead); nil counts none.
	CountLogRead, CountEventRead func(result string)
	// ObserveStartPhase counts one phase of a start (metrics.Metrics' StartPhase); nil counts none.
	ObserveStartPhase func(phase string, seconds float64)
}

// Reader reads the evidence and remembers it between syncs; it is safe for concurrent use.
type Reader struct {
	kube                         kubernetes.Interface
	dyn                          dynamic.Interface
	nodes                        Nodes
	queue                        Enqueuer
	countLogRead, countEventRead func(result string)
	observeStartPhase            func(phase string, seconds float64)

	events   memo[queue.Key, map[types.UID]stamped[[]reconcile.PodEvent]] // podevents.go
	words    memo[queue.Key, map[runKey]string]                           // lastwords.go
	groups   memo[queue.Key, map[string]string]                           // groupfailures.go
	survey   memo[struct{}, gpuUse]                                       // gpusurvey.go
	surveyMu sync.Mutex                                                   // one survey at a time
	// placement is the nodes' taints and labels (placementsurvey.go), one list at a time.
	placement   memo[struct{}, []reconcile.NodePlacement]
	placementMu sync.Mutex
	queues      memo[localQueue, queueReads] // queuepositions.go

	startReads memo[queue.Key, map[string]*crd.StartRecord] // starts.go
}

// New builds a Reader.
func New(cfg Config) *Reader {
	count := func(f func(string)) func(string) {
		if f == nil {
			return func(string) {}
		}
		return f
	}
	observe := cfg.ObserveStartPhase
	if observe == nil {
		observe = func(string, float64) {}
	}
	return &Reader{kube: cfg.Kube, dyn: cfg.Dynamic, nodes: cfg.Nodes, queue: cfg.Queue,
		countLogRead: count(cfg.CountLogRead), countEventRead: count(cfg.CountEventRead), observeStartPhase: observe}
}

// Evidence is what a Read found: the fields of reconcile.Observed the caches cannot fill.
type Evidence struct {
	// PodEvents are the Events of the pods reconcile.CreatingPods names, by pod UID.
	PodEvents map[types.UID][]reconcile.PodEvent
	// Workloads are the caches' Workloads, the pending ones with their queue positions.
	Workloads map[types.UID]kinds.Workload
	// GPUSurvey is the schedulable nodes' GPUs of the model's resource.
	GPUSurvey []reconcile.NodeGPUs
	// PlacementSurvey is the nodes' taints and labels, for a pod kept off by them.
	PlacementSurvey []reconcile.NodePlacement
	// GroupFailures are the fresh FailedCreate messages of a multi-node model's StatefulSets.
	GroupFailures map[string]string
	// LastWords are the decisive lines of the crashed runs, by run (container ID).
	LastWords map[string]string
	// Starts are the serving runs' starts, by run (reconcile.StartRun.RunID).
	Starts map[string]*crd.StartRecord
}

// AddTo sets the evidence on obs, the caches' view.
func (e Evidence) AddTo(obs *reconcile.Observed) {
	obs.PodEvents, obs.Workloads, obs.GPUSurvey, obs.GroupFailures, obs.LastWords = e.PodEvents, e.Workloads, e.GPUSurvey, e.GroupFailures, e.LastWords
	obs.Starts, obs.PlacementSurvey = e.Starts, e.PlacementSurvey
}

// Read returns the evidence the diagnosis of in (the caches' view, no adapters) wants, reading
// what is not remembered, and when to look again for evidence no event announces (0: none).
// Each kind sees the ones read before it, in the order the diagnosis builds on them; the GPU
// survey and the last words are asked without Ext and Features, as sync always asked them.
func (r *Reader) Read(ctx context.Context, key queue.Key, in reconcile.Input) (Evidence, time.Duration) {
	isvc, obs, now := in.ISVC, in.Observed, in.Now
	var lookAgain time.Duration
	obs.PodEvents, lookAgain = r.podEvents(ctx, key, reconcile.Input{ISVC: isvc, Observed: obs, Now: now, Features: in.Features})
	obs.Workloads = r.queuePositions(isvc, in.Features, obs.Workloads, now.Time)
	obs.GPUSurvey = r.gpuSurvey(ctx, reconcile.Input{ISVC: isvc, Observed: obs, Now: now})
	obs.PlacementSurvey = r.placementSurvey(ctx, reconcile.Input{ISVC: isvc, Observed: obs, Now: now})
	obs.GroupFailures = r.groupFailures(ctx, key, reconcile.Input{ISVC: isvc, Ext: in.Ext, Observed: obs, Now: now, Features: in.Features})
	obs.LastWords = r.lastWords(ctx, key, reconcile.LastWordsWanted(reconcile.Input{ISVC: isvc, Observed: obs, Now: now}))
	starts := r.starts(ctx, key, reconcile.StartsWanted(reconcile.Input{ISVC: isvc, Observed: obs, Now: now}), now.Time)
	return Evidence{PodEvents: obs.PodEvents, Workloads: obs.Workloads, GPUSurvey: obs.GPUSurvey, PlacementSurvey: obs.PlacementSurvey,
		GroupFailures: obs.GroupFailures, LastWords: obs.LastWords, Starts: starts}, lookAgain
}

// Forget drops what is remembered for a deleted model. The GPU survey is the cluster's and
// a queue's positions its own; both expire by themselves.
func (r *Reader) Forget(key queue.Key) {
	r.events.forget(key)
	r.words.forget(key)
	r.groups.forget(key)
	r.startReads.forget(key)
}
