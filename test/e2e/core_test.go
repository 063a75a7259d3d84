package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

const fiveLines = `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: qwen3}
spec: {model: Qwen/Qwen3-0.6B, replicas: 3, gpusPerReplica: 1}
`

// statusLog records every status the isvc goes through, from a watch.
type statusLog struct {
	mu      sync.Mutex
	seen    []string // "phase/readyReplicas"
	reasons []string // "phase/reason"
}

func watchStatuses(t *testing.T, ns string) *statusLog {
	w, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	l := &statusLog{}
	go func() {
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
			l.mu.Lock()
			l.seen = append(l.seen, fmt.Sprintf("%s/%d", phase, ready))
			l.reasons = append(l.reasons, phase+"/"+reason)
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *statusLog) index(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, v := range l.seen {
		if v == s {
			return i
		}
	}
	return -1
}

func deployment(t *testing.T, ns, name string) (*appsv1.Deployment, error) {
	return env.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// TestSeedRun is the source document's run, step for step, against the real API server.
func TestSeedRun(t *testing.T) {
	ns := env.Namespace(t)
	statuses := watchStatuses(t, ns)

	// 1. The five-line isvc: Deployment, Service and HPA are created; status Progressing/0.
	applyYAML(t, ns, fiveLines)
	isvc, err := env.ISVC(ns, "qwen3")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "children", func() error {
		d, err := deployment(t, ns, "qwen3")
		if err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers[0]
		if *d.Spec.Replicas != 3 || c.Image != "vllm/vllm-openai:v0.11.0" || c.Resources.Limits.Name("nvidia.com/gpu", "").Value() != 1 {
			return fmt.Errorf("deployment %d %s %v", *d.Spec.Replicas, c.Image, c.Resources.Limits)
		}
		if ref := metav1.GetControllerOf(d); ref == nil || ref.UID != isvc.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			return fmt.Errorf("deployment controller ref %+v", ref)
		}
		s, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "qwen3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Spec.Ports[0].Port != 8000 || s.Spec.Selector["ai.example.com/inferenceservice"] != "qwen3" {
			return fmt.Errorf("service %+v", s.Spec)
		}
		h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "qwen3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *h.Spec.MinReplicas != 1 || h.Spec.MaxReplicas != 9 || h.Spec.Metrics[0].Pods.Metric.Name != "num_requests_waiting" {
			return fmt.Errorf("hpa %d..%d", *h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		return nil
	})

	// 2. Once pods are ready: Ready with 3, after having been Progressing with 0.
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/qwen3", testenv.Timeout(time.Minute))
	env.WaitPhase(t, ns, "qwen3", crd.PhaseReady, time.Minute)
	testenv.Eventually(t, time.Minute, "the status history", func() error {
		p, r := statuses.index("Progressing/0"), statuses.index("Ready/3")
		if p < 0 || r < 0 || p > r {
			return fmt.Errorf("statuses seen: %v", statuses.seen)
		}
		return nil
	})

	// ... and no further writes across several resync periods while reconciles still run: the
	// window lasts three periods and at least until three reconciles ran (an event), since a
	// loaded machine may run none in a span of wall clock.
	before := writesSettle(t)
	fams, _ := env.op.Scrape()
	reconcilesBefore := operator.SumCounter(fams, "controller_runtime_reconcile_total", nil)
	hold := time.Now().Add(3 * env.resync)
	testenv.Eventually(t, time.Minute, "three resync periods and reconciles with no write", func() error {
		if w, err := env.op.Writes(); err != nil || w != before {
			t.Fatalf("operator wrote at steady state: %v -> %v (%v)", before, w, err)
		}
		fams, err := env.op.Scrape()
		if err != nil {
			return err
		}
		if n := operator.SumCounter(fams, "controller_runtime_reconcile_total", nil) - reconcilesBefore; n < 3 || time.Now().Before(hold) {
			return fmt.Errorf("%v reconciles so far", n)
		}
		return nil
	})
	t.Logf("steady state: 0 writes over %s and three reconciles or more (%v writes before)", 3*env.resync, before)

	// 3. replicas 3 -> 6: Deployment 6, HPA 3..18 with the raise held as its minimum (6) until
	// the new pods have served, then Ready with 6.
	env.Kubectl(t, "patch", "-n", ns, "isvc/qwen3", "--type=merge", "-p", `{"spec":{"replicas":6}}`)
	testenv.Eventually(t, 30*time.Second, "deployment and hpa updated", func() error {
		d, err := deployment(t, ns, "qwen3")
		if err != nil {
			return err
		}
		h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "qwen3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 6 || *h.Spec.MinReplicas != 6 || h.Spec.MaxReplicas != 18 {
			return fmt.Errorf("deployment %d, hpa %d..%d", *d.Spec.Replicas, *h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		return nil
	})
	testenv.Eventually(t, 60*time.Second, "Ready with 6", func() error {
		i, err := env.ISVC(ns, "qwen3")
		if err != nil {
			return err
		}
		if i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 6 || i.Status.ObservedGeneration != i.Generation {
			return fmt.Errorf("status %+v", i.Status)
		}
		return nil
	})

	// 4. Someone deletes the Service: it comes back.
	old, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "qwen3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "delete", "-n", ns, "svc/qwen3")
	testenv.Eventually(t, time.Minute, "service recreated", func() error {
		s, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "qwen3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.UID == old.UID {
			return fmt.Errorf("still the old service")
		}
		return nil
	})

	events := env.Kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=InferenceService,involvedObject.name=qwen3")
	for _, want := range []string{"Created Deployment qwen3", "Created Service qwen3", "Created HorizontalPodAutoscaler qwen3", "Updated Deployment qwen3"} {
		if !strings.Contains(events, want) {
			t.Errorf("no event %q in:\n%s", want, events)
		}
	}
}

