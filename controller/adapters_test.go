package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/modelserver"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

// vllm is a model server as vLLM's runtime LoRA API answers, one per pod IP (127.0.0.N, all
// on one port), recording the calls it is asked.
type vllm struct {
	mu     sync.Mutex
	loaded map[string]string // name -> path
	calls  *[]string
	callMu *sync.Mutex
	ip     string
}

func (v *vllm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct{ LoraName, LoraPath string }
	var raw map[string]string
	_ = json.NewDecoder(r.Body).Decode(&raw)
	req.LoraName, req.LoraPath = raw["lora_name"], raw["lora_path"]
	v.callMu.Lock()
	*v.calls = append(*v.calls, v.ip+" "+r.Method+" "+r.URL.Path+" "+req.LoraName)
	v.callMu.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	fail := func(code int, msg string) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "error", "message": msg, "code": code})
	}
	switch r.URL.Path {
	case "/v1/models":
		data := []map[string]any{{"id": "base", "root": "base", "parent": nil}}
		for n, p := range v.loaded {
			data = append(data, map[string]any{"id": n, "root": p, "parent": "base"})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
	case "/v1/load_lora_adapter":
		switch {
		case v.loaded[req.LoraName] != "":
			fail(400, "The lora adapter '"+req.LoraName+"' has already been loaded.")
		case strings.Contains(req.LoraPath, "missing"):
			fail(404, "No adapter found for "+req.LoraPath)
		default:
			v.loaded[req.LoraName] = req.LoraPath
		}
	case "/v1/unload_lora_adapter":
		if v.loaded[req.LoraName] == "" {
			fail(404, "The lora adapter '"+req.LoraName+"' cannot be found.")
			return
		}
		delete(v.loaded, req.LoraName)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// vllmAPI is vLLM's adapter endpoints, the default engine's.
var vllmAPI = adapterAPI(&crd.SpecExtensions{})

// servers runs one vllm per pod IP, all on one port.
type servers struct {
	t      *testing.T
	port   int
	byIP   map[string]*vllm
	calls  []string
	callMu sync.Mutex
}

func newServers(t *testing.T, ips ...string) *servers {
	t.Helper()
	s := &servers{t: t, byIP: map[string]*vllm{}}
	for _, ip := range ips {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(s.port)))
		if err != nil {
			t.Skipf("cannot listen on %s: %v", ip, err)
		}
		if s.port == 0 {
			s.port = ln.Addr().(*net.TCPAddr).Port
		}
		v := &vllm{loaded: map[string]string{}, calls: &s.calls, callMu: &s.callMu, ip: ip}
		srv := &http.Server{Handler: v, ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		s.byIP[ip] = v
	}
	return s
}

func (s *servers) client() *modelserver.Client {
	return modelserver.New(modelserver.Options{Port: s.port, Timeout: time.Second, LoadTimeout: time.Second})
}

// take returns the calls made since the last take, sorted (pods are asked concurrently).
func (s *servers) take() string {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	out := s.calls
	s.calls = nil
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// adapterCaches adds the ReplicaSets the pods' controller references point at.
type adapterCaches struct {
	*fakeCaches
	rs []*appsv1.ReplicaSet
}

func (a *adapterCaches) ReplicaSets(string, string) ([]*appsv1.ReplicaSet, error) { return a.rs, nil }

// adapterWorld is an isvc with adapters, its Deployment, a ReplicaSet of it and pods.
type adapterWorld struct {
	isvc *crd.InferenceService
	d    *appsv1.Deployment
	rs   *appsv1.ReplicaSet
}

func newAdapterWorld() adapterWorld {
	isvc := newISVCObject(2)
	w := adapterWorld{isvc: isvc}
	w.d = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: isvc.Name, Namespace: isvc.Namespace, UID: "d-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: crd.GroupVersion.String(), Kind: crd.Kind, Name: isvc.Name, UID: isvc.UID, Controller: ptr.To(true)}}}}
	w.rs = &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: isvc.Name + "-abc", Namespace: isvc.Namespace, UID: "rs-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: isvc.Name, UID: w.d.UID, Controller: ptr.To(true)}}}}
	return w
}

func (w adapterWorld) ext(adapters ...string) *crd.SpecExtensions {
	var ext crd.SpecExtensions
	for _, a := range adapters {
		ext.Adapters = append(ext.Adapters, crd.Adapter{Name: a, StorageURI: "hf://org/" + a})
	}
	return &ext
}

// pod is a ready, running pod of the world's ReplicaSet at ip.
func (w adapterWorld) pod(name, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.isvc.Namespace, UID: types.UID(name + "-uid"),
			Labels:          map[string]string{kinds.InstanceLabel: w.isvc.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: w.rs.Name, UID: w.rs.UID, Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func (w adapterWorld) observed(pods ...*corev1.Pod) reconcile.Observed {
	return reconcile.Observed{Deployment: w.d, ReplicaSets: []*appsv1.ReplicaSet{w.rs}, Pods: pods}
}

func newAdapterController(ms ModelServers, now *time.Time) *Controller {
	return &Controller{modelServers: ms, now: func() time.Time { return *now }}
}

var adapterKey = queue.Key{Namespace: "default", Name: "qwen3"}

func TestObserveAdaptersOnlyForModelsWithAdapters(t *testing.T) {
	srv := newServers(t, "127.0.0.1")
	w := newAdapterWorld()
	now := t0
	c := newAdapterController(srv.client(), &now)
	obs := w.observed(w.pod("p1", "127.0.0.1"))
	if got := c.observeAdapters(context.Background(), adapterKey, w.isvc, w.ext(), &crd.StatusExtensions{}, obs); got != nil {
		t.Fatalf("a model without adapters was observed: %+v", got)
	}
	if calls := srv.take(); calls != "" {
		t.Fatalf("a model without adapters cost calls:\n%s", calls)
	}
	// Adapters just removed from the spec, still listed in status: their pods are asked, to
	// unload them.
	got := c.observeAdapters(context.Background(), adapterKey, w.isvc, w.ext(), &crd.StatusExtensions{LoadedAdapters: []string{"sql"}}, obs)
	if len(got) != 1 || srv.take() != "127.0.0.1 GET /v1/models " {
		t.Fatalf("a model whose status lists adapters: %+v", got)
	}
}

func TestObserveAdaptersAsksOnlyReadyPodsOfItsDeploymentAtTheirIP(t *testing.T) {
	srv := newServers(t, "127.0.0.1", "127.0.0.2")
	srv.byIP["127.0.0.2"].loaded["sql"] = "org/sql"
	w := newAdapterWorld()
	now := t0
	c := newAdapterController(srv.client(), &now)

	notReady := w.pod("not-ready", "127.0.0.3")
	notReady.Status.Conditions[0].Status, notReady.Status.Conditions[1].Status = corev1.ConditionFalse, corev1.ConditionFalse
	foreign := w.pod("foreign", "127.0.0.4")
	foreign.OwnerReferences[0].UID = "someone-elses-rs"
	noIP := w.pod("no-ip", "")
	deleting := w.pod("deleting", "127.0.0.5")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	relabelled := w.pod("relabelled", "127.0.0.6")
	relabelled.Labels[kinds.InstanceLabel] = "other"
	obs := w.observed(w.pod("p2", "127.0.0.2"), notReady, foreign, noIP, deleting, relabelled, w.pod("p1", "127.0.0.1"))

	got := c.observeAdapters(context.Background(), adapterKey, w.isvc, w.ext("sql"), &crd.StatusExtensions{}, obs)
	want := []reconcile.PodAdapters{{Pod: "p1", IP: "127.0.0.1"}, {Pod: "p2", IP: "127.0.0.2", Loaded: []reconcile.LoadedAdapter{{Name: "sql", Path: "org/sql"}}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("observed %+v, want %+v", got, want)
	}
	if calls := srv.take(); calls != "127.0.0.1 GET /v1/models \n127.0.0.2 GET /v1/models " {
		t.Fatalf("calls:\n%s", calls)
	}

	// A Deployment someone else controls: none of its pods is ours to dial.
	w.d.OwnerReferences[0].UID = "another-isvc"
	if got := c.observeAdapters(context.Background(), adapterKey, w.isvc, w.ext("sql"), &crd.StatusExtensions{}, obs); len(got) != 0 || srv.take() != "" {
		t.Fatalf("pods of a foreign Deployment were asked: %+v", got)
	}
}

func TestObserveAdaptersReportsAPodThatCannotBeAsked(t *testing.T) {
	srv := newServers(t, "127.0.0.1")
	w := newAdapterWorld()
	now := t0
	c := newAdapterController(srv.client(), &now)
	// Nothing listens on 127.0.0.7 at that port: connection refused.
	got := c.observeAdapters(context.Background(), adapterKey, w.isvc, w.ext("sql"), &crd.StatusExtensions{}, w.observed(w.pod("p1", "127.0.0.7")))
	if len(got) != 1 || got[0].Err == "" || got[0].Loaded != nil {
		t.Fatalf("a pod that cannot be asked: %+v", got)
	}
}

func TestApplyAdapterStepsCallsRemembersFailuresAndBacksOff(t *testing.T) {
	srv := newServers(t, "127.0.0.1", "127.0.0.2")
	w := newAdapterWorld()
	now := t0
	c := newAdapterController(srv.client(), &now)
	obs := w.observed(w.pod("p1", "127.0.0.1"), w.pod("p2", "127.0.0.2"))
	ext := w.ext("sql", "chat")
	observe := func() []reconcile.PodAdapters {
		t.Helper()
		got := c.observeAdapters(context.Background(), adapterKey, w.isvc, ext, &crd.StatusExtensions{}, obs)
		srv.take()
		return got
	}
	pods := observe()
	steps := []reconcile.AdapterStep{
		{Pod: "p1", IP: "127.0.0.1", Load: true, Name: "sql", Path: "org/sql"},
		{Pod: "p1", IP: "127.0.0.1", Load: true, Name: "chat", Path: "org/missing"},
		{Pod: "p2", IP: "127.0.0.9", Load: true, Name: "sql", Path: "org/sql"},   // not the IP p2 answered on
		{Pod: "p3", IP: "127.0.0.2", Load: true, Name: "chat", Path: "org/chat"}, // not observed
	}
	made, failed, wait := c.applyAdapterSteps(context.Background(), adapterKey, vllmAPI, pods, steps)
	if made != 2 || failed != 1 || wait != 0 {
		t.Fatalf("made %d, failed %d, wait %v", made, failed, wait)
	}
	if calls := srv.take(); calls != "127.0.0.1 POST /v1/load_lora_adapter chat\n127.0.0.1 POST /v1/load_lora_adapter sql" {
		t.Fatalf("calls:\n%s", calls)
	}

	// The next observation carries the server's message; the load that took is forgotten.
	pods = observe()
	if got := pods[0].Failed; len(got) != 1 || got["chat"] != "model server answered 404: No adapter found for org/missing" {
		t.Fatalf("failed: %+v", got)
	}
	if pods[1].Failed != nil {
		t.Fatalf("p2 failed nothing: %+v", pods[1].Failed)
	}
	retry := steps[1:2]
	// Within its back-off the failed load is not retried, and the wait is said.
	now = t0.Add(time.Second)
	if made, _, wait := c.applyAdapterSteps(context.Background(), adapterKey, vllmAPI, pods, retry); made != 0 || wait != time.Second || srv.take() != "" {
		t.Fatalf("retried within back-off: made %d, wait %v", made, wait)
	}
	now = t0.Add(attemptBase)
	if made, failed, _ := c.applyAdapterSteps(context.Background(), adapterKey, vllmAPI, pods, retry); made != 1 || failed != 1 {
		t.Fatalf("not retried after its back-off: made %d failed %d", made, failed)
	}
	srv.take()
	// The second failure doubles the wait.
	now = now.Add(attemptBase)
	if _, _, wait := c.applyAdapterSteps(context.Background(), adapterKey, vllmAPI, pods, retry); wait != attemptBase {
		t.Fatalf("second back-off: wait %v, want %v", wait, attemptBase)
	}

	// The spec fixed: a load that takes, then an observation showing it, forgets the attempt.
	now = now.Add(attemptMax)
	retry[0].Path = "org/chat"
	if _, failed, _ := c.applyAdapterSteps(context.Background(), adapterKey, vllmAPI, pods, retry); failed != 0 {
		t.Fatal("fixed load failed")
	}
	if pods = observe(); pods[0].Failed != nil || c.memory.attempts().has(adapterKey) {
		t.Fatalf("attempts kept after the load showed: %+v", pods[0].Failed)
	}
}

func TestApplyAdapterStepsUnloads(t *testing.T) {
	srv := newServers(t, "127.0.0.1")
	srv.byIP["127.0.0.1"].loaded["sql"] = "org/sql"
	w := newAdapterWorld()
	now := t0
	c := newAdapterController(srv.client(), &now)
	obs := w.observed(w.pod("p1", "127.0.0.1"))
	pods := c.observeAdapters(context.Background(), adapterKey, w.isvc, w.ext(), &crd.StatusExtensions{LoadedAdapters: []string{"sql"}}, obs)
	srv.take()
	steps := []reconcile.AdapterStep{{Pod: "p1", IP: "127.0.0.1", Name: "sql"}}
	if made, failed, _ := c.applyAdapterSteps(context.Background(), adapterKey, vllmAPI, pods, steps); made != 1 || failed != 0 {
		t.Fatalf("made %d failed %d", made, failed)
	}
	// Unloaded meanwhile (a restart): an adapter already gone is unloaded.
	now = now.Add(attemptBase)
	if _, failed, _ := c.applyAdapterSteps(context.Background(), adapterKey, vllmAPI, pods, steps); failed != 0 {
		t.Fatal("unloading an adapter already gone failed")
	}
	if calls := srv.take(); calls != "127.0.0.1 POST /v1/unload_lora_adapter sql\n127.0.0.1 POST /v1/unload_lora_adapter sql" {
		t.Fatalf("calls:\n%s", calls)
	}
}

func TestAttemptsGoWithThePodOrTheModel(t *testing.T) {
	var a attempts
	now := t0
	fail := fmt.Errorf("boom")
	a.record(adapterKey, reconcile.AdapterStep{Pod: "p1", Load: true, Name: "sql"}, now, fail)
	a.record(adapterKey, reconcile.AdapterStep{Pod: "p2", Load: true, Name: "sql"}, now, fail)
	// p2 could not be asked: its attempts stay; p1 no longer serves: its go.
	a.settle(adapterKey, []reconcile.PodAdapters{{Pod: "p2", Err: "timeout"}})
	if a.failed(adapterKey, "p1") != nil || a.failed(adapterKey, "p2")["sql"] != "boom" || a.attemptsHeld != 1 {
		t.Fatalf("after settle: %+v (held %d)", a.keys, a.attemptsHeld)
	}
	(*memory)(&a).forget(adapterKey)
	if a.has(adapterKey) || a.attemptsHeld != 0 || len(a.keys) != 0 {
		t.Fatalf("after forget: %+v (held %d)", a.keys, a.attemptsHeld)
	}
}

func TestAttemptsBounded(t *testing.T) {
	var a attempts
	other := queue.Key{Namespace: "default", Name: "other"}
	for i := 0; i < maxAttempts; i++ {
		a.record(other, reconcile.AdapterStep{Pod: "p" + strconv.Itoa(i), Load: true, Name: "sql"}, t0, nil)
	}
	a.record(adapterKey, reconcile.AdapterStep{Pod: "p1", Load: true, Name: "sql"}, t0, nil)
	if a.attemptsHeld > maxAttempts || !a.has(adapterKey) || a.has(other) {
		t.Fatalf("held %d, has key %v, has other %v", a.attemptsHeld, a.has(adapterKey), a.has(other))
	}
}

func TestApplyAdapterStepsUnloadsBeforeLoading(t *testing.T) {
	srv := newServers(t, "127.0.0.1")
	srv.byIP["127.0.0.1"].loaded["sql"] = "org/sql-v1"
	w := newAdapterWorld()
	now := t0
	c := newAdapterController(srv.client(), &now)
	pods := c.observeAdapters(context.Background(), adapterKey, w.isvc, w.ext("sql"), &crd.StatusExtensions{}, w.observed(w.pod("p1", "127.0.0.1")))
	// sql moved to another path: Reconcile plans its unload and its load together.
	steps := []reconcile.AdapterStep{
		{Pod: "p1", IP: "127.0.0.1", Load: true, Name: "sql", Path: "org/sql-v2"},
		{Pod: "p1", IP: "127.0.0.1", Name: "sql", Path: "org/sql-v1"},
	}
	if made, failed, _ := c.applyAdapterSteps(context.Background(), adapterKey, vllmAPI, pods, steps); made != 2 || failed != 0 {
		t.Fatalf("made %d failed %d", made, failed)
	}
	if got := srv.byIP["127.0.0.1"].loaded["sql"]; got != "org/sql-v2" {
		t.Fatalf("sql loaded from %q", got)
	}
}

// TestSyncLoadsAdaptersThenReportsThem drives the whole sync: the first loads what the pod
// lacks and writes nothing (the load shows on the next /v1/models), the second observes it and
// writes the status once, the third, at rest, costs one GET and no write; a restarted server
// gets the adapter back.
func TestSyncLoadsAdaptersThenReportsThem(t *testing.T) {
	srv := newServers(t, "127.0.0.1")
	isvc := newISVCObject(1)
	isvc.Annotations = map[string]string{crd.AnnotationV1beta1Spec: `{"adapters":[{"name":"sql","storageURI":"hf://org/sql-lora"}]}`}
	want := desired(t, isvc)
	f := newFixture(t, isvc, nil)
	w := newAdapterWorld()
	w.isvc = isvc
	d := readyDeployment(t, isvc)
	d.UID = w.d.UID
	f.caches.d, f.caches.svc, f.caches.hpa = d, want.Service, want.HPA
	f.caches.pods = []*corev1.Pod{w.pod("p1", "127.0.0.1")}
	f.ctrl.caches = &adapterCaches{fakeCaches: f.caches, rs: []*appsv1.ReplicaSet{w.rs}}
	f.ctrl.modelServers = srv.client()

	f.mustSync(t, "first sync", queue.After(recheckAfterActing))
	if calls, api := srv.take(), f.calls(); calls != "127.0.0.1 GET /v1/models \n127.0.0.1 POST /v1/load_lora_adapter sql" || api != "" {
		t.Fatalf("first sync: model server calls:\n%s\nAPI calls: %s", calls, api)
	}
	if got := srv.byIP["127.0.0.1"].loaded["sql"]; got != "org/sql-lora" {
		t.Fatalf("sql loaded from %q", got)
	}

	f.mustSync(t, "second sync", queue.Done())
	if calls, api := srv.take(), f.calls(); calls != "127.0.0.1 GET /v1/models " || api != "update inferenceservices/status" {
		t.Fatalf("second sync: model server calls:\n%s\nAPI calls: %s", calls, api)
	}
	st := f.storedStatus()
	if c := meta.FindStatusCondition(st.Conditions, crd.ConditionAdaptersReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("AdaptersReady: %+v", c)
	}

	f.caches.isvc.Status = st // the status's own event updates the cache
	f.mustSync(t, "at rest", queue.Done())
	if calls, api := srv.take(), f.calls(); calls != "127.0.0.1 GET /v1/models " || api != "" {
		t.Fatalf("at rest: model server calls:\n%s\nAPI calls: %s", calls, api)
	}

	// The container restarted (its pod's event syncs again): vLLM lost the adapter and gets
	// it back at once, with no back-off left from the first load.
	v := srv.byIP["127.0.0.1"]
	v.mu.Lock()
	v.loaded = map[string]string{}
	v.mu.Unlock()
	f.mustSync(t, "after a restart", queue.After(recheckAfterActing))
	if calls := srv.take(); calls != "127.0.0.1 GET /v1/models \n127.0.0.1 POST /v1/load_lora_adapter sql" {
		t.Fatalf("after a restart: model server calls:\n%s", calls)
	}
}

// The gate is written as one condition of pods/status, beside the kubelet's, and a pod gone
// meanwhile is no error.
func TestApplyAdapterGates(t *testing.T) {
	p := &corev1.Pod{}
	p.Name, p.Namespace = "p", "ns"
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}
	kube := kubefake.NewClientset(p)
	c := &Controller{kube: kube}
	now := metav1.Now()
	n, err := c.applyAdapterGates(context.Background(), []reconcile.PodGate{
		{Namespace: "ns", Pod: "p", Status: corev1.ConditionTrue, Reason: reconcile.GateAdaptersLoaded},
		{Namespace: "ns", Pod: "gone", Status: corev1.ConditionTrue, Reason: reconcile.GateAdaptersLoaded},
	}, now)
	if err != nil || n != 1 {
		t.Fatalf("wrote %d: %v", n, err)
	}
	got, err := kube.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, cd := range got.Status.Conditions {
		kinds = append(kinds, string(cd.Type)+"="+string(cd.Status))
	}
	sort.Strings(kinds)
	if fmt.Sprint(kinds) != "[ContainersReady=True ai.example.com/adapters-loaded=True]" {
		t.Fatalf("conditions %v", kinds)
	}
}
