package custommetrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/metrics/podmetrics"
)

// benchSize is the crowd TestHPAReadsEveryModelAmongSilentAndImpostorPods runs in: CI's
// bounded size, or the (1,000 models, 200 silent and 50 impostor pods, the
// adapter's default period, timeout and concurrency) with METRICS_BENCH=full (make bench-adapter).
type benchSize struct {
	models, silent, impostors, periods, concurrency int
	period, timeout                                 time.Duration
	full                                            bool
}

func benchSizeFromEnv() benchSize {
	if os.Getenv("METRICS_BENCH") == "full" {
		return benchSize{models: 1000, silent: 200, impostors: 50, periods: 6, concurrency: 8, period: 10 * time.Second, timeout: 2 * time.Second, full: true}
	}
	// As many silent pods as the full size, at a tenth of its period: a pass in list order
	// would take 200 x 1 s / 8 = 25 periods.
	return benchSize{models: 100, silent: 200, impostors: 50, periods: 5, concurrency: 8, period: time.Second, timeout: time.Second}
}

// benchOwners resolves each model pod to its InferenceService through a ReplicaSet and a
// Deployment, as the owner caches do; impostors have no owner.
type benchOwners map[string]metav1.Object

func (o benchOwners) Get(gk schema.GroupKind, namespace, name string) metav1.Object {
	return o[gk.Kind+"/"+namespace+"/"+name]
}

func (o benchOwners) own(p *corev1.Pod, model string) {
	yes := true
	ref := func(obj *metav1.ObjectMeta, apiVersion, kind string, owner *metav1.ObjectMeta) {
		obj.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner.Name, UID: owner.UID, Controller: &yes}}
	}
	isvc := &metav1.ObjectMeta{Namespace: p.Namespace, Name: model, UID: types.UID("isvc-" + p.Namespace + "-" + model)}
	d := &metav1.ObjectMeta{Namespace: p.Namespace, Name: model, UID: types.UID("d-" + p.Namespace + "-" + model)}
	rs := &metav1.ObjectMeta{Namespace: p.Namespace, Name: model + "-7c9f", UID: types.UID("rs-" + p.Namespace + "-" + model)}
	ref(d, "ai.example.com/v1alpha1", "InferenceService", isvc)
	ref(rs, "apps/v1", "Deployment", d)
	ref(&p.ObjectMeta, "apps/v1", "ReplicaSet", rs)
	o["InferenceService/"+p.Namespace+"/"+model], o["Deployment/"+p.Namespace+"/"+model], o["ReplicaSet/"+p.Namespace+"/"+rs.Name] = isvc, d, rs
}

// benchPod is a ready model pod at ip:port.
func benchPod(namespace, name, model string, ip string, port int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "/" + name),
			Labels: map[string]string{podmetrics.InstanceLabel: model, "app.kubernetes.io/managed-by": "inferenceservice-operator"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}}},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// TestHPAReadsEveryModelAmongSilentAndImpostorPods is issue 32's benchmark: model pods that
