package activator

import (
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

// pod is a model pod of qwen3 in team-a; edits change it.
func pod(name, ip string, edits ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Labels: map[string]string{
			kinds.ManagedByLabel: kinds.ManagedByValue, kinds.InstanceLabel: "qwen3",
		}},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
	for _, e := range edits {
		e(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionFalse }
func worker(i string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels[kinds.LWSWorkerLabel] = i }
}

func TestReadyEndpoints(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want []string
	}{
		{name: "none"},
		{name: "ready pods, sorted", pods: []*corev1.Pod{pod("b", "10.0.0.2"), pod("a", "10.0.0.1")},
			want: []string{"10.0.0.1:8000", "10.0.0.2:8000"}},
		{name: "not ready", pods: []*corev1.Pod{pod("a", "10.0.0.1", notReady)}},
		{name: "no Ready condition yet", pods: []*corev1.Pod{pod("a", "10.0.0.1", func(p *corev1.Pod) { p.Status.Conditions = p.Status.Conditions[:1] })}},
		{name: "ready without an IP", pods: []*corev1.Pod{pod("a", "")}},
		{name: "terminating, still ready", pods: []*corev1.Pod{pod("a", "10.0.0.1", func(p *corev1.Pod) { p.DeletionTimestamp = &now })}},
		{name: "leader serves, workers do not", pods: []*corev1.Pod{pod("l", "10.0.0.1", worker("0")), pod("w", "10.0.0.2", worker("1"))},
			want: []string{"10.0.0.1:8000"}},
		{name: "IPv6", pods: []*corev1.Pod{pod("a", "fd00::1")}, want: []string{"[fd00::1]:8000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReadyEndpoints(tc.pods, ModelPort); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStripPodKeepsWhatIsRead(t *testing.T) {
	p := pod("l", "10.0.0.1", worker("0"))
	p.Spec.Containers = []corev1.Container{{Name: kinds.ContainerName, Image: "vllm"}}
	p.Labels["other"] = "x"
	got, err := StripPod(p)
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*corev1.Pod)
	if len(s.Spec.Containers) != 0 || s.Labels["other"] != "" || len(s.Status.Conditions) != 1 {
		t.Errorf("kept more than it reads: %+v", s)
	}
	if k, ok := ModelOf(s); !ok || k != qwen {
		t.Errorf("model %v %v, want %v", k, ok, qwen)
	}
	if eps := ReadyEndpoints([]*corev1.Pod{s}, ModelPort); !slices.Equal(eps, []string{"10.0.0.1:8000"}) {
		t.Errorf("stripped pod's endpoints %v", eps)
	}
}

// setter records the last endpoints set per model.
type setter struct {
	mu   sync.Mutex
	last map[Key][]string
}

func (s *setter) SetEndpoints(k Key, eps []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[Key][]string{}
	}
	s.last[k] = eps
}

func (s *setter) of(k Key) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	eps, ok := s.last[k]
	return eps, ok
}

// TestFeedFollowsPods drives the feed through a fake clientset's watch: a pod turning ready, a
// second one, one deleted, all deleted.
func TestFeedFollowsPods(t *testing.T) {
	client := fake.NewClientset(pod("a", "10.0.0.1", notReady))
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(StripPod))
	var set setter
	synced, err := NewFeed(&set, ModelPort).Watch(factory.Core().V1().Pods().Informer())
	if err != nil {
		t.Fatal(err)
	}
	// Stopped before Shutdown waits for the informers: t.Context ends only after the test.
	stop := make(chan struct{})
	factory.Start(stop)
	defer factory.Shutdown()
	defer close(stop)
	if !cache.WaitForCacheSync(stop, synced) {
		t.Fatal("not synced")
	}
	expect := func(what string, want []string) {
		t.Helper()
		eventually(t, what, func() bool { got, ok := set.of(qwen); return ok && slices.Equal(got, want) })
	}
	expect("the not-ready pod as no endpoint", nil)

	pods := client.CoreV1().Pods("team-a")
	if _, err := pods.UpdateStatus(t.Context(), pod("a", "10.0.0.1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("a ready", []string{"10.0.0.1:8000"})
	if _, err := pods.Create(t.Context(), pod("b", "10.0.0.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("a and b", []string{"10.0.0.1:8000", "10.0.0.2:8000"})
	if err := pods.Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("b only", []string{"10.0.0.2:8000"})
	if err := pods.Delete(t.Context(), "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("none", nil)
}
