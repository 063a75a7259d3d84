package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// waitReason waits for the isvc's status.reason and returns it with the Ready message.
func waitReason(t *testing.T, ns, name, reason string, timeout time.Duration) *crd.InferenceService {
	t.Helper()
	var got *crd.InferenceService
	testenv.Eventually(t, timeout, fmt.Sprintf("%s/%s reason %s", ns, name, reason), func() error {
		i, err := env.ISVC(ns, name)
		if err != nil {
			return err
		}
		if i.Status.Reason != reason {
			return fmt.Errorf("phase %q reason %q", i.Status.Phase, i.Status.Reason)
		}
		got = i
		return nil
	})
	return got
}

func readyMessage(i *crd.InferenceService) string {
	for _, c := range i.Status.Conditions {
		if c.Type == crd.ConditionReady {
			return c.Message
		}
	}
	return ""
}

// getColumns returns the REASON column kubectl prints for the isvc.
func getRow(t *testing.T, ns, name string) string {
	out := env.Kubectl(t, "get", "isvc", "-n", ns, name, "--no-headers")
	return strings.Join(strings.Fields(out), " ")
}

func warningEvents(t *testing.T, ns, reason string) (n int, count int32) {
	t.Helper()
	evs, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Regarding.Kind == crd.Kind && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			n++
			count = 1
			if e.Series != nil {
				count = e.Series.Count
			}
		}
	}
	return n, count
}

// TestQuotaExceededThenRaised: the ReplicaSet's quota refusal becomes the isvc's reason with the
// admission message, and raising the quota makes the isvc Ready with no other action.
func TestQuotaExceededThenRaised(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("8")}},
	}
	if _, err := env.Kube.CoreV1().ResourceQuotas(ns).Create(context.Background(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: big}
spec: {model: Qwen/Qwen3-32B, replicas: 3, gpusPerReplica: 4}
`)
	// When does the ReplicaSet report it, and when does the isvc?
	var rsAt time.Time
	testenv.Eventually(t, 60*time.Second, "the ReplicaSet's ReplicaFailure", func() error {
		rss, err := env.Kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, rs := range rss.Items {
			for _, c := range rs.Status.Conditions {
				if c.Type == "ReplicaFailure" && c.Status == corev1.ConditionTrue {
					rsAt = time.Now()
					return nil
				}
			}
		}
		return fmt.Errorf("not yet")
	})
	i := waitReason(t, ns, "big", "QuotaExceeded", 5*time.Second)
	t.Logf("QuotaExceeded on the isvc %.1fs after the ReplicaSet reported it", time.Since(rsAt).Seconds())
	msg := readyMessage(i)
	if i.Status.Phase != crd.PhaseFailed || !strings.Contains(msg, "exceeded quota: team-a, requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8") || !strings.Contains(msg, "ReplicaSet big-") {
		t.Fatalf("phase %s message %q", i.Status.Phase, msg)
	}
	t.Logf("kubectl get isvc: %s", getRow(t, ns, "big"))
	describe := env.Kubectl(t, "describe", "isvc", "-n", ns, "big")
	if !strings.Contains(describe, "QuotaExceeded") || !strings.Contains(describe, "is forbidden: exceeded quota") {
		t.Fatalf("describe does not walk to the ReplicaSet:\n%s", describe)
	}

	env.Kubectl(t, "patch", "resourcequota", "-n", ns, "team-a", "--type=merge", "-p", `{"spec":{"hard":{"requests.nvidia.com/gpu":"12"}}}`)
	raised := time.Now()
	env.WaitPhase(t, ns, "big", crd.PhaseReady, 90*time.Second)
	t.Logf("Ready %.1fs after the quota was raised", time.Since(raised).Seconds())
}

// TestUnschedulableGPUs: more GPUs per replica than any node has.
func TestUnschedulableGPUs(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: huge}
spec: {model: deepseek-ai/DeepSeek-V3, replicas: 1, gpusPerReplica: 16}
`)
	start := time.Now()
	i := waitReason(t, ns, "huge", "InsufficientGPU", 30*time.Second)
	t.Logf("InsufficientGPU %.1fs after create; kubectl get isvc: %s", time.Since(start).Seconds(), getRow(t, ns, "huge"))
	if msg := readyMessage(i); !strings.Contains(msg, "Insufficient nvidia.com/gpu") || !strings.Contains(msg, "nodes are available") {
		t.Fatalf("message %q", msg)
	}
}