// answer, a tenant's pods that accept and never answer (half in one namespace, half one a
// namespace), and impostor pods carrying the operator's labels with no InferenceService
// behind them. Every period, every model's HPA query (GetMetricBySelector, as the HPA
// controller asks) must return a reading (at full size: at most two periods old; CI, on a
// shared machine, logs the ages), and no impostor is read.
func TestHPAReadsEveryModelAmongSilentAndImpostorPods(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark on loopback listeners")
	}
	size := benchSizeFromEnv()
	var pods []*corev1.Pod
	owners := benchOwners{}
	var listeners []net.Listener
	listen := func(ip string) (net.Listener, int) {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		listeners = append(listeners, ln)
		return ln, ln.Addr().(*net.TCPAddr).Port
	}
	ip := func(kind, i int) string { return fmt.Sprintf("127.%d.%d.%d", 10+kind, i/250, 1+i%250) }
	t.Cleanup(func() {
		for _, ln := range listeners {
			ln.Close()
		}
	})
	// The silent pods go first in the list, as a pass in list order would meet them.
	var stalled sync.WaitGroup
	var silentAttempts atomic.Int64
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); stalled.Wait() })
	for i := range size.silent {
		ln, port := listen(ip(1, i))
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				silentAttempts.Add(1)
				stalled.Add(1)
				go func() { // hold it, never answer
					defer stalled.Done()
					defer c.Close()
					done := make(chan struct{})
					go func() { _, _ = c.Read(make([]byte, 1<<16)); _, _ = c.Read(make([]byte, 1)); close(done) }()
					select {
					case <-stop:
					case <-done:
					}
				}()
			}
		}()
		ns := "quiet"
		if i%2 == 1 {
			ns = "tenant-" + strconv.Itoa(i)
		}
		p := benchPod(ns, fmt.Sprintf("silent-%d", i), fmt.Sprintf("silent-%d", i), ip(1, i), port)
		owners.own(p, p.Labels[podmetrics.InstanceLabel])
		pods = append(pods, p)
	}
	// Odd models run SGLang, the others vLLM: each read in its engine's family.
	page := func(waiting int, sglang bool) http.HandlerFunc {
		body := fmt.Sprintf("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} %d\n", waiting)
		if sglang {
			body = fmt.Sprintf("# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{engine_type=\"unified\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"0\"} %d\n", waiting)
		}
		return func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }
	}
	serve := func(ln net.Listener, h http.Handler) {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	var impostorHits atomic.Int64
	for i := range size.impostors {
		ln, port := listen(ip(2, i))
		serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { impostorHits.Add(1); page(1000, false)(w, r) }))
		pods = append(pods, benchPod("tenant-x", fmt.Sprintf("impostor-%d", i), "llama", ip(2, i), port))
	}
	models := make([]*corev1.Pod, size.models)
	for i := range size.models {
		ln, port := listen(ip(0, i))
		serve(ln, page(i%7, i%2 == 1))
		ns := fmt.Sprintf("team-%d", i%20)
		p := benchPod(ns, fmt.Sprintf("model-%d-7c9f-x", i), fmt.Sprintf("model-%d", i), ip(0, i), port)
		owners.own(p, p.Labels[podmetrics.InstanceLabel])
		models[i] = p
		pods = append(pods, p)
	}

	s, err := podmetrics.New(podmetrics.Config{Period: size.period, Timeout: size.timeout, Concurrency: size.concurrency,
		Owners: owners, Pods: func() ([]*corev1.Pod, error) { return pods, nil }}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := NewProvider(lister(t, pods...), s, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// Bounded: the first round (every pod attempted once), then size.periods checks.
	start := time.Now()
	for s.Ready() != nil {
		if time.Since(start) > 10*size.period+time.Minute {
			t.Fatalf("the first round has not ended after %v", time.Since(start))
		}
		time.Sleep(size.period / 20) // polling
	}
	firstRound := time.Since(start)
	var ages []time.Duration
	blind := 0
	for period := range size.periods {
		deadline := time.Now().Add(size.period)
		now := time.Now()
		for i, pod := range models {
			sel := labels.SelectorFromSet(labels.Set{podmetrics.InstanceLabel: pod.Labels[podmetrics.InstanceLabel]})
			info := waiting
			if i%2 == 1 {
				info = queued
			}
			list, err := p.GetMetricBySelector(context.Background(), pod.Namespace, sel, info, labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 1 {
				blind++
				t.Errorf("period %d: model %d has no reading", period, i)
				continue
			}
			age := now.Sub(list.Items[0].Timestamp.Time)
			ages = append(ages, age)
			if size.full && age > 2*size.period { // the bound, checked at full size; CI logs the ages
				t.Errorf("period %d: model %d's reading is %v old, more than two periods", period, i, age)
			}
			if want := int64(i % 7); list.Items[0].Value.Value() != want {
				t.Errorf("model %d reads %v, want %d", i, list.Items[0].Value.String(), want)
			}
		}
		time.Sleep(time.Until(deadline)) // the HPA's next sync; a benchmark's cadence, not a wait for state
	}
	if n := impostorHits.Load(); n != 0 {
		t.Errorf("impostor pods read %d times", n)
	}
	sort.Slice(ages, func(i, j int) bool { return ages[i] < ages[j] })
	pct := func(q float64) time.Duration {
		return ages[min(len(ages)-1, int(q*float64(len(ages))))].Round(time.Millisecond)
	}
	if len(ages) > 0 {
		t.Logf("%d models, %d silent pods (%d attempts on them), %d impostors (%d reads): first round %v; over %d periods of %v, %d HPA queries, %d without a reading; reading age p50 %v, p99 %v, max %v (bound: two periods, %v)",
			size.models, size.silent, silentAttempts.Load(), size.impostors, impostorHits.Load(), firstRound.Round(time.Millisecond), size.periods, size.period,
			size.periods*size.models, blind, pct(0.5), pct(0.99), ages[len(ages)-1].Round(time.Millisecond), 2*size.period)
	}
}