// TestKubectlExperience: columns, wait, explain and scale.
func TestKubectlExperience(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	applyYAML(t, ns, fiveLines)
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/qwen3", testenv.Timeout(time.Minute))

	out := env.Kubectl(t, "get", "isvc", "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME MODEL REPLICAS READY PHASE REASON AGE" {
		t.Fatalf("columns: %q", lines[0])
	}
	if got := strings.Fields(lines[1]); len(got) < 6 || got[1] != "Qwen/Qwen3-0.6B" || got[2] != "3" || got[3] != "3" || got[4] != "Ready" {
		t.Fatalf("row: %q", lines[1])
	}

	explain := env.Kubectl(t, "explain", "isvc.spec.replicas")
	if !strings.Contains(explain, "Desired model server pods") {
		t.Fatalf("explain: %s", explain)
	}
	for _, field := range []string{"model", "gpusPerReplica", "image"} {
		if out := env.Kubectl(t, "explain", "isvc.spec."+field); !strings.Contains(out, "DESCRIPTION") || len(out) < 80 {
			t.Errorf("explain %s: %s", field, out)
		}
	}

	env.Kubectl(t, "scale", "-n", ns, "isvc/qwen3", "--replicas=2")
	testenv.Eventually(t, 30*time.Second, "scaled to 2", func() error {
		d, err := deployment(t, ns, "qwen3")
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 2 {
			return fmt.Errorf("deployment replicas %d", *d.Spec.Replicas)
		}
		return nil
	})
	scale := env.Kubectl(t, "get", "-n", ns, "isvc/qwen3", "--subresource=scale", "-o", "jsonpath={.spec.replicas} {.status.selector}")
	if scale != "2 ai.example.com/inferenceservice=qwen3" {
		t.Fatalf("scale subresource: %q", scale)
	}
}

// TestValidationAtTheAPIServer: schema bounds and CEL rules refuse bad objects with clear
// messages, through kubectl edit and plain creates.
func TestValidationAtTheAPIServer(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	applyYAML(t, ns, fiveLines)

	out, err := kubectlErr(t, []string{"EDITOR=sed -i -e s/^\\ \\ replicas:\\ 3$/\\ \\ replicas:\\ -1/"}, "edit", "-n", ns, "isvc/qwen3")
	if err == nil || !strings.Contains(out, `inferenceservices.ai.example.com "qwen3" is invalid`) {
		t.Fatalf("edit to replicas -1 was not refused: %v\n%s", err, out)
	}
	// kubectl keeps the refused copy with the server's full message at its top, for the user.
	m := regexp.MustCompile(`stored to "([^"]+)"`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no stored copy in %s", out)
	}
	copyText, err := os.ReadFile(m[1])
	if err != nil || !strings.Contains(string(copyText), "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0") {
		t.Fatalf("the refused edit does not carry the server's message: %v\n%s", err, copyText)
	}
	i, err := env.ISVC(ns, "qwen3")
	if err != nil || i.Spec.Replicas != 3 {
		t.Fatalf("refused edit changed the object: %v %+v", err, i)
	}
	// A valid edit saves.
	if out, err := kubectlErr(t, []string{"EDITOR=sed -i -e s/^\\ \\ replicas:\\ 3$/\\ \\ replicas:\\ 4/"}, "edit", "-n", ns, "isvc/qwen3"); err != nil {
		t.Fatalf("valid edit: %v\n%s", err, out)
	}
	if i, _ := env.ISVC(ns, "qwen3"); i.Spec.Replicas != 4 {
		t.Fatalf("edit did not save: %+v", i.Spec)
	}

	cases := []struct {
		name string
		spec map[string]any
		want string
	}{
		{strings.Repeat("a", 51), map[string]any{"model": "m", "replicas": 1}, crd.RuleNameMessage},
		{"model-flag", map[string]any{"model": "--trust-remote-code", "replicas": 1}, crd.RuleModelMessage},
		{"too-many-gpus", map[string]any{"model": "m", "replicas": 1, "gpusPerReplica": 17}, "spec.gpusPerReplica: Invalid value: 17: spec.gpusPerReplica in body should be less than or equal to 16"},
		{"no-model", map[string]any{"replicas": 1}, `spec.model: Required value`},
		{"huge-replicas", map[string]any{"model": "m", "replicas": 100000}, "spec.replicas in body should be less than or equal to 1000"},
		{"string-replicas", map[string]any{"model": "m", "replicas": "three"}, `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer`},
		{"spaced-model", map[string]any{"model": "a b", "replicas": 1}, `spec.model in body should match`},
	}
	for _, c := range cases {
		_, err := env.CreateISVC(context.Background(), ns, c.name, c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want refusal containing %q, got %v", c.name, c.want, err)
		}
	}
}

// TestDeletionDeregistersThenCascades: the finalizer deregisters the route once, holds the
// object while the gateway is down, and the garbage collector removes the children.
func TestDeletionDeregistersThenCascades(t *testing.T) {
	ns := env.Namespace(t)
	applyYAML(t, ns, fiveLines)
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/qwen3", testenv.Timeout(time.Minute))
	key := ns + "/qwen3"
	testenv.Eventually(t, time.Minute, "route registered", func() error {
		if !env.gateway.registered(key) {
			return fmt.Errorf("not registered")
		}
		return nil
	})
	i, _ := env.ISVC(ns, "qwen3")
	if len(i.Finalizers) != 1 {
		t.Fatalf("finalizers %v", i.Finalizers)
	}

	env.gateway.setDown(true)
	env.Kubectl(t, "delete", "-n", ns, "isvc/qwen3", "--wait=false")
	testenv.Eventually(t, time.Minute, "Terminating with the gateway's error", func() error {
		i, err := env.ISVC(ns, "qwen3")
		if err != nil {
			return err
		}
		if i.DeletionTimestamp == nil || i.Status.Phase != crd.PhaseTerminating || i.Status.Reason != "GatewayUnavailable" {
			return fmt.Errorf("status %+v", i.Status)
		}
		return nil
	})
	// It stays while the gateway is down: several retries later it is still there.
	fams, _ := env.op.Scrape()
	retries := operator.SumCounter(fams, "workqueue_retries_total", nil)
	testenv.Eventually(t, 30*time.Second, "retries while the gateway is down", func() error {
		fams, _ := env.op.Scrape()
		if r := operator.SumCounter(fams, "workqueue_retries_total", nil); r < retries+3 {
			return fmt.Errorf("%v retries", r-retries)
		}
		return nil
	})
	if _, err := env.ISVC(ns, "qwen3"); err != nil {
		t.Fatalf("the isvc went while the gateway was down: %v", err)
	}
	if !env.gateway.registered(key) {
		t.Fatal("route vanished while the gateway was down")
	}

	env.gateway.setDown(false)
	testenv.Eventually(t, 30*time.Second, "isvc gone", func() error {
		if _, err := env.ISVC(ns, "qwen3"); !isNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	if env.gateway.registered(key) || env.gateway.count("DELETE "+key) != 1 {
		t.Fatalf("deregistered %d times; still registered: %v", env.gateway.count("DELETE "+key), env.gateway.registered(key))
	}
	testenv.Eventually(t, 30*time.Second, "children garbage-collected", func() error {
		if _, err := deployment(t, ns, "qwen3"); !isNotFound(err) {
			return fmt.Errorf("deployment: %v", err)
		}
		if _, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "qwen3", metav1.GetOptions{}); !isNotFound(err) {
			return fmt.Errorf("service: %v", err)
		}
		if _, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "qwen3", metav1.GetOptions{}); !isNotFound(err) {
			return fmt.Errorf("hpa: %v", err)
		}
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left (%v)", len(pods.Items), err)
		}
		return nil
	})
}

