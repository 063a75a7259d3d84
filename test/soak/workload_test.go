package soak

// The workload: seeded user actions at a bounded rate, and the workload's own model of what
// should exist, against which the invariants are checked.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// maxReplicas bounds every model's replicas (the cluster is sized for it).
const maxReplicas = 2

// namespaces the models are spread over; one of them is deleted and made again now and then.
const namespaces = 4

// images are two of the fake kubelet's serving images: every pod runs the fake vLLM server (no
// GPU needed for kubelet.fake/ images), so the metrics adapter reads each model's queue and
// every HPA has its metric, as in a cluster of real model servers; an image edit rolls pods.
var images = [2]string{"kubelet.fake/ready:v1", "kubelet.fake/ready:v2"}

func nsName(i int) string { return fmt.Sprintf("soak-%d", i) }

// model is what the workload believes one isvc's spec is.
type model struct {
	ns, name string
	replicas int64
	image    int
	gpus     int64 // per replica: one model in gpuEvery holds a GPU, for the GPU fault
}

// gpuEvery: one model in this many holds a GPU per replica, so a node's GPU fault kills its
// servers there (the fake kubelet's fault spares containers without GPUs).
const gpuEvery = 10

func (m *model) key() string { return m.ns + "/" + m.name }

func (m *model) spec() map[string]any {
	return map[string]any{
		"model": "m", "replicas": m.replicas, "gpusPerReplica": m.gpus, "image": images[m.image],
		"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}},
	}
}

// world is the workload's model: every isvc that should exist, with its spec.
type world struct {
	mu     sync.Mutex
	models map[string]*model // key ns/name
	all    []*model          // every name the workload may use, existing or not
	act    *activity         // when each action ran, on what
}

func newWorld(n int) *world {
	w := &world{models: map[string]*model{}, act: &activity{}}
	for i := 0; i < n; i++ {
		m := &model{ns: nsName(i % namespaces), name: fmt.Sprintf("m-%04d", i), replicas: 1}
		if i%gpuEvery == 0 {
			m.gpus = 1
		}
		w.all = append(w.all, m)
	}
	return w
}

