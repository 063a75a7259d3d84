package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/testenv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
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
