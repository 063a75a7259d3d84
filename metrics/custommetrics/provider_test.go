package custommetrics

import (
	"context"
	"maps"
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

// readings is keyed by pod UID, as the scraper's are; every pod is vLLM's but those in sglang.
type readings map[types.UID]float64

// sglang are the pods whose page is SGLang's.
var sglang = map[types.UID]bool{"a/qwen-1": true, "a/qwen-2": true}

// kvUse are the pods whose page carried the KV-cache gauge, and its value.
var kvUse = map[types.UID]float64{"a/qwen-1": 0.82, "a/qwen-2": 0.305, "a/llama-1": 0.5}

func (r readings) Reading(pod *corev1.Pod, now time.Time) (podmetrics.Reading, bool) {
	v, ok := r[pod.UID]
	metric, kvMetric := "num_requests_waiting", "kv_cache_usage_perc"
	if sglang[pod.UID] {
		metric, kvMetric = "num_queue_reqs", "token_usage"
	}
	reading := podmetrics.Reading{Waiting: v, Metric: metric, At: now.Add(-time.Second)}
	if kv, has := kvUse[pod.UID]; has {
		reading.KV, reading.KVMetric = kv, kvMetric
	}
	return reading, ok
}

// ttftReadings are the pods' TTFT p95 in ms as the scraper would compute them; a pod not in
// it has none (no histogram, or one read only).
var ttftReadings = map[types.UID]float64{"a/qwen-1": 180.5, "a/llama-1": 0}

func (r readings) TTFT(pod *corev1.Pod, now time.Time, window time.Duration) (float64, time.Time, bool) {
	if _, read := r[pod.UID]; !read {
		return 0, time.Time{}, false
	}
	ms, ok := ttftReadings[pod.UID]
	return ms + window.Seconds()/1000, now.Add(-time.Second), ok // the window shows in the last digit
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

var (
	waiting  = provider.CustomMetricInfo{GroupResource: podsResource, Namespaced: true, Metric: "num_requests_waiting"}
	queued   = provider.CustomMetricInfo{GroupResource: podsResource, Namespaced: true, Metric: "num_queue_reqs"}
	vllmKV   = provider.CustomMetricInfo{GroupResource: podsResource, Namespaced: true, Metric: "kv_cache_usage_perc"}
	sglangKV = provider.CustomMetricInfo{GroupResource: podsResource, Namespaced: true, Metric: "token_usage"}
	ttftP95  = provider.CustomMetricInfo{GroupResource: podsResource, Namespaced: true, Metric: "time_to_first_token_p95_milliseconds"}
)

func TestGetMetricBySelector(t *testing.T) {
	p := NewProvider(
		lister(t, pod("a", "llama-1", "llama"), pod("a", "llama-2", "llama"), pod("a", "llama-3", "llama"), pod("a", "qwen-1", "qwen"), pod("b", "llama-1", "llama")),
		readings{"a/llama-1": 2.5, "a/llama-2": 7, "a/qwen-1": 1, "b/llama-1": 9}, // llama-3 unread
		func() time.Time { return time.Unix(1000, 0) })
	sel := labels.SelectorFromSet(labels.Set{podmetrics.InstanceLabel: "llama"})
	list, err := p.GetMetricBySelector(context.Background(), "a", sel, waiting, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range list.Items {
		got[v.DescribedObject.Namespace+"/"+v.DescribedObject.Name] = v.Value.String()
		if v.DescribedObject.Kind != "Pod" || v.Metric.Name != waiting.Metric || !v.Timestamp.Time.Equal(time.Unix(999, 0)) {
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
	p := NewProvider(lister(t, pod("a", "llama-1", "llama"), pod("a", "llama-3", "llama")), readings{"a/llama-1": 4, "a/gone": 3}, time.Now)
	v, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: "llama-1"}, waiting, labels.Everything())
	if err != nil || v.Value.String() != "4" {
		t.Fatalf("llama-1: %v, %v", v, err)
	}
	for _, name := range []string{"llama-3", "gone"} { // unread; read but no longer a model pod
		if _, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: name}, waiting, labels.Everything()); !apierrors.IsNotFound(err) {
			t.Errorf("%s: %v, want NotFound", name, err)
		}
	}
	if got := p.ListAllMetrics(); len(got) != 5 || got[0] != queued || got[1] != waiting || got[2] != sglangKV || got[3] != vllmKV || got[4] != ttftP95 {
		t.Errorf("ListAllMetrics = %v, want SGLang's and vLLM's queue, then their KV-cache use, then the TTFT p95", got)
	}
}

// TestServesEachEnginesQueueUnderItsName: an SGLang model's HPA asks num_queue_reqs and gets
// its pods' SGLang readings; a vLLM pod's reading is not served under SGLang's name, nor an
// SGLang pod's under vLLM's (a change of engine, both pods under one selector).
func TestServesEachEnginesQueueUnderItsName(t *testing.T) {
	p := NewProvider(
		lister(t, pod("a", "qwen-1", "qwen"), pod("a", "qwen-2", "qwen"), pod("a", "qwen-old", "qwen")),
		readings{"a/qwen-1": 3, "a/qwen-2": 0.5, "a/qwen-old": 8},
		func() time.Time { return time.Unix(1000, 0) })
	sel := labels.SelectorFromSet(labels.Set{podmetrics.InstanceLabel: "qwen"})
	for _, c := range []struct {
		info provider.CustomMetricInfo
		want map[string]string
	}{
		{queued, map[string]string{"qwen-1": "3", "qwen-2": "500m"}},
		{waiting, map[string]string{"qwen-old": "8"}},
	} {
		wantBySelector(t, p, sel, c.info, c.want)
	}
	if v, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: "qwen-1"}, queued, labels.Everything()); err != nil || v.Value.String() != "3" || v.Metric.Name != "num_queue_reqs" {
		t.Errorf("qwen-1 by name: %v, %v", v, err)
	}
	if _, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: "qwen-1"}, waiting, labels.Everything()); !apierrors.IsNotFound(err) {
		t.Errorf("an SGLang pod asked for vLLM's name: %v, want NotFound", err)
	}
}

