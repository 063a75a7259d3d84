// The watcher: from the bench's own watches, when each isvc and its Deployment appeared and which are Ready.

package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// watcher records, from watches, when each isvc appeared, when its Deployment appeared, and
// which isvcs are Ready; children are keyed by their model's name (sys.model).
type watcher struct {
	n        int
	sys      system
	mu       sync.Mutex
	isvcAt   map[string]time.Time
	deployAt map[string]time.Time
	svc, hpa map[string]bool
	ready    map[string]bool
	obsGen   map[string]int64 // status.observedGeneration
	// statuses is each isvc's distinct statuses in the order seen (phase/reason and its
	// conditions): what the status writes on the way to Ready were.
	statuses map[string][]string
	// When each Deployment first counted all its replicas ready, and each isvc first said
	// Ready: the operator's own part of the time to Ready is the gap.
	deployReadyAt, isvcReadyAt map[string]time.Time
}

func newWatcher(n int, sys system) *watcher {
	return &watcher{n: n, sys: sys, isvcAt: map[string]time.Time{}, deployAt: map[string]time.Time{}, svc: map[string]bool{}, hpa: map[string]bool{}, ready: map[string]bool{}, obsGen: map[string]int64{}, statuses: map[string][]string{}, deployReadyAt: map[string]time.Time{}, isvcReadyAt: map[string]time.Time{}}
}

func (w *watcher) start(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, ns string) (func(), error) {
	var ws []watch.Interface
	add := func(wi watch.Interface, err error, f func(watch.Event)) error {
		if err != nil {
			return err
		}
		ws = append(ws, wi)
		go func() {
			for ev := range wi.ResultChan() {
				f(ev)
			}
		}()
		return nil
	}
	opts := metav1.ListOptions{}
	wi, err := dyn.Resource(w.sys.resource).Namespace(ns).Watch(ctx, opts)
	if err := add(wi, err, func(ev watch.Event) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return
		}
		ready, gen := w.sys.ready(u)
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, seen := w.isvcAt[u.GetName()]; !seen && ev.Type == watch.Added {
			w.isvcAt[u.GetName()] = time.Now()
		}
		w.ready[u.GetName()] = ready
		if _, seen := w.isvcReadyAt[u.GetName()]; ready && !seen {
			w.isvcReadyAt[u.GetName()] = time.Now()
		}
		w.obsGen[u.GetName()] = gen
		if sig := statusSignature(u); sig != "" {
			if seq := w.statuses[u.GetName()]; len(seq) == 0 || seq[len(seq)-1] != sig {
				w.statuses[u.GetName()] = append(seq, sig)
			}
		}
	}); err != nil {
		return nil, err
	}
	dw, err := kube.AppsV1().Deployments(ns).Watch(ctx, opts)
	if err := add(dw, err, func(ev watch.Event) {
		d, ok := ev.Object.(*appsv1.Deployment)
		if !ok || w.sys.model(d.Name) == "" {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		m := w.sys.model(d.Name)
		if _, seen := w.deployReadyAt[m]; !seen && d.Spec.Replicas != nil && *d.Spec.Replicas > 0 && d.Status.ReadyReplicas >= *d.Spec.Replicas {
			w.deployReadyAt[m] = time.Now()
		}
		if ev.Type != watch.Added {
			return
		}
		w.deployAt[m] = time.Now()
	}); err != nil {
		return nil, err
	}
	sw, err := kube.CoreV1().Services(ns).Watch(ctx, opts)
	if err := add(sw, err, func(ev watch.Event) {
		if s, ok := ev.Object.(*corev1.Service); ok && ev.Type == watch.Added && w.sys.model(s.Name) != "" {
			w.mu.Lock()
			w.svc[w.sys.model(s.Name)] = true
			w.mu.Unlock()
		}
	}); err != nil {
		return nil, err
	}
	hw, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Watch(ctx, opts)
	if err := add(hw, err, func(ev watch.Event) {
		if h, ok := ev.Object.(*autoscalingv2.HorizontalPodAutoscaler); ok && ev.Type == watch.Added && w.sys.model(h.Name) != "" {
			w.mu.Lock()
			w.hpa[w.sys.model(h.Name)] = true
			w.mu.Unlock()
		}
	}); err != nil {
		return nil, err
	}
	return func() {
		for _, wi := range ws {
			wi.Stop()
		}
	}, nil
}