// TestNeverTouchesAForeignChild: a same-named Deployment the isvc does not own is reported,
// never modified, and survives the isvc's deletion.
func TestNeverTouchesAForeignChild(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	created := createForeignDeployment(t, ns, "qwen3", 1)
	applyYAML(t, ns, fiveLines)
	i := env.WaitPhase(t, ns, "qwen3", crd.PhaseFailed, 30*time.Second)
	if i.Status.Reason != "ChildConflict" {
		t.Fatalf("reason %q", i.Status.Reason)
	}
	testenv.Eventually(t, time.Minute, "a ChildConflict warning event", func() error {
		ev := env.Kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=InferenceService,reason=ChildConflict", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(ev, "Deployment "+ns+"/qwen3 already exists and is not owned by this InferenceService") {
			return fmt.Errorf("events: %q", ev)
		}
		return nil
	})
	env.Kubectl(t, "delete", "-n", ns, "isvc/qwen3")
	d, err := deployment(t, ns, "qwen3")
	if err != nil {
		t.Fatalf("the foreign deployment was deleted: %v", err)
	}
	if d.ResourceVersion != created.ResourceVersion && d.Generation != created.Generation {
		t.Fatalf("the foreign deployment's spec was modified: generation %d -> %d", created.Generation, d.Generation)
	}
	if d.Spec.Template.Spec.Containers[0].Image != "nginx" || len(d.OwnerReferences) != 0 {
		t.Fatalf("the foreign deployment was modified: %+v", d.Spec.Template.Spec.Containers[0])
	}
}