// expected returns a copy of the models that should exist, sorted by key.
func (w *world) expected() []model {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]model, 0, len(w.models))
	for _, m := range w.models {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// retry runs op until it succeeds or timeout passes (the API server may be restarting).
func retry(ctx context.Context, timeout time.Duration, op func() error) error {
	deadline := time.Now().Add(testenv.Scaled(timeout))
	for {
		err := op()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(250 * time.Millisecond) // poll interval
	}
}

// create creates m (AlreadyExists counts: a retried create whose first answer was lost).
func (w *world) create(ctx context.Context, m *model) error {
	err := retry(ctx, 2*time.Minute, func() error {
		_, err := env.CreateISVC(ctx, m.ns, m.name, m.spec())
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err == nil {
		w.mu.Lock()
		w.models[m.key()] = m
		w.mu.Unlock()
	}
	return err
}

// patchSpec merge-patches m's spec.
func patchSpec(ctx context.Context, m *model, spec map[string]any) error {
	b, _ := json.Marshal(map[string]any{"spec": spec})
	return retry(ctx, 2*time.Minute, func() error {
		_, err := env.Dyn.Resource(crd.Resource).Namespace(m.ns).Patch(ctx, m.name, types.MergePatchType, b, metav1.PatchOptions{})
		return err
	})
}

// waitGone polls until the isvc is gone (its deletion finished).
func waitGone(ctx context.Context, m *model) error {
	return retry(ctx, 3*time.Minute, func() error {
		_, err := env.Dyn.Resource(crd.Resource).Namespace(m.ns).Get(ctx, m.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("%s still there", m.key())
		}
		return err
	})
}

// action is one user action on the world; it returns what it did, for the log.
type action struct {
	name   string
	weight int
	do     func(ctx context.Context, w *world, rng *rand.Rand) (string, error)
}

// pick returns a model that exists (ok false when none does).
func (w *world) pick(rng *rand.Rand, exists bool) (*model, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var c []*model
	for _, m := range w.all {
		if _, ok := w.models[m.key()]; ok == exists {
			c = append(c, m)
		}
	}
	if len(c) == 0 {
		return nil, false
	}
	return c[rng.IntN(len(c))], true
}

// set records a spec change of an existing model.
func (w *world) set(m *model, f func(*model)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(m)
}

var actions = []action{
	{"create", 3, func(ctx context.Context, w *world, rng *rand.Rand) (string, error) {
		m, ok := w.pick(rng, false)
		if !ok {
			return "", nil
		}
		defer w.act.begin(m.key(), "create")()
		w.set(m, func(m *model) { m.replicas, m.image = int64(rng.IntN(maxReplicas+1)), rng.IntN(2) })
		return fmt.Sprintf("create %s replicas=%d", m.key(), m.replicas), w.create(ctx, m)
	}},
	{"replicas", 4, func(ctx context.Context, w *world, rng *rand.Rand) (string, error) {
		m, ok := w.pick(rng, true)
		if !ok {
			return "", nil
		}
		defer w.act.begin(m.key(), "replicas")()
		r := int64(rng.IntN(maxReplicas + 1))
		err := patchSpec(ctx, m, map[string]any{"replicas": r})
		if err == nil {
			w.set(m, func(m *model) { m.replicas = r })
		}
		return fmt.Sprintf("patch %s replicas=%d", m.key(), r), err
	}},
	{"image", 2, func(ctx context.Context, w *world, rng *rand.Rand) (string, error) {
		m, ok := w.pick(rng, true)
		if !ok {
			return "", nil
		}
		defer w.act.begin(m.key(), "image")()
		img := 1 - m.image
		err := patchSpec(ctx, m, map[string]any{"image": images[img]})
		if err == nil {
			w.set(m, func(m *model) { m.image = img })
		}
		return fmt.Sprintf("patch %s image=%s", m.key(), images[img]), err
	}},
	{"engineArgs", 2, func(ctx context.Context, w *world, rng *rand.Rand) (string, error) {
		m, ok := w.pick(rng, true)
		if !ok {
			return "", nil
		}
		defer w.act.begin(m.key(), "engineArgs")()
		// The v1beta1 fields a v1alpha1 object carries, in the annotation the conversion keeps.
		v := strconv.Itoa(1024 * (1 + rng.IntN(8)))
		ann, _ := json.Marshal(map[string]any{"engineArgs": []string{"--max-model-len", v}})
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{crd.AnnotationV1beta1Spec: string(ann)}}})
		err := retry(ctx, 2*time.Minute, func() error {
			_, err := env.Dyn.Resource(crd.Resource).Namespace(m.ns).Patch(ctx, m.name, types.MergePatchType, b, metav1.PatchOptions{})
			return err
		})
		return fmt.Sprintf("annotate %s engineArgs --max-model-len %s", m.key(), v), err
	}},
	{"scale", 2, func(ctx context.Context, w *world, rng *rand.Rand) (string, error) {
		m, ok := w.pick(rng, true)
		if !ok {
			return "", nil
		}
		defer w.act.begin(m.key(), "scale")()
		r := int64(rng.IntN(maxReplicas + 1))
		err := retry(ctx, 2*time.Minute, func() error {
			_, _, err := env.Cluster.Kubectl(ctx, "scale", "-n", m.ns, "isvc/"+m.name, "--replicas="+strconv.FormatInt(r, 10))
			return err
		})
		if err == nil {
			w.set(m, func(m *model) { m.replicas = r })
		}
		return fmt.Sprintf("kubectl scale %s --replicas=%d", m.key(), r), err
	}},
	{"recreate", 1, func(ctx context.Context, w *world, rng *rand.Rand) (string, error) {
		m, ok := w.pick(rng, true)
		if !ok {
			return "", nil
		}
		what := "delete and recreate " + m.key()
		defer w.act.begin(m.key(), "recreate")()
		w.mu.Lock()
		delete(w.models, m.key())
		w.mu.Unlock()
		if err := retry(ctx, 2*time.Minute, func() error {
			err := env.Dyn.Resource(crd.Resource).Namespace(m.ns).Delete(ctx, m.name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}); err != nil {
			return what, err
		}
		if err := waitGone(ctx, m); err != nil {
			return what, err
		}
		return what, w.create(ctx, m)
	}},
	{"namespace", 1, func(ctx context.Context, w *world, rng *rand.Rand) (string, error) {
		ns := nsName(rng.IntN(namespaces))
		what := "delete and remake namespace " + ns
		defer w.act.begin(ns+"/*", "namespace")()
		w.mu.Lock()
		var gone []*model
		for _, m := range w.all {
			if _, ok := w.models[m.key()]; ok && m.ns == ns {
				gone = append(gone, m)
				delete(w.models, m.key())
			}
		}
		w.mu.Unlock()
		if err := retry(ctx, 2*time.Minute, func() error {
			err := env.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}); err != nil {
			return what, err
		}
		if err := retry(ctx, 5*time.Minute, func() error {
			_, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil {
				return fmt.Errorf("namespace %s terminating", ns)
			}
			return err
		}); err != nil {
			return what, err
		}
		if err := makeNamespace(ctx, ns); err != nil {
			return what, err
		}
		for _, m := range gone {
			if err := w.create(ctx, m); err != nil {
				return what, err
			}
		}
		return fmt.Sprintf("%s (%d models recreated)", what, len(gone)), nil
	}},
}

// makeNamespace creates ns (AlreadyExists counts).
func makeNamespace(ctx context.Context, ns string) error {
	return retry(ctx, 2*time.Minute, func() error {
		_, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// chooseAction draws an action by weight.
func chooseAction(rng *rand.Rand) action {
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	n := rng.IntN(total)
	for _, a := range actions {
		if n < a.weight {
			return a
		}
		n -= a.weight
	}
	return actions[0]
}
