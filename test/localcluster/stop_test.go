package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/test/localcluster/vllm"
)

func TestStopDelayBoundedByGrace(t *testing.T) {
	grace := func(s int64) *int64 { return &s }
	for _, c := range []struct {
		ann   string
		grace *int64
		want  time.Duration
	}{
		{"", grace(30), 0},
		{"x", grace(30), 0},
		{"5", grace(30), 5 * time.Second},
		{"5", grace(2), 2 * time.Second},
		{"5", nil, 5 * time.Second},
	} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{stopSecondsAnnotation: c.ann}, DeletionGracePeriodSeconds: c.grace}}
		if got := stopDelay(p); got != c.want {
			t.Errorf("%q grace %v: %s, want %s", c.ann, c.grace, got, c.want)
		}
	}
}

func TestPreStopSleepBoundedByGrace(t *testing.T) {
	grace := func(s int64) *int64 { return &s }
	sleep := func(s int64) *v1.Lifecycle {
		return &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: s}}}
	}
	exec := &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	for _, c := range []struct {
		name  string
		hooks []*v1.Lifecycle
		grace *int64
		want  time.Duration
	}{
		{"none", []*v1.Lifecycle{nil}, grace(30), 0},
		{"exec hook", []*v1.Lifecycle{exec}, grace(30), 0},
		{"sleep", []*v1.Lifecycle{sleep(5)}, grace(30), 5 * time.Second},
		{"longest container", []*v1.Lifecycle{sleep(5), nil, sleep(8)}, grace(30), 8 * time.Second},
		{"grace bounds", []*v1.Lifecycle{sleep(5)}, grace(2), 2 * time.Second},
		{"forced", []*v1.Lifecycle{sleep(5)}, grace(0), 0},
		{"default grace", []*v1.Lifecycle{sleep(45)}, nil, 30 * time.Second},
	} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionGracePeriodSeconds: c.grace}}
		for _, h := range c.hooks {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Lifecycle: h})
		}
		if got := preStopSleep(p); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestPreStopSleepKeepsServing: a deleted pod whose container has a preStop sleep hook keeps
// serving requests for that long, as the kubelet runs the hook before SIGTERM, then stops and
// is deleted; without the hook the server would stop at once, cutting a gateway's requests
// sent before it saw the pod go.
func TestPreStopSleepKeepsServing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	oneNodeKubelet(t, ctx, cancel, client, kubeletConfig{serve: true, crashBackoffInitial: time.Second, crashBackoffMax: 2 * time.Second,
		server: vllm.Config{TokenTime: time.Millisecond}}, 204)
	const hook = 3 * time.Second
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", UID: "uid-m"},
		Spec: v1.PodSpec{NodeName: nodeName(0), Containers: []v1.Container{{Name: "server", Image: "vllm/vllm-openai:v0.11.0",
			Args:           []string{"Qwen/Qwen3-0.6B", "--port", "8000"},
			Resources:      v1.ResourceRequirements{Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
			ReadinessProbe: &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}},
			Lifecycle:      &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: int64(hook / time.Second)}}}}}}}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var url string
	deadline := time.Now().Add(60 * time.Second)
	for url == "" {
		p, err := client.CoreV1().Pods("ns").Get(ctx, "m", metav1.GetOptions{})
		if err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready {
			url = "http://" + p.Status.PodIP + ":8000/v1/models"
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %s\n%s", ckState(ctx, client, "m"), ckEvents(ctx, client, "m"))
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	get := func() error {
		res, err := http.Get(url)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if _, err := io.ReadAll(res.Body); err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", res.Status)
		}
		return nil
	}
	// A graceful deletion as the API server records it (the fake clientset deletes at once).
	live, err := client.CoreV1().Pods("ns").Get(ctx, "m", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	live.DeletionTimestamp, live.DeletionGracePeriodSeconds = &metav1.Time{Time: deleted}, ptr.To[int64](30)
	if _, err := client.CoreV1().Pods("ns").Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Requests during the hook's sleep (less a margin for the poll) all succeed.
	for n := 0; time.Since(deleted) < hook-time.Second; n++ {
		if err := get(); err != nil {
			t.Fatalf("request %d, %s after the deletion, inside the %s preStop sleep: %v", n, time.Since(deleted).Round(time.Millisecond), hook, err)
		}
		time.Sleep(50 * time.Millisecond) // request interval
	}
	// Then the server stops and the pod's deletion completes.
	for {
		_, err := client.CoreV1().Pods("ns").Get(ctx, "m", metav1.GetOptions{})
		if apierrors.IsNotFound(err) && get() != nil {
			break
		}
		if time.Since(deleted) > hook+10*time.Second {
			t.Fatalf("pod not gone %s after its deletion: %s", time.Since(deleted).Round(time.Millisecond), ckState(ctx, client, "m"))
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	if d := time.Since(deleted); d < hook {
		t.Fatalf("pod gone %s after its deletion, before its %s preStop sleep ended", d, hook)
	}
}