// TestPodFailureModes: each way a model server fails, made by the fake kubelet from the image.
func TestPodFailureModes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		image, reason, message string
	}{
		{"kubelet.fake/crashloop:v1", "CrashLoopBackOff", "last terminated: exit code 1 (Error)"},
		{"kubelet.fake/oomkilled:v1", "OOMKilled", "exit code 137 (OOMKilled)"},
		{"kubelet.fake/errimagepull:v1", "ImagePullFailed", `kubelet.fake/errimagepull:v1`},
		{"kubelet.fake/never-ready:v1", "ReadinessProbeFailing", "but not ready: readiness probe on /health port 8000 failing"},
	}
	ns := env.Namespace(t)
	for i, c := range cases {
		name := fmt.Sprintf("mode-%d", i)
		applyYAML(t, ns, fmt.Sprintf(`apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: %s}
spec: {model: m, replicas: 1, gpusPerReplica: 1, image: "%s"}
`, name, c.image))
	}
	for i, c := range cases {
		name := fmt.Sprintf("mode-%d", i)
		start := time.Now()
		got := waitReason(t, ns, name, c.reason, 60*time.Second)
		if msg := readyMessage(got); got.Status.Phase != crd.PhaseFailed || !strings.Contains(msg, c.message) {
			t.Errorf("%s: phase %s message %q, want %q", c.image, got.Status.Phase, msg, c.message)
		}
		t.Logf("%-30s -> %-22s (%.1fs after the previous check) kubectl get isvc: %s", c.image, c.reason, time.Since(start).Seconds(), getRow(t, ns, name))
	}

	// A crash loop that goes on is one Warning Event, not one per restart.
	restarts := func() int32 {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ai.example.com/inferenceservice=mode-0"})
		if err != nil || len(pods.Items) == 0 || len(pods.Items[0].Status.ContainerStatuses) == 0 {
			return 0
		}
		return pods.Items[0].Status.ContainerStatuses[0].RestartCount
	}
	first := restarts()
	testenv.Eventually(t, 90*time.Second, "three more restarts", func() error {
		if r := restarts(); r < first+3 {
			return fmt.Errorf("restarts %d", r)
		}
		return nil
	})
	if n, count := warningEvents(t, ns, "CrashLoopBackOff"); n != 1 || count != 1 {
		t.Fatalf("a crash loop over %d restarts gave %d CrashLoopBackOff warning events (series count %d), want 1", restarts(), n, count)
	}
}