// TestServesEachEnginesKVCacheUnderItsName: spec.autoscaling.metric kvCache's HPA asks its
// engine's KV-cache name and gets the fraction of 1 in milli-units; a pod whose page carried
// no KV gauge, or is another engine's, is left out as an unread pod is.
func TestServesEachEnginesKVCacheUnderItsName(t *testing.T) {
	p := NewProvider(
		lister(t, pod("a", "qwen-1", "qwen"), pod("a", "qwen-2", "qwen"), pod("a", "llama-1", "qwen"), pod("a", "llama-2", "qwen")),
		readings{"a/qwen-1": 3, "a/qwen-2": 0, "a/llama-1": 1, "a/llama-2": 2}, // llama-2: no KV gauge
		func() time.Time { return time.Unix(1000, 0) })
	sel := labels.SelectorFromSet(labels.Set{podmetrics.InstanceLabel: "qwen"})
	for _, c := range []struct {
		info provider.CustomMetricInfo
		want map[string]string
	}{
		{sglangKV, map[string]string{"qwen-1": "820m", "qwen-2": "305m"}},
		{vllmKV, map[string]string{"llama-1": "500m"}},
		{queued, map[string]string{"qwen-1": "3", "qwen-2": "0"}},
	} {
		wantBySelector(t, p, sel, c.info, c.want)
	}
	if v, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: "llama-1"}, vllmKV, labels.Everything()); err != nil || v.Value.String() != "500m" || v.Metric.Name != "kv_cache_usage_perc" {
		t.Errorf("llama-1 by name: %v, %v", v, err)
	}
	for _, c := range []struct {
		name string
		info provider.CustomMetricInfo
	}{{"llama-2", vllmKV}, {"qwen-1", vllmKV}, {"llama-1", sglangKV}} {
		if _, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: c.name}, c.info, labels.Everything()); !apierrors.IsNotFound(err) {
			t.Errorf("%s asked for %s: %v, want NotFound", c.name, c.info.Metric, err)
		}
	}
}

// TestServesTheTTFTP95OverTheSelectorsWindow: the TTFT p95 is served in milli-units of a
// millisecond for the pods that have one, over the window the HPA's metric selector names
// (60 s when it names none); a window out of bounds, or not one value, is a bad request.
func TestServesTheTTFTP95OverTheSelectorsWindow(t *testing.T) {
	p := NewProvider(
		lister(t, pod("a", "qwen-1", "qwen"), pod("a", "qwen-2", "qwen"), pod("a", "llama-1", "qwen")),
		readings{"a/qwen-1": 3, "a/qwen-2": 0, "a/llama-1": 1}, // qwen-2: no TTFT p95
		func() time.Time { return time.Unix(1000, 0) })
	sel := labels.SelectorFromSet(labels.Set{podmetrics.InstanceLabel: "qwen"})
	for _, c := range []struct {
		metricSelector string
		want           map[string]string
		bad            bool
	}{
		{"", map[string]string{"qwen-1": "180560m", "llama-1": "60m"}, false},
		{"window_seconds=15", map[string]string{"qwen-1": "180515m", "llama-1": "15m"}, false},
		{"window_seconds in (600)", map[string]string{"qwen-1": "181100m", "llama-1": "600m"}, false},
		{"window_seconds=14", nil, true},
		{"window_seconds=601", nil, true},
		{"window_seconds=1m", nil, true},
		{"window_seconds in (15,30)", nil, true},
		{"window_seconds!=15", nil, true},
	} {
		ms, err := labels.Parse(c.metricSelector)
		if err != nil {
			t.Fatal(err)
		}
		list, err := p.GetMetricBySelector(context.Background(), "a", sel, ttftP95, ms)
		if c.bad {
			if !apierrors.IsBadRequest(err) {
				t.Errorf("%q: %v, want a bad request", c.metricSelector, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, v := range list.Items {
			got[v.DescribedObject.Name] = v.Value.String()
		}
		if len(got) != len(c.want) {
			t.Errorf("%q: %v, want %v", c.metricSelector, got, c.want)
		}
		for k, w := range c.want {
			if got[k] != w {
				t.Errorf("%q: %v, want %v", c.metricSelector, got, c.want)
			}
		}
	}
	if _, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "a", Name: "qwen-2"}, ttftP95, labels.Everything()); !apierrors.IsNotFound(err) {
		t.Errorf("qwen-2 without a p95: %v, want NotFound", err)
	}
}

// wantBySelector asks p for info over namespace a's pods of sel and wants exactly the values
// want (pod name: quantity), each item named as asked.
func wantBySelector(t *testing.T, p *Provider, sel labels.Selector, info provider.CustomMetricInfo, want map[string]string) {
	t.Helper()
	list, err := p.GetMetricBySelector(context.Background(), "a", sel, info, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range list.Items {
		got[v.DescribedObject.Name] = v.Value.String()
		if v.Metric.Name != info.Metric {
			t.Errorf("%s: item named %s", info.Metric, v.Metric.Name)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: %v, want %v", info.Metric, got, want)
	}
}
