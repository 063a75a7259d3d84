package podmetrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func modelPod(name, model, ip string, port int32, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: map[string]string{InstanceLabel: model}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9}}},
			{Name: "vllm", Image: "vllm/vllm-openai", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}}},
		}},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: status},
		}},
	}
}

func TestTargetOf(t *testing.T) {
	terminating := modelPod("p", "m", "127.1.0.5", 8000, true)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	noPort := modelPod("p", "m", "127.1.0.5", 8000, true)
	noPort.Spec.Containers = noPort.Spec.Containers[:1]
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"ready", modelPod("p", "m", "127.1.0.5", 8000, true), "http://127.1.0.5:8000/metrics"},
		{"IPv6", modelPod("p", "m", "fd00::5", 8000, true), "http://[fd00::5]:8000/metrics"},
		{"not ready", modelPod("p", "m", "127.1.0.5", 8000, false), ""},
		{"no IP yet", modelPod("p", "m", "", 8000, true), ""},
		{"terminating", terminating, ""},
		{"no vllm container port", noPort, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := TargetOf(tc.pod)
			if got.URL != tc.want || ok != (tc.want != "") {
				t.Fatalf("TargetOf = %q, %v; want %q", got.URL, ok, tc.want)
			}
			if ok && got.Model != "m" {
				t.Fatalf("model %q", got.Model)
			}
			// The cache's copy must give the same answer.
			stripped, _ := StripPod(tc.pod)
			if again, _ := TargetOf(stripped.(*corev1.Pod)); again != got {
				t.Fatalf("after StripPod: %+v, want %+v", again, got)
			}
		})
	}
}

// pod serves a /metrics page on a loopback port and returns a ready model pod pointing at it.
func servingPod(t *testing.T, name, model string, h http.HandlerFunc) *corev1.Pod {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return modelPod(name, model, host, int32(p), true)
}

func page(waiting int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} %d\n", waiting)
	}
}

func TestPassReadsReadyPodsAndDropsFailures(t *testing.T) {
	var broken atomic.Bool
	pods := []*corev1.Pod{
		servingPod(t, "a", "llama", page(3)),
		servingPod(t, "b", "llama", page(4)),
		servingPod(t, "c", "qwen", func(w http.ResponseWriter, r *http.Request) {
			if broken.Load() {
				http.Error(w, "engine dead", http.StatusInternalServerError)
				return
			}
			page(9)(w, r)
		}),
		modelPod("unready", "qwen", "127.0.0.1", 1, false),
	}
	reg := prometheus.NewPedanticRegistry()
	s, err := New(Config{Period: time.Minute, Timeout: time.Second, Concurrency: 2, Pods: func() ([]*corev1.Pod, error) { return pods, nil }}, reg)
	if err != nil {
		t.Fatal(err)
	}
	s.Pass(context.Background())
	now := time.Now()
	for i, want := range []float64{3, 4, 9} {
		if r, ok := s.Reading(pods[i], now); !ok || r.Waiting != want {
			t.Errorf("pod %s: %+v %v, want %v", pods[i].Name, r, ok, want)
		}
	}
	if _, ok := s.Reading(pods[3], now); ok {
		t.Error("an unready pod has a reading")
	}
	if got := testutil.ToFloat64(s.m.queue.WithLabelValues("team-a", "llama")); got != 7 {
		t.Errorf("llama's queue %v, want 7", got)
	}

	broken.Store(true)
	s.Pass(context.Background())
	if r, ok := s.Reading(pods[2], time.Now()); ok {
		t.Errorf("a pod whose /metrics failed still has a reading %+v", r)
	}
	if n := testutil.CollectAndCount(s.m.queue); n != 1 {
		t.Errorf("%d queue series, want only llama's once qwen has no reading", n)
	}
	if got := testutil.ToFloat64(s.m.scrapes.WithLabelValues("error")); got != 1 {
		t.Errorf("%v errors counted, want 1", got)
	}
	if r, ok := s.Reading(pods[0], now.Add(3*time.Minute+time.Second)); ok {
		t.Errorf("a reading older than three periods is served: %+v", r)
	}
}

func TestPassBoundsConcurrencyAndTime(t *testing.T) {
	var inFlight, peak atomic.Int32
	release := make(chan struct{})
	slow := func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		page(1)(w, r)
	}
	var pods []*corev1.Pod
	for i := range 8 {
		pods = append(pods, servingPod(t, fmt.Sprint("p", i), "m", slow))
	}
	s, err := New(Config{Period: time.Minute, Timeout: 200 * time.Millisecond, Concurrency: 3, Pods: func() ([]*corev1.Pod, error) { return pods, nil }}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s.Pass(context.Background()) // every read hangs: each is cut at the timeout
	close(release)
	if p := peak.Load(); p != 3 {
		t.Errorf("peak %d reads in flight, want the bound 3", p)
	}
	if got := testutil.ToFloat64(s.m.scrapes.WithLabelValues("error")); got != 8 {
		t.Errorf("%v timed-out reads counted as errors, want 8", got)
	}
	if _, ok := s.Reading(pods[0], time.Now()); ok {
		t.Error("a timed-out read left a reading")
	}
}