// TestSlowStartIsNotAFailure: weights that take a while to load are Starting, never Failed,
// until the startup probe passes; then Ready. A watch records every status it goes through.
func TestSlowStartIsNotAFailure(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	statuses := watchStatuses(t, ns)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: slow}
spec: {model: m, replicas: 1, gpusPerReplica: 1, image: "kubelet.fake/slow-ready-8:v1"}
`)
	env.WaitPhase(t, ns, "slow", crd.PhaseReady, 90*time.Second)
	statuses.mu.Lock()
	seen := append([]string(nil), statuses.reasons...)
	statuses.mu.Unlock()
	starting := false
	for _, r := range seen {
		if strings.HasPrefix(r, string(crd.PhaseFailed)) {
			t.Fatalf("slow start reported as a failure: %v", seen)
		}
		starting = starting || strings.HasSuffix(r, "/Starting")
	}
	if !starting {
		t.Fatalf("never reported Starting while loading: %v", seen)
	}
	if n, _ := warningEvents(t, ns, "ReadinessProbeFailing"); n != 0 {
		t.Fatal("a slow start raised a readiness warning")
	}
}

// statusRecord is every status an isvc went through, as a watch delivers them.
type statusRecord struct {
	mu   sync.Mutex
	seen []*crd.InferenceService
}

func recordStatuses(t *testing.T, ns string) *statusRecord {
	t.Helper()
	w, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	r := &statusRecord{}
	go func() {
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			if i, err := crd.FromUnstructured(u); err == nil {
				r.mu.Lock()
				r.seen = append(r.seen, i)
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// failed returns the first status of name with reason, else the first Failed one; nil if none.
func (r *statusRecord) failed(name, reason string) *crd.InferenceService {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first *crd.InferenceService
	for _, i := range r.seen {
		switch {
		case i.Name != name:
		case i.Status.Reason == reason:
			return i
		case i.Status.Phase == crd.PhaseFailed && first == nil:
			first = i
		}
	}
	return first
}

func (r *statusRecord) trail(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, i := range r.seen {
		if i.Name == name {
			out = append(out, fmt.Sprintf("%s/%s(%d ready)", i.Status.Phase, i.Status.Reason, i.Status.ReadyReplicas))
		}
	}
	return strings.Join(out, " -> ")
}

// podWindows records, per pod, whether a watch saw it started and not yet ready: the window a
// real kubelet shows between the startup probe passing and the first readiness probe.
func podWindows(t *testing.T, ns string) func() (started, window int) {
	t.Helper()
	w, err := env.Kube.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	startedPods, windows := map[string]bool{}, map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.Started != nil && *c.Started {
					mu.Lock()
					startedPods[p.Name] = true
					windows[p.Name] = windows[p.Name] || !c.Ready
					mu.Unlock()
				}
			}
		}
	}()
	return func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range windows {
			if v {
				n++
			}
		}
		return len(startedPods), n
	}
}

func patchISVC(t *testing.T, ns, name, patch string) {
	t.Helper()
	env.Kubectl(t, "patch", "isvc", "-n", ns, name, "--type=merge", "-p", patch)
}

// TestScaleUpIsNotAReadinessFailure: the fake kubelet sets started when the startup probe
// passes and ready one readiness period later, as a real kubelet does. A start and a scale-up
// go through that window for every pod and must never show Failed/ReadinessProbeFailing nor
// its Warning Event; a pod that never gets ready is still reported, after the probe's window.
func TestScaleUpIsNotAReadinessFailure(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	statuses := recordStatuses(t, ns)
	windows := podWindows(t, ns)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: grow}
spec: {model: m, replicas: 1, gpusPerReplica: 1}
`)
	start := time.Now()
	env.WaitPhase(t, ns, "grow", crd.PhaseReady, 90*time.Second)
	t.Logf("1 replica Ready %.1fs after create", time.Since(start).Seconds())
	patchISVC(t, ns, "grow", `{"spec":{"replicas":3}}`)
	start = time.Now()
	readyReplicas(t, ns, "grow", 3, 90*time.Second)
	t.Logf("scaled 1 -> 3 Ready %.1fs after the patch; statuses: %s", time.Since(start).Seconds(), statuses.trail("grow"))
	started, window := windows()
	if started < 3 || window < 3 {
		t.Fatalf("the kubelet showed started-but-not-ready on %d of %d started pods: the test cannot see the window", window, started)
	}
	if f := statuses.failed("grow", "ReadinessProbeFailing"); f != nil {
		t.Fatalf("a healthy start was reported %s/%s: %s (statuses: %s)", f.Status.Phase, f.Status.Reason, readyMessage(f), statuses.trail("grow"))
	}
	if n, _ := warningEvents(t, ns, "ReadinessProbeFailing"); n != 0 {
		t.Fatalf("a healthy scale-up raised %d ReadinessProbeFailing Warning Events", n)
	}

	// A server that never gets ready is reported once its readiness window has passed.
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: stuck}
spec: {model: m, replicas: 1, gpusPerReplica: 1, image: "kubelet.fake/never-ready:v1"}
`)
	start = time.Now()
	got := waitReason(t, ns, "stuck", "ReadinessProbeFailing", 90*time.Second)
	if got.Status.Phase != crd.PhaseFailed || !strings.Contains(readyMessage(got), "readiness probe on /health port 8000 failing") {
		t.Fatalf("phase %s message %q", got.Status.Phase, readyMessage(got))
	}
	t.Logf("never-ready reported ReadinessProbeFailing %.1fs after create (statuses: %s)", time.Since(start).Seconds(), statuses.trail("stuck"))
	testenv.Eventually(t, 30*time.Second, "one ReadinessProbeFailing Warning Event", func() error {
		if n, _ := warningEvents(t, ns, "ReadinessProbeFailing"); n != 1 {
			return fmt.Errorf("%d events", n)
		}
		return nil
	})
}

// TestEvictedPodDoesNotDecide: a pod the node evicted stays Failed (until the pod garbage
// collector's threshold) after its ReplicaSet replaced it. Neither the replacement's start nor
// a later scale-up may report the model Failed/Evicted because of it.
func TestEvictedPodDoesNotDecide(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	statuses := recordStatuses(t, ns)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: evict}
spec: {model: m, replicas: 1, gpusPerReplica: 1}
`)
	env.WaitPhase(t, ns, "evict", crd.PhaseReady, 90*time.Second)
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ai.example.com/inferenceservice=evict"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods: %v %v", err, pods)
	}
	victim := pods.Items[0].Name
	env.Kubectl(t, "annotate", "pod", "-n", ns, victim, "kubelet.fake/behavior=evicted")
	testenv.Eventually(t, 60*time.Second, "the pod evicted and replaced", func() error {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ai.example.com/inferenceservice=evict"})
		if err != nil {
			return err
		}
		evicted, live := false, 0
		for _, p := range pods.Items {
			switch {
			case p.Name == victim:
				evicted = p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted"
			case p.Status.Phase == corev1.PodRunning:
				live++
			}
		}
		if !evicted || live == 0 {
			return fmt.Errorf("evicted %v, %d replacements running", evicted, live)
		}
		return nil
	})
	t.Logf("evicted: %s", env.Kubectl(t, "get", "pods", "-n", ns, "--no-headers"))
	env.WaitPhase(t, ns, "evict", crd.PhaseReady, 90*time.Second)
	patchISVC(t, ns, "evict", `{"spec":{"replicas":2}}`)
	readyReplicas(t, ns, "evict", 2, 90*time.Second)
	t.Logf("statuses: %s", statuses.trail("evict"))
	if f := statuses.failed("evict", "Evicted"); f != nil {
		t.Fatalf("a pod evicted and replaced decided the phase: %s/%s: %s (statuses: %s)", f.Status.Phase, f.Status.Reason, readyMessage(f), statuses.trail("evict"))
	}
	if n, _ := warningEvents(t, ns, "Evicted"); n != 0 {
		t.Fatalf("%d Evicted Warning Events on the isvc", n)
	}
}

