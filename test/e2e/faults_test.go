package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// Sizes: CI runs these bounded; FAULTS_N=500 FAULTS_KILLS=10 STORM_SECONDS=60 is the full run.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// scheduleImage is no vLLM image: the fake kubelet runs its containers on the schedule model
// (ready on the probes' timing, no server), so the fault tests' many GPU-less models load the
// control plane only. Serving is proven where it is the subject (core, template, adapters).
const scheduleImage = "registry.example.com/model-server:v1"

func smallISVC(name string, replicas int) map[string]any {
	return map[string]any{
		"model": "m", "replicas": int64(replicas), "gpusPerReplica": int64(0), "image": scheduleImage,
		"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}},
	}
}

// restartOperator replaces a killed operator with a fresh one.
func restartOperator(t *testing.T) {
	t.Helper()
	if err := startOperator(testenv.Ctx(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
}

// checkConverged asserts every isvc in ns is Ready for its generation, holds the finalizer,
// and has exactly its three (or two, at zero replicas) children, each controlled by it.
func checkConverged(t *testing.T, ns string, names []string, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, "every isvc Ready for its generation", func() error {
		l, err := env.Dyn.Resource(crd.Resource).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		notReady := 0
		for i := range l.Items {
			isvc, err := crd.FromUnstructured(&l.Items[i])
			if err != nil {
				return err
			}
			if isvc.Status.Phase != crd.PhaseReady || isvc.Status.ObservedGeneration != isvc.Generation || len(isvc.Finalizers) != 1 {
				notReady++
			}
		}
		if len(l.Items) != len(names) || notReady > 0 {
			return fmt.Errorf("%d isvcs, %d not Ready/current/finalized", len(l.Items), notReady)
		}
		return nil
	})
	uids := map[string]types.UID{}
	l, err := env.Dyn.Resource(crd.Resource).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range l.Items {
		uids[u.GetName()] = u.GetUID()
	}
	owned := func(kind string, objs []metav1.Object) {
		if len(objs) > len(names) {
			t.Errorf("%d %ss for %d isvcs: duplicates or orphans", len(objs), kind, len(names))
		}
		for _, o := range objs {
			ref := metav1.GetControllerOf(o)
			if ref == nil || ref.UID != uids[o.GetName()] {
				t.Errorf("%s %s is not controlled by its isvc: %+v", kind, o.GetName(), ref)
			}
		}
	}
	deps, err := env.Kube.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcs, _ := env.Kube.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	hpas, _ := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(context.Background(), metav1.ListOptions{})
	var d, s, h []metav1.Object
	for i := range deps.Items {
		d = append(d, &deps.Items[i])
	}
	for i := range svcs.Items {
		s = append(s, &svcs.Items[i])
	}
	for i := range hpas.Items {
		h = append(h, &hpas.Items[i])
	}
	if len(d) != len(names) || len(s) != len(names) {
		t.Errorf("%d deployments and %d services for %d isvcs", len(d), len(s), len(names))
	}
	owned("Deployment", d)
	owned("Service", s)
	owned("HorizontalPodAutoscaler", h)
	for _, n := range names {
		if !env.gateway.registered(ns + "/" + n) {
			t.Errorf("route %s/%s not registered", ns, n)
		}
	}
}

// TestCrashConsistency: kill -9 the operator at seeded random moments while isvcs converge;
// at the end every isvc has exactly its children, a correct status and its finalizer.
func TestCrashConsistency(t *testing.T) {
	n, kills, seed := envInt("FAULTS_N", 60), envInt("FAULTS_KILLS", 5), envInt("FAULTS_SEED", 7)
	ns := env.Namespace(t)
	rng := rand.New(rand.NewSource(int64(seed)))
	names := make([]string, n)
	created := make(chan error, 1)
	go func() {
		var err error
		for i := range names {
			names[i] = fmt.Sprintf("m-%04d", i)
			replicas := 1
			if i >= 100 {
				replicas = 0 // past 100 the fake nodes' pod capacity, not the operator, would be measured
			}
			if _, e := env.CreateISVC(context.Background(), ns, names[i], smallISVC(names[i], replicas)); e != nil && err == nil {
				err = e
			}
		}
		created <- err
	}()
	start := time.Now()
	for k := 0; k < kills; k++ {
		wait := time.Duration(rng.Intn(1500)) * time.Millisecond
		time.Sleep(wait) // the seeded random moment of the kill, not a wait for state
		env.op.Kill()
		t.Logf("kill %d at %.1fs", k+1, time.Since(start).Seconds())
		restartOperator(t)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	lastKill := time.Now()
	checkConverged(t, ns, names, 5*time.Minute)
	t.Logf("%d isvcs, %d kills (seed %d): converged %.1fs after the last restart", n, kills, seed, time.Since(lastKill).Seconds())
}

// TestAPIServerRestart: the API server restarts under the operator, which re-lists, re-watches
// and converges without a restart of its own, a crash or a hot loop.
func TestAPIServerRestart(t *testing.T) {
	ns := env.Namespace(t)
	var names []string
	for i := 0; i < 5; i++ {
		names = append(names, fmt.Sprintf("before-%d", i))
		if _, err := env.CreateISVC(context.Background(), ns, names[i], smallISVC(names[i], 1)); err != nil {
			t.Fatal(err)
		}
	}
	checkConverged(t, ns, names, 2*time.Minute)
	restart := time.Now()
	if err := env.Cluster.Restart(testenv.Ctx(t, 3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server back after %.1fs", time.Since(restart).Seconds())
	select {
	case <-env.op.Exited():
		t.Fatal("the operator exited when the API server restarted")
	default:
	}
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("after-%d", i)
		names = append(names, name)
		testenv.Eventually(t, time.Minute, "create after restart", func() error {
			_, err := env.CreateISVC(context.Background(), ns, name, smallISVC(name, 1))
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}
	env.Kubectl(t, "patch", "-n", ns, "isvc/before-0", "--type=merge", "-p", `{"spec":{"replicas":2}}`)
	checkConverged(t, ns, names, 3*time.Minute)
	t.Logf("converged %.1fs after the restart began", time.Since(restart).Seconds())

	// No hot loop: once converged, reconciles come only from resyncs.
	quiesce(t)
	fams, _ := env.op.Scrape()
	before := operator.SumCounter(fams, "controller_runtime_reconcile_total", nil)
	window := 2 * env.resync
	time.Sleep(window) // a fixed measurement window, not a wait for state
	fams, _ = env.op.Scrape()
	rate := (operator.SumCounter(fams, "controller_runtime_reconcile_total", nil) - before) / window.Seconds()
	t.Logf("reconciles after convergence: %.1f/s (resync every %s)", rate, env.resync)
	if rate > 50 {
		t.Fatalf("hot loop: %.0f reconciles/s with nothing changing", rate)
	}
}

// TestConflictStorm: writers race on one isvc's labels and spec while the operator writes its
// status; no user update is lost, the status ends right, and the operator's calls stay bounded.
func TestConflictStorm(t *testing.T) {
	quiesce(t)
	ns := env.Namespace(t)
	if _, err := env.CreateISVC(context.Background(), ns, "storm", smallISVC("storm", 1)); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "storm", crd.PhaseReady, time.Minute)
	dur := time.Duration(envInt("STORM_SECONDS", 10)) * time.Second
	opBefore, _ := env.op.Writes()
	fams, _ := env.op.Scrape()
	retriesBefore := operator.SumCounter(fams, "inferenceservice_operator_conflict_retries_total", nil)
	cl := env.Dyn.Resource(crd.Resource).Namespace(ns)
	storm := testenv.ConflictStorm(context.Background(), cl, "storm", 4, time.Now().Add(dur))
	userWrites, userConflicts, lastReplicas := storm.Writes, storm.Conflicts, storm.LastReplicas
	if lastReplicas < 0 {
		lastReplicas = 1 // as created
	}
	u, err := cl.Get(context.Background(), "storm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := storm.Lost(u); err != nil {
		t.Error(err)
	}
	testenv.Eventually(t, time.Minute, "status right for the final spec", func() error {
		i, err := env.ISVC(ns, "storm")
		if err != nil {
			return err
		}
		if i.Status.ObservedGeneration != i.Generation || i.Status.Phase != crd.PhaseReady || int64(i.Status.ReadyReplicas) < lastReplicas {
			return fmt.Errorf("status %+v for generation %d", i.Status, i.Generation)
		}
		return nil
	})
	opAfter, _ := env.op.Writes()
	fams, _ = env.op.Scrape()
	retries := operator.SumCounter(fams, "inferenceservice_operator_conflict_retries_total", nil) - retriesBefore
	opRate := (opAfter - opBefore) / dur.Seconds()
	t.Logf("%s storm: %d user writes, %d user conflicts; operator: %.0f writes (%.1f/s), %.0f conflict retries",
		dur, userWrites, userConflicts, opAfter-opBefore, opRate, retries)
	// Bounded by what the users did, not by the clock: on a loaded machine the same storm takes
	// more turns. A user's spec write costs the operator a Deployment, an HPA, a PDB and a
	// status write at most; a label write, nothing. A retry loop writes without bound.
	if bound := 5*float64(userWrites) + 50; opAfter-opBefore > bound {
		t.Fatalf("retry storm: the operator wrote %.0f times (%.1f/s) for %d user writes (bound %.0f)", opAfter-opBefore, opRate, userWrites, bound)
	}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestInvalidStoredObject: an object stored before a rule existed is reported as InvalidSpec,
// gets no children, and the operator keeps serving the others.
func TestInvalidStoredObject(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testenv.Ctx(t, 2*time.Minute)
	crds := env.Dyn.Resource(crdGVR)
	orig, err := crds.Get(ctx, "inferenceservices.ai.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An older CRD without the model rule.
	relaxed := orig.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(relaxed.Object, "spec", "versions")
	v0 := versions[0].(map[string]any)
	unstructured.RemoveNestedField(v0, "schema", "openAPIV3Schema", "properties", "spec", "properties", "model", "x-kubernetes-validations")
	versions[0] = v0
	_ = unstructured.SetNestedSlice(relaxed.Object, versions, "spec", "versions")
	if _, err := crds.Update(ctx, relaxed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Kubectl(t, "apply", "-k", env.Root+"/manifests/crd") })
	testenv.Eventually(t, 30*time.Second, "the relaxed CRD to accept the legacy object", func() error {
		_, err := env.CreateISVC(context.Background(), ns, "legacy", map[string]any{"model": "--trust-remote-code", "replicas": int64(1)})
		return err
	})
	env.Kubectl(t, "apply", "-k", env.Root+"/manifests/crd")
	testenv.Eventually(t, 30*time.Second, "the strict CRD back", func() error {
		_, err := env.CreateISVC(context.Background(), ns, "probe", map[string]any{"model": "--x", "replicas": int64(1)})
		if err == nil || !strings.Contains(err.Error(), crd.RuleModelMessage) {
			return fmt.Errorf("still relaxed: %v", err)
		}
		return nil
	})
	// Any change makes the operator look at it again; an annotation is enough.
	env.Kubectl(t, "annotate", "-n", ns, "isvc/legacy", "touched=1")
	i := waitReason(t, ns, "legacy", "InvalidSpec", 30*time.Second)
	if i.Status.Phase != crd.PhaseFailed || !strings.Contains(readyMessage(i), "spec.model must not start with '-'") {
		t.Fatalf("status %+v", i.Status)
	}
	if _, err := deployment(t, ns, "legacy"); !isNotFound(err) {
		t.Fatalf("children were created for an invalid object: %v", err)
	}
	// About legacy only: the probe above may have been stored too, while the API server
	// still served the relaxed schema, and it is reported the same way.
	testenv.Eventually(t, time.Minute, "one InvalidSpec warning event for legacy", func() error {
		evs, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, e := range evs.Items {
			if e.Regarding.Kind == crd.Kind && e.Regarding.Name == "legacy" && e.Reason == "InvalidSpec" && e.Type == corev1.EventTypeWarning {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d events", n)
		}
		return nil
	})
	// v1beta1 fields kept in an annotation on a v1alpha1 object are free text to the API
	// server: written by hand and wrong, they are the operator's to refuse.
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: handwritten
  annotations:
    ai.example.com/v1beta1-spec: '{"adapters":[{"name":"a","storageURI":"hf://x"},{"name":"a","storageURI":"hf://y"}]}'
spec: {model: m, replicas: 1}
`)
	h := waitReason(t, ns, "handwritten", "InvalidSpec", 30*time.Second)
	if !strings.Contains(readyMessage(h), crd.RuleAdapterNamesUniqueMsg) {
		t.Fatalf("handwritten annotation: %+v", h.Status)
	}
	if _, err := deployment(t, ns, "handwritten"); !isNotFound(err) {
		t.Fatalf("children were created for an invalid annotation: %v", err)
	}
	if _, err := env.CreateISVC(context.Background(), ns, "fine", smallISVC("fine", 1)); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "fine", crd.PhaseReady, time.Minute)
}

// TestFinalizerFaults: the gateway errors, then is slow, and the operator is killed meanwhile;
// the isvc waits, backs off, and its route is removed exactly once when the gateway recovers.
func TestFinalizerFaults(t *testing.T) {
	ns := env.Namespace(t)
	if _, err := env.CreateISVC(context.Background(), ns, "fin", smallISVC("fin", 1)); err != nil {
		t.Fatal(err)
	}
	env.WaitPhase(t, ns, "fin", crd.PhaseReady, time.Minute)
	key := ns + "/fin"
	testenv.Eventually(t, time.Minute, "route registered", func() error {
		if !env.gateway.registered(key) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	env.gateway.setFailure(500, 0)
	t.Cleanup(func() { env.gateway.setFailure(0, 0) })
	env.Kubectl(t, "delete", "-n", ns, "isvc/fin", "--wait=false")
	waitReason(t, ns, "fin", "GatewayUnavailable", time.Minute)

	env.op.Kill()
	restartOperator(t)
	failed := env.gateway.count("FAILED DELETE " + key)
	testenv.Eventually(t, 30*time.Second, "retries after the restart", func() error {
		if n := env.gateway.count("FAILED DELETE " + key); n < failed+2 {
			return fmt.Errorf("%d failed deletes", n)
		}
		return nil
	})
	if _, err := env.ISVC(ns, "fin"); err != nil {
		t.Fatalf("the isvc went while the gateway failed: %v", err)
	}

	env.gateway.setFailure(0, 2*time.Second) // recovered, but slow
	testenv.Eventually(t, time.Minute, "isvc gone", func() error {
		if _, err := env.ISVC(ns, "fin"); !isNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	if n := env.gateway.removals(key); n != 1 || env.gateway.registered(key) {
		t.Fatalf("route removed %d times (registered: %v)", n, env.gateway.registered(key))
	}
	t.Logf("%d failed deregistrations across an operator kill, then removed exactly once", env.gateway.count("FAILED DELETE "+key))
}
