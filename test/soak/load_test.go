package soak

// Load on one model, so its HPA moves on the queue the metrics adapter serves: a bounded set of
// clients send completions to its ready pods (by pod IP, as the Service would) through the
// chaos, and the Deployment's largest count is recorded.

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/testenv"
)

const (
	loadClients = 12 // with two sequences a pod, ten wait on one pod: the HPA's target is 5
	// loadMaxSent bounds the requests of a run (a request takes about a second).
	loadMaxSent = 200_000
)

// createBusy makes the loaded model: one replica (the HPA's bounds 1..3), two sequences a
// pod so a dozen clients fill its queue.
func (s *soakRun) createBusy(ctx context.Context) error {
	if err := s.world.create(ctx, s.busy); err != nil {
		return err
	}
	ann, _ := json.Marshal(map[string]any{"engineArgs": []string{"--max-num-seqs", "2"}})
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{crd.AnnotationV1beta1Spec: string(ann)}}})
	return retry(ctx, 2*time.Minute, func() error {
		_, err := env.Dyn.Resource(crd.Resource).Namespace(s.busy.ns).Patch(ctx, s.busy.name, types.MergePatchType, b, metav1.PatchOptions{})
		return err
	})
}

// loadFigures are what the load did.
type loadFigures struct {
	sent, failed int64
	peak         int32     // the busy Deployment's largest count seen
	errors       []string  // the first few distinct failures
	failures     []failure // every failure, for the accounting by fault (bounded by loadMaxSent)
}

// runLoad sends completions to the busy model's ready pods until ctx ends, and samples its
// Deployment's count every few seconds.
func (s *soakRun) runLoad(ctx context.Context) *loadFigures {
	f := &loadFigures{}
	var peak atomic.Int32
	var ips atomic.Pointer[[]string]
	ips.Store(&[]string{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the ready pods and the Deployment's count, every two seconds
		defer wg.Done()
		for ctx.Err() == nil {
			if pods, err := env.Kube.CoreV1().Pods(s.busy.ns).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + s.busy.name}); err == nil {
				var list []string
				for _, p := range pods.Items {
					if p.Status.PodIP != "" && p.DeletionTimestamp == nil && ready(&p) {
						list = append(list, p.Status.PodIP)
					}
				}
				ips.Store(&list)
			}
			if d, err := env.Kube.AppsV1().Deployments(s.busy.ns).Get(ctx, s.busy.name, metav1.GetOptions{}); err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas > peak.Load() {
				peak.Store(*d.Spec.Replicas)
				s.journal.logf("load: the HPA moved %s to %d replicas", s.busy.key(), *d.Spec.Replicas)
			}
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	var errMu sync.Mutex
	seen := map[string]bool{}
	var failures []failure
	load := testenv.StartLoad(ctx, testenv.LoadOptions{
		Clients: loadClients,
		Body:    `{"model":"m","prompt":"Kubernetes operators are","max_tokens":48}`,
		MaxSent: loadMaxSent,
		Timeout: 30 * time.Second,
		IPs:     func() []string { return *ips.Load() },
		// A pod going away mid-request (a scale-down, a roll) is the usual cause.
		OnFailure: func(err error, others int) {
			errMu.Lock()
			failures = append(failures, failure{at: time.Now(), msg: err.Error(), others: others})
			if msg := err.Error(); !seen[msg] && len(f.errors) < 5 {
				seen[msg] = true
				f.errors = append(f.errors, msg)
			}
			errMu.Unlock()
			select { // a failing pod is not asked again at once
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		},
	})
	go func() {
		wg.Wait()
		load.Wait()
		f.sent, f.failed = load.Counts()
		f.peak = peak.Load()
		errMu.Lock()
		f.failures = failures
		errMu.Unlock()
		close(s.loadDone)
	}()
	return f
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