func (w *watcher) poll(ctx context.Context, timeout time.Duration, what string, done func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		ok, state := done()
		w.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: timed out (%s)", what, state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // poll interval
		}
	}
}

func (w *watcher) waitChildren(ctx context.Context, timeout time.Duration) error {
	return w.poll(ctx, timeout, "children", func() (bool, string) {
		return len(w.deployAt) >= w.n && len(w.svc) >= w.n && len(w.hpa) >= w.n,
			fmt.Sprintf("%d deployments, %d services, %d hpas", len(w.deployAt), len(w.svc), len(w.hpa))
	})
}

func (w *watcher) waitReady(ctx context.Context, timeout time.Duration) error {
	return w.poll(ctx, timeout, "ready", func() (bool, string) {
		n := 0
		for _, r := range w.ready {
			if r {
				n++
			}
		}
		return n >= w.n, fmt.Sprintf("%d/%d ready", n, w.n)
	})
}

// waitReadyAt waits until each named isvc is Ready with status for at least its generation.
func (w *watcher) waitReadyAt(ctx context.Context, gens map[string]int64, timeout time.Duration) error {
	return w.poll(ctx, timeout, "ready at the new generation", func() (bool, string) {
		n := 0
		for name, g := range gens {
			if w.ready[name] && w.obsGen[name] >= g {
				n++
			}
		}
		return n == len(gens), fmt.Sprintf("%d/%d", n, len(gens))
	})
}

func (w *watcher) waitModel(ctx context.Context, kube kubernetes.Interface, model string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l, err := kube.AppsV1().Deployments("bench").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, d := range l.Items {
			// Status counts describe the spec only once the deployment controller observed it.
			if a := d.Spec.Template.Spec.Containers[0].Args; len(a) > 0 && a[0] == model && d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == 1 && d.Status.ReadyReplicas == 1 && d.Status.Replicas == 1 {
				n++
			}
		}
		if n == w.n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("spec change: %d/%d rolled out", n, w.n)
		}
		time.Sleep(250 * time.Millisecond) // poll interval
	}
}

func (w *watcher) latencies() (p50, p99 float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p50, p99, _ = quantiles(gapsMs(w.isvcAt, w.deployAt))
	return p50, p99
}

// gapsMs are, for each name in both, the milliseconds from from[name] to to[name].
func gapsMs(from, to map[string]time.Time) []float64 {
	var ds []float64
	for name, at := range from {
		if d, ok := to[name]; ok {
			ds = append(ds, float64(d.Sub(at).Microseconds())/1000)
		}
	}
	return ds
}

// quantiles are the p50, p99 and largest of ds (sorted in place); zeros when it is empty.
func quantiles(ds []float64) (p50, p99, max float64) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	sort.Float64s(ds)
	q := func(p float64) float64 { return ds[min(len(ds)-1, int(math.Ceil(p*float64(len(ds))))-1)] }
	return q(0.5), q(0.99), ds[len(ds)-1]
}

// readyLag is the p50, p99 and largest gap, in ms, between a Deployment counting all its
// replicas ready and its isvc saying Ready, as this watcher saw both.
func (w *watcher) readyLag() (p50, p99, max float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return quantiles(gapsMs(w.deployReadyAt, w.isvcReadyAt))
}

// statusSignature is an isvc's status in a few words: phase/reason, then each condition's
// type=status/reason; "" before the first status.
func statusSignature(u *unstructured.Unstructured) string {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	if phase == "" {
		return ""
	}
	reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
	parts := []string{phase + "/" + reason}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("%v=%v/%v", m["type"], m["status"], m["reason"]))
	}
	return strings.Join(parts, " ")
}

// statusSequences counts the isvcs by the sequence of statuses they went through, most
// common first, at most top of them.
func (w *watcher) statusSequences(top int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	count := map[string]int{}
	for _, seq := range w.statuses {
		count[strings.Join(seq, "\n      -> ")]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if count[keys[i]] != count[keys[j]] {
			return count[keys[i]] > count[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var out []string
	for _, k := range keys[:min(top, len(keys))] {
		out = append(out, fmt.Sprintf("%d isvcs: %s", count[k], k))
	}
	return out
}
