// A canary rollout's reads beyond the caches: the canary's children and pods from the caches,
// and each step's metrics window from the stable's and the canary's own /metrics, with the
// snapshots at the step's start kept in the controller's memory (canaries). After an operator
// restart the memory is empty: the current step's window starts again from new snapshots, and
// status.rollout (stored) keeps the step.

package controller

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/controller/rollout"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

// PodMetrics reads a model server's /metrics page by its pod's IP; modelserver.Client
// implements it. Without it (a ModelServers that does not), no step is judged.
type PodMetrics interface {
	MetricsPage(ctx context.Context, ip string) ([]byte, error)
}

// canaryWindow is one step's start: the revision and step it is of, when it began, and both
// sides' snapshots then.
type canaryWindow struct {
	revision       string
	step           int32
	start          time.Time
	stable, canary rollout.Snapshot
}

// canaries is the view of the controller's memory that keeps each key's step start.
type canaries memory

func (m *memory) canaries() *canaries { return (*canaries)(m) }

// window returns k's window for (revision, step), made from now's snapshots when there is none.
func (cs *canaries) window(k queue.Key, revision string, step int32, now time.Time, stable, canary rollout.Snapshot) *canaryWindow {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	r := (*memory)(cs).entry(k)
	if w := r.canary; w != nil && w.revision == revision && w.step == step {
		return w
	}
	r.canary = &canaryWindow{revision: revision, step: step, start: now, stable: stable, canary: canary}
	return r.canary
}

// drop forgets k's window: no step is running.
func (cs *canaries) drop(k queue.Key) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if r := (*memory)(cs).lookup(k); r != nil && r.canary != nil {
		r.canary = nil
		(*memory)(cs).tidy(k)
	}
}

// observeCanary reads the canary's children and pods from the caches and, while a step sends
// it requests, the step's metrics window.
func (c *Controller) observeCanary(ctx context.Context, p *pass) error {
	obs, isvc := &p.in.Observed, p.isvc
	ns, name := isvc.Namespace, isvc.Name
	obs.StoredRollout = p.storedExt.Rollout
	if own, ok := c.memory.echoes().rollout(p.key, isvc, c.now()); ok {
		obs.StoredRollout = own // the cache is behind this replica's last write
	}
	var ok bool
	var err error
	if obs.CanaryDeployment, ok, err = c.caches.Deployment(ns, reconcile.CanaryName(name)); err != nil {
		return err
	} else if !ok || !reconcile.IsCanary(obs.CanaryDeployment) {
		obs.CanaryDeployment = nil
	}
	if obs.CanaryService, ok, err = c.caches.Service(ns, reconcile.CanaryName(name)); err != nil {
		return err
	} else if !ok || !reconcile.IsCanary(obs.CanaryService) {
		obs.CanaryService = nil
	}
	if obs.CanaryPods, err = c.caches.Pods(ns, reconcile.CanaryInstance(name)); err != nil {
		return err
	}
	if obs.CanaryReplicaSets, err = c.caches.ReplicaSets(ns, reconcile.CanaryInstance(name)); err != nil {
		return err
	}
	st := obs.StoredRollout
	if !p.in.Ext.Rollout.IsCanary() || st == nil || st.Phase != crd.RolloutProgressing || st.Weight == 0 {
		c.memory.canaries().drop(p.key)
		return nil
	}
	ttft := "vllm:time_to_first_token_seconds"
	if e := engine.For(p.in.Ext.EngineName()); e != nil {
		ttft = e.Metrics().TTFT
	}
	if c.rolloutProm != nil {
		c.observeCanaryProm(ctx, p, st, ttft)
		return nil
	}
	reader, ok := c.modelServers.(PodMetrics)
	if !ok {
		return nil
	}
	stable := c.snapshot(ctx, reader, obs.Pods, ttft)
	canary := c.snapshot(ctx, reader, obs.CanaryPods, ttft)
	if len(canary) == 0 {
		return nil // no canary pod answered: nothing to judge on, and no window to start
	}
	now := c.now()
	w := c.memory.canaries().window(p.key, st.CanaryRevision, st.Step, now, stable, canary)
	p.in.RolloutWindow = &rollout.Window{Start: w.start, Stable: stable.Since(w.stable), Canary: canary.Since(w.canary)}
	return nil
}

// observeCanaryProm reads the step's window from Prometheus (canaryprom.go). The step starts
// at its first read, or at the stored status' stepStartedAt when this replica has none in
// memory (after a restart: Prometheus kept the series, so the step goes on where it was).
func (c *Controller) observeCanaryProm(ctx context.Context, p *pass, st *crd.RolloutStatus, ttft string) {
	now := c.now()
	w := c.memory.canaries().window(p.key, st.CanaryRevision, st.Step, promStepStart(st, now), nil, nil)
	ctx, cancel := context.WithTimeout(ctx, observeBudget)
	defer cancel()
	p.in.RolloutWindow, p.in.RolloutWaiting = promWindow(ctx, c.rolloutProm, p.isvc.Namespace, p.isvc.Name, ttft, w.start, now)
}

// promStepStart is when a step read from Prometheus started, for a replica with none in
// memory: the stored stepStartedAt (written from the first read's window), or now.
func promStepStart(st *crd.RolloutStatus, now time.Time) time.Time {
	if t, err := time.Parse(time.RFC3339, st.StepStartedAt); err == nil && !t.After(now) {
		return t
	}
	return now
}

// snapshot reads the ready pods' pages at once, bounded by observeBudget; a pod that does not
// answer is left out (its requests count again from its next answer).
func (c *Controller) snapshot(ctx context.Context, reader PodMetrics, pods []*corev1.Pod, ttft string) rollout.Snapshot {
	ctx, cancel := context.WithTimeout(ctx, observeBudget)
	defer cancel()
	out := rollout.Snapshot{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, adapterConcurrency)
	for _, p := range pods {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil || !podReady(p) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return
			}
			page, err := reader.MetricsPage(ctx, p.Status.PodIP)
			if err != nil {
				return
			}
			s, err := ParsePage(page, ttft)
			if err != nil {
				return
			}
			mu.Lock()
			out[p.Name] = s
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// eventRollout emits the Event of a change of status.rollout that was written.
func (c *Controller) eventRollout(isvc *crd.InferenceService, stored, next *crd.RolloutStatus) {
	reason, warning, msg, ok := rollout.Transition(stored, next)
	if !ok {
		return
	}
	t := corev1.EventTypeNormal
	if warning {
		t = corev1.EventTypeWarning
	}
	c.recorder.Eventf(isvc, nil, t, reason, "Rollout", "%s", msg)
}
