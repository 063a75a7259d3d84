// Runtime LoRA adapters, the I/O on both sides of the decision: before Reconcile, each pod whose
// server is ready (ContainersReady: the adapters gate holds Ready) of a model with adapters is
// observed: asked what it serves (GET /v1/models, vLLM), or, for a server whose /v1/models lists
// no adapter (SGLang v0.5.3), read from the remembered answers of its loads and unloads; after
// it, the load and unload calls Reconcile planned are made, each failure remembered for the next
// observation and its retry spaced out, and the pods not known yet are learnt by loading.

package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/modelserver"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

// ModelServers is what the controller asks of a model server by its pod's IP, through the
// adapter endpoints of the model's engine (api); modelserver.Client implements it, with its own
// per-call timeouts. A load's or unload's loaded set is the server's answer where it lists one.
type ModelServers interface {
	Models(ctx context.Context, ip string) ([]modelserver.Model, error)
	LoadAdapter(ctx context.Context, api engine.AdapterAPI, ip, name, path string) (loaded map[string]string, err error)
	UnloadAdapter(ctx context.Context, api engine.AdapterAPI, ip, name string) (loaded map[string]string, err error)
}

// adapterAPI is the adapter endpoints of the engine ext names (Validate has refused an engine
// no package registers; it would read as vLLM).
func adapterAPI(ext *crd.SpecExtensions) engine.AdapterAPI {
	e := engine.For(ext.EngineName())
	if e == nil {
		e = engine.For(engine.VLLM)
	}
	return e.Server().Adapters
}

const (
	// adapterConcurrency bounds the calls to one model's pods in flight at once.
	adapterConcurrency = 8
	// observeBudget bounds a sync's observation of all its pods; a pod not answered by then
	// is reported as not asked.
	observeBudget = 5 * time.Second
	// stepBudget bounds a sync's load and unload calls; steps not started by then wait for the
	// next observation.
	stepBudget = 90 * time.Second
	// attemptBase and attemptMax space out the attempts of one step on one pod: a load that
	// fails, or that succeeds and does not show on /v1/models, is retried after 2 s, 4 s, ...
	// up to 5 m.
	attemptBase = 2 * time.Second
	attemptMax  = 5 * time.Minute
	// maxAttempts bounds the remembered attempts of all models together.
	maxAttempts = 10000
)

// observeAdapters asks each server-ready pod of isvc what it serves, only for a model whose spec
// has adapters or whose status lists some (or with attempts still remembered): other models
// cost nothing. Nil means not observed. Only a pod of the model's own Deployment, by the
// controller references the caches hold, is dialled, at its status.podIP.
func (c *Controller) observeAdapters(ctx context.Context, key queue.Key, isvc *crd.InferenceService, ext *crd.SpecExtensions, stored *crd.StatusExtensions, obs reconcile.Observed) []reconcile.PodAdapters {
	if c.modelServers == nil || len(ext.Adapters) == 0 && len(stored.LoadedAdapters) == 0 && !c.memory.attempts().has(key) {
		c.memory.servedSets().observe(key, nil)
		return nil
	}
	pods := servingPods(isvc, obs)
	var out []reconcile.PodAdapters
	if adapterAPI(ext).Listed {
		out = c.listedAdapters(ctx, pods)
	} else {
		out = c.answeredAdapters(key, pods)
	}
	c.memory.attempts().settle(key, out)
	for i := range out {
		out[i].Failed = c.memory.attempts().failed(key, out[i].Pod)
	}
	return out
}