// TestCrashLoopingRolloutWhileServing: a spec change whose new pods crash-loop is reported at
// once (phase Progressing, reason CrashLoopBackOff, Progressing False with the cause, a Warning
// Event) while the previous pods keep the model serving and Ready stays True; long before the
// progress hold (10m) or the Deployment's deadline would tell.
func TestCrashLoopingRolloutWhileServing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: roll}
spec: {model: m, replicas: 2, gpusPerReplica: 1}
`)
	env.WaitPhase(t, ns, "roll", crd.PhaseReady, 90*time.Second)
	serving, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ai.example.com/inferenceservice=roll"})
	if err != nil || len(serving.Items) != 2 {
		t.Fatalf("pods: %v %v", err, serving)
	}
	patchISVC(t, ns, "roll", `{"spec":{"image":"kubelet.fake/crashloop:v1"}}`)
	start := time.Now()
	var got *crd.InferenceService
	testenv.Eventually(t, 60*time.Second, "roll: the crash loop reported", func() error {
		i, err := env.ISVC(ns, "roll")
		if err != nil {
			return err
		}
		if i.Status.Reason != "CrashLoopBackOff" {
			return fmt.Errorf("%s/%s generation %d/%d", i.Status.Phase, i.Status.Reason, i.Status.ObservedGeneration, i.Generation)
		}
		got = i
		return nil
	})
	t.Logf("CrashLoopBackOff reported %.1fs after the spec change; kubectl get isvc: %s", time.Since(start).Seconds(), getRow(t, ns, "roll"))
	var ready, progressing metav1.Condition
	for _, c := range got.Status.Conditions {
		switch c.Type {
		case crd.ConditionReady:
			ready = c
		case crd.ConditionProgressing:
			progressing = c
		}
	}
	if got.Status.Phase != crd.PhaseProgressing || got.Status.ObservedGeneration != got.Generation || got.Status.ReadyReplicas < 2 ||
		ready.Status != metav1.ConditionTrue || progressing.Status != metav1.ConditionFalse || progressing.Reason != "CrashLoopBackOff" ||
		!strings.Contains(progressing.Message, "container vllm: ") || !strings.Contains(progressing.Message, "exit code 1 (Error)") {
		t.Fatalf("status %s/%s generation %d/%d ready %d; Ready %s/%s %q; Progressing %s/%s %q",
			got.Status.Phase, got.Status.Reason, got.Status.ObservedGeneration, got.Generation, got.Status.ReadyReplicas,
			ready.Status, ready.Reason, ready.Message, progressing.Status, progressing.Reason, progressing.Message)
	}
	testenv.Eventually(t, 30*time.Second, "one CrashLoopBackOff Warning Event", func() error {
		if n, _ := warningEvents(t, ns, "CrashLoopBackOff"); n != 1 {
			return fmt.Errorf("%d events", n)
		}
		return nil
	})
	// The previous pods still serve: the same two, Ready.
	for _, p := range serving.Items {
		cur, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil || cur.DeletionTimestamp != nil || len(cur.Status.ContainerStatuses) == 0 || !cur.Status.ContainerStatuses[0].Ready {
			t.Fatalf("serving pod %s no longer serves: %v", p.Name, err)
		}
	}
}

// readyReplicas waits until the model is Ready with at least n ready replicas.
func readyReplicas(t *testing.T, ns, name string, n int32, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("%s: %d replicas Ready", name, n), func() error {
		i, err := env.ISVC(ns, name)
		if err != nil {
			return err
		}
		if i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas < n {
			return fmt.Errorf("%s/%s %d ready", i.Status.Phase, i.Status.Reason, i.Status.ReadyReplicas)
		}
		return nil
	})
}