// TestRestoresTamperedChildren: owned fields edited by hand come back, once.
func TestRestoresTamperedChildren(t *testing.T) {
	ns := env.Namespace(t)
	applyYAML(t, ns, fiveLines)
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/qwen3", testenv.Timeout(time.Minute))
	// What others add (a mesh's sidecar, env) is not the operator's: the caches drop it and
	// the restore, a patch, must leave it.
	env.Kubectl(t, "patch", "-n", ns, "deploy/qwen3", "--type=strategic", "-p",
		`{"spec":{"template":{"spec":{"containers":[{"name":"proxy","image":"envoy"},{"name":"vllm","env":[{"name":"HF_HOME","value":"/cache"}]}]}}}}`)
	env.Kubectl(t, "set", "image", "-n", ns, "deploy/qwen3", "vllm=evil/miner:latest")
	env.Kubectl(t, "patch", "-n", ns, "svc/qwen3", "--type=json", "-p", `[{"op":"replace","path":"/spec/ports/0/port","value":9000}]`)
	testenv.Eventually(t, time.Minute, "owned fields restored", func() error {
		d, err := deployment(t, ns, "qwen3")
		if err != nil {
			return err
		}
		s, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "qwen3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cs := d.Spec.Template.Spec.Containers
		i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == "vllm" })
		if i < 0 || cs[i].Image != crd.DefaultImage || s.Spec.Ports[0].Port != 8000 {
			return fmt.Errorf("containers %v port %d", cs, s.Spec.Ports[0].Port)
		}
		if len(cs) != 2 || len(cs[i].Env) != 1 || s.Spec.ClusterIP == "" {
			return fmt.Errorf("the restore dropped what others own: containers %+v, cluster IP %q", cs, s.Spec.ClusterIP)
		}
		return nil
	})
	env.WaitPhase(t, ns, "qwen3", crd.PhaseReady, 60*time.Second)
	// Restored once, then quiet: no fight with the deployment controller.
	writesSettle(t)
}