// listedAdapters asks each pod's server what it serves (GET /v1/models: vLLM lists every
// loaded adapter there).
func (c *Controller) listedAdapters(ctx context.Context, pods []*corev1.Pod) []reconcile.PodAdapters {
	out := make([]reconcile.PodAdapters, len(pods))
	ctx, cancel := context.WithTimeout(ctx, observeBudget)
	defer cancel()
	sem := make(chan struct{}, adapterConcurrency)
	var wg sync.WaitGroup
	for i, p := range pods {
		out[i] = reconcile.PodAdapters{Pod: p.Name, IP: p.Status.PodIP}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				out[i].Err = ctx.Err().Error()
				return
			}
			models, err := c.modelServers.Models(ctx, out[i].IP)
			if err != nil {
				out[i].Err = err.Error()
				return
			}
			for _, m := range models {
				if m.Adapter() {
					out[i].Loaded = append(out[i].Loaded, reconcile.LoadedAdapter{Name: m.ID, Path: m.Root})
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// notKnown is the observation of a pod whose server lists no adapter on /v1/models (SGLang
// v0.5.3) and whose container this operator process has had no answer from yet.
const notKnown = "what its server has loaded is not known yet: its /v1/models lists no adapter and this operator process has had no load or unload answer from this container; the wanted adapters are loaded again there and the answer's list taken"

// answeredAdapters is the observation of pods whose server lists no adapter on /v1/models
// (SGLang v0.5.3): for each pod, what the last answer of its current container to a load or an
// unload listed (LoRAUpdateOutput's loaded_adapters: every adapter loaded after the call), as
// the controller's memory holds it. A container started again has loaded nothing: the operator
// passes no --lora-paths. What cannot be seen: an adapter loaded or unloaded by another client
// than this operator (their answers are theirs), until the next answer to one of ours lists
// it; and anything at all in a container this process has had no answer from (after an
// operator restart or failover its memory is empty, and a pod new to it is alike): such a pod
// is reported not asked (notKnown), so it claims nothing, gets no planned steps and keeps its
// gate, and learnAdapters loads the wanted adapters there again (SGLang's refusal of a name it
// has counts as loaded, engine.AdapterAPI.LoadPresent), taking the answer's list as the truth:
// the next observation plans the unloads of what is listed and not wanted.
func (c *Controller) answeredAdapters(key queue.Key, pods []*corev1.Pod) []reconcile.PodAdapters {
	instances := make(map[string]string, len(pods))
	for _, p := range pods {
		instances[p.Name] = podInstance(p)
	}
	known := c.memory.servedSets().observe(key, instances)
	out := make([]reconcile.PodAdapters, len(pods))
	for i, p := range pods {
		out[i] = reconcile.PodAdapters{Pod: p.Name, IP: p.Status.PodIP}
		loaded, ok := known[p.Name]
		if !ok {
			out[i].Err = notKnown
			continue
		}
		for name, path := range loaded {
			out[i].Loaded = append(out[i].Loaded, reconcile.LoadedAdapter{Name: name, Path: path})
		}
		sort.Slice(out[i].Loaded, func(a, b int) bool { return out[i].Loaded[a].Name < out[i].Loaded[b].Name })
	}
	return out
}

// podInstance names one start of a pod's server container: the pod's UID and the container's
// restart count (the cache keeps no container ID).
func podInstance(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == kinds.ContainerName {
			return string(p.UID) + "/" + strconv.Itoa(int(cs.RestartCount))
		}
	}
	return string(p.UID) + "/"
}

// learnAdapters makes, on each pod observed notKnown, the calls whose answers say what its
// server has loaded: a load of each wanted adapter (a name loaded already is answered as such,
// with the list), or, when none is wanted, an unload of each the status still lists. Each call
// is an attempt of its step, spaced out as the planned ones are. It returns how many calls it
// made and how many failed.
func (c *Controller) learnAdapters(ctx context.Context, key queue.Key, api engine.AdapterAPI, ext *crd.SpecExtensions, stored *crd.StatusExtensions, observed []reconcile.PodAdapters) (made, failed int) {
	if c.modelServers == nil || api.Listed {
		return 0, 0
	}
	var steps []reconcile.AdapterStep
	for _, a := range ext.Adapters {
		if path, err := reconcile.AdapterPath(a.StorageURI); err == nil {
			steps = append(steps, reconcile.AdapterStep{Load: true, Name: a.Name, Path: path})
		}
	}
	if len(ext.Adapters) == 0 {
		for _, name := range stored.LoadedAdapters {
			steps = append(steps, reconcile.AdapterStep{Name: name})
		}
	}
	now := c.now()
	ctx, cancel := context.WithTimeout(ctx, stepBudget)
	defer cancel()
	sem := make(chan struct{}, adapterConcurrency)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range observed {
		if p.Err != notKnown {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for _, s := range steps {
				s.Pod, s.IP = p.Pod, p.IP
				if ctx.Err() != nil || c.memory.attempts().due(key, s, now) > 0 {
					continue
				}
				loaded, err := c.call(ctx, api, s)
				c.memory.attempts().record(key, s, now, err)
				c.memory.servedSets().answer(key, s, loaded, err)
				mu.Lock()
				made++
				if err != nil {
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return made, failed
}

// call makes step s on its pod: the load or the unload, with the server's answer.
func (c *Controller) call(ctx context.Context, api engine.AdapterAPI, s reconcile.AdapterStep) (map[string]string, error) {
	if s.Load {
		return c.modelServers.LoadAdapter(ctx, api, s.IP, s.Name, s.Path)
	}
	return c.modelServers.UnloadAdapter(ctx, api, s.IP, s.Name)
}

// servingPods are the running pods of isvc's own Deployment whose server is ready and that have
// an IP, by name; for a multi-node model, its LeaderWorkerSet's leaders (the workers serve no
// API). Server-ready, not Ready: the adapters gate holds Ready until they are loaded.
func servingPods(isvc *crd.InferenceService, obs reconcile.Observed) []*corev1.Pod {
	if l := obs.LeaderWorkerSet; l != nil && reconcile.ControlledBy(l, isvc) {
		var pods []*corev1.Pod
		for _, p := range obs.Pods {
			if p.Labels[kinds.LWSNameLabel] != l.GetName() || p.Labels[kinds.LWSWorkerLabel] != "0" ||
				p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || !reconcile.ServerReady(p) {
				continue
			}
			pods = append(pods, p)
		}
		sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
		return pods
	}
	d := obs.Deployment
	if d == nil || !reconcile.ControlledBy(d, isvc) {
		return nil
	}
	ours := map[string]bool{} // ReplicaSet UIDs of the Deployment
	for _, rs := range obs.ReplicaSets {
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == d.UID {
			ours[string(rs.UID)] = true
		}
	}
	pods := ownPods(obs.Pods, ours, isvc.Name)
	// A canary rollout's pods load the model's adapters as the stable's do (canary.go).
	if cd := obs.CanaryDeployment; cd != nil && reconcile.ControlledBy(cd, isvc) {
		canary := map[string]bool{}
		for _, rs := range obs.CanaryReplicaSets {
			if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == cd.UID {
				canary[string(rs.UID)] = true
			}
		}
		pods = append(pods, ownPods(obs.CanaryPods, canary, reconcile.CanaryInstance(isvc.Name))...)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods
}

// ownPods are the server-ready running pods with an IP of the ReplicaSets ours, labelled instance.
func ownPods(all []*corev1.Pod, ours map[string]bool, instance string) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, p := range all {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil || ref.Kind != "ReplicaSet" || !ours[string(ref.UID)] || p.Labels[kinds.InstanceLabel] != instance ||
			p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || !reconcile.ServerReady(p) {
			continue
		}
		pods = append(pods, p)
	}
	return pods
}

// applyAdapterSteps makes the calls Reconcile planned, on pods that answered this sync's
// observation at the IP they answered on. It returns how many calls it made, how many of them
// failed and, when steps wait for their attempt's back-off, how long until the first is due.
func (c *Controller) applyAdapterSteps(ctx context.Context, key queue.Key, api engine.AdapterAPI, observed []reconcile.PodAdapters, steps []reconcile.AdapterStep) (made, failed int, wait time.Duration) {
	if len(steps) == 0 || c.modelServers == nil {
		return 0, 0, 0
	}
	answered := make(map[string]string, len(observed))
	for _, p := range observed {
		if p.Err == "" {
			answered[p.Pod] = p.IP
		}
	}
	now := c.now()
	var due []reconcile.AdapterStep
	for _, s := range steps {
		if ip, ok := answered[s.Pod]; !ok || ip != s.IP {
			continue
		}
		if left := c.memory.attempts().due(key, s, now); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		due = append(due, s)
	}
	ctx, cancel := context.WithTimeout(ctx, stepBudget)
	defer cancel()
	sem := make(chan struct{}, adapterConcurrency)
	var mu sync.Mutex
	// Unloads first: an adapter reloaded from another path is unloaded before its load.
	for _, load := range []bool{false, true} {
		var wg sync.WaitGroup
		for _, s := range due {
			if s.Load != load {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break // the rest waits for the next observation
			}
			made++
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				loaded, err := c.call(ctx, api, s)
				c.memory.attempts().record(key, s, now, err)
				c.memory.servedSets().answer(key, s, loaded, err)
				if err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	return made, failed, wait
}

// applyAdapterGates writes each pod's adapters gate condition with a strategic merge patch of
// pods/status, conditions merging by type: the kubelet's own conditions are left as they are.
// It returns how many it wrote; a pod gone meanwhile is no error.
func (c *Controller) applyAdapterGates(ctx context.Context, gates []reconcile.PodGate, now metav1.Time) (int, error) {
	var errs []error
	written := 0
	for _, g := range gates {
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: kinds.AdaptersGate, Status: g.Status, Reason: g.Reason, LastTransitionTime: now,
		}}}})
		if err != nil {
			return written, err
		}
		_, err = c.kube.CoreV1().Pods(g.Namespace).Patch(ctx, g.Pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}, "status")
		switch {
		case err == nil:
			written++
		case !apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("pod %s/%s: adapters gate: %w", g.Namespace, g.Pod, err))
		}
	}
	return written, errors.Join(errs...)
}
