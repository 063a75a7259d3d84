package custommetrics

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/example/inferenceservice-operator/metrics/podmetrics"
)

// readings is keyed by pod UID, as the scraper's are.
type readings map[types.UID]float64

func (r readings) Reading(pod *corev1.Pod, now time.Time) (podmetrics.Reading, bool) {
	v, ok := r[pod.UID]
	return podmetrics.Reading{Waiting: v, At: now.Add(-time.Second)}, ok
}

func lister(t *testing.T, pods ...*corev1.Pod) corelisters.PodLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewPodLister(idx)
}

func pod(ns, name, model string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: map[string]string{podmetrics.InstanceLabel: model}}}
}

var waiting = provider.CustomMetricInfo{GroupResource: podsResource, Namespaced: true, Metric: Metric}

func TestGetMetricBySelector(t *testing.T) {
	p := &Provider{
		Pods:     lister(t, pod("a", "llama-1", "llama"), pod("a", "llama-2", "llama"), pod("a", "llama-3", "llama"), pod("a", "qwen-1", "qwen"), pod("b", "llama-1", "llama")),
		Readings: readings{"a/llama-1": 2.5, "a/llama-2": 7, "a/qwen-1": 1, "b/llama-1": 9}, // llama-3 unread
		Now:      func() time.Time { return time.Unix(1000, 0) },
	}
	sel := labels.SelectorFromSet(labels.Set{podmetrics.InstanceLabel: "llama"})
	list, err := p.GetMetricBySelector(context.Background(), "a", sel, waiting, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range list.Items {
		got[v.DescribedObject.Namespace+"/"+v.DescribedObject.Name] = v.Value.String()
		if v.DescribedObject.Kind != "Pod" || v.Metric.Name != Metric || !v.Timestamp.Time.Equal(time.Unix(999, 0)) {
			t.Errorf("item %+v", v)
		}
	}
	want := map[string]string{"a/llama-1": "2500m", "a/llama-2": "7"}
	if len(got) != len(want) || got["a/llama-1"] != want["a/llama-1"] || got["a/llama-2"] != want["a/llama-2"] {
		t.Fatalf("values %v, want %v (the unread pod, the other model and the other namespace left out)", got, want)
	}

	other := waiting
	other.Metric = "cpu_usage"
	if _, err := p.GetMetricBySelector(context.Background(), "a", sel, other, labels.Everything()); !apierrors.IsNotFound(err) {
		t.Errorf("another metric: %v, want NotFound", err)
	}
	deployments := waiting
	deployments.GroupResource.Resource, deployments.GroupResource.Group = "deployments", "apps"
	if _, err := p.GetMetricBySelector(context.Background(), "a", sel, deployments, labels.Everything()); !apierrors.IsNotFound(err) {
		t.Errorf("another resource: %v, want NotFound", err)
	}
}

func TestGetMetricByName(t *testing.T) {
	p := &Provider{
		Pods:     lister(t, pod("a", "llama-1", "llama"), pod("a", "llama-3", "llama")),
		Readings: readings{"a/llama-1": 4, "a/gone": 3},
		Now:      time.Now,
	}
	v, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: "llama-1"}, waiting, labels.Everything())
	if err != nil || v.Value.String() != "4" {
		t.Fatalf("llama-1: %v, %v", v, err)
	}
	for _, name := range []string{"llama-3", "gone"} { // unread; read but no longer a model pod
		if _, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: name}, waiting, labels.Everything()); !apierrors.IsNotFound(err) {
			t.Errorf("%s: %v, want NotFound", name, err)
		}
	}
	if got := p.ListAllMetrics(); len(got) != 1 || got[0] != waiting {
		t.Errorf("ListAllMetrics = %v", got)
	}
}
