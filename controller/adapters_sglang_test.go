package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/modelserver"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/queue"
)

// sglangPod is a model server as SGLang v0.5.3 answers: /v1/models lists the base model alone;
// POST /load_lora_adapter and /unload_lora_adapter at the root answer a LoRAUpdateOutput whose
// loaded_adapters lists every adapter loaded after the call (a name loaded already is refused
// with the list: LoRAManager.validate_new_adapter), except the registry's refusal to unload a
// name it does not have, which lists nothing.
type sglangPod struct {
	mu     sync.Mutex
	loaded map[string]string
	calls  []string
}

func (s *sglangPod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var req map[string]string
	_ = json.NewDecoder(r.Body).Decode(&req)
	name := req["lora_name"]
	s.calls = append(s.calls, r.Method+" "+r.URL.Path+" "+name)
	answer := func(ok bool, msg string) {
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"success": ok, "error_message": msg, "loaded_adapters": s.loaded})
	}
	switch r.URL.Path {
	case "/v1/models":
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"base","object":"model","root":"base","parent":null}]}`)
	case "/load_lora_adapter":
		switch {
		case s.loaded[name] != "":
			answer(false, "Failed to load LoRA adapter "+name+" because it is already loaded")
		case strings.Contains(req["lora_path"], "missing"):
			answer(false, "Can't find 'adapter_config.json' at '"+req["lora_path"]+"'")
		default:
			s.loaded[name] = req["lora_path"]
			answer(true, "")
		}
	case "/unload_lora_adapter":
		if s.loaded[name] == "" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"success":false,"error_message":"LoRA with name `+name+` does not exist. Loaded LoRAs: dict_keys([])","loaded_adapters":null}`)
			return
		}
		delete(s.loaded, name)
		answer(true, "")
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"detail":"Not Found"}`)
	}
}

// take returns the calls made since the last take.
func (s *sglangPod) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// startSGLang runs one sglangPod at ip and the client that calls it.
func startSGLang(t *testing.T, ip string) (*sglangPod, *modelserver.Client) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	s := &sglangPod{loaded: map[string]string{}}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s, modelserver.New(modelserver.Options{Port: ln.Addr().(*net.TCPAddr).Port, Timeout: time.Second, LoadTimeout: time.Second})
}

// sglangExt is a spec on engine sglang with adapters name -> hf://org/name.
func sglangExt(adapters ...string) *crd.SpecExtensions {
	ext := crd.SpecExtensions{Engine: crd.EngineSGLang}
	for _, a := range adapters {
		ext.Adapters = append(ext.Adapters, crd.Adapter{Name: a, StorageURI: "hf://org/" + a})
	}
	return &ext
}

// withRestarts gives p its server container's status, started restarts+1 times.
func withRestarts(p *corev1.Pod, restarts int32) *corev1.Pod {
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kinds.ContainerName, Ready: true, RestartCount: restarts}}
	return p
}

// TestSGLangAdaptersObservedFromTheAnswers: a server whose /v1/models lists no adapter is never
// asked it; a pod this process has no answer from claims nothing and gets no planned step; the
// loads made to learn it (a name loaded already counts) list what it has, unwanted names too;
// from then on the observation is the last answer's list, costing no call; a container started
// again has nothing; a pod gone is forgotten.
func TestSGLangAdaptersObservedFromTheAnswers(t *testing.T) {
	srv, client := startSGLang(t, "127.0.0.1")
	// Loaded by an operator process before this one: what this one cannot know.
	srv.loaded["sql"], srv.loaded["old"] = "org/sql", "org/old"
	w := newAdapterWorld()
	now := t0
	c := newAdapterController(client, &now)
	ctx := context.Background()
	ext, stored := sglangExt("sql", "chat"), &crd.StatusExtensions{}
	api := adapterAPI(ext)
	pod := withRestarts(w.pod("p1", "127.0.0.1"), 0)
	obs := w.observed(pod)

	got := c.observeAdapters(ctx, adapterKey, w.isvc, ext, stored, obs)
	if len(got) != 1 || got[0].Err != notKnown || got[0].Loaded != nil || srv.take() != "" {
		t.Fatalf("a pod not answered yet: %+v", got)
	}
	if made, failed := c.learnAdapters(ctx, adapterKey, api, ext, stored, got); made != 2 || failed != 0 {
		t.Fatalf("learning: made %d, failed %d", made, failed)
	}
	if calls := srv.take(); calls != "POST /load_lora_adapter chat\nPOST /load_lora_adapter sql" {
		t.Fatalf("learning calls:\n%s", calls)
	}

	got = c.observeAdapters(ctx, adapterKey, w.isvc, ext, stored, obs)
	want := []reconcile.LoadedAdapter{{Name: "chat", Path: "org/chat"}, {Name: "old", Path: "org/old"}, {Name: "sql", Path: "org/sql"}}
	if len(got) != 1 || got[0].Err != "" || fmt.Sprint(got[0].Loaded) != fmt.Sprint(want) || srv.take() != "" {
		t.Fatalf("after the answers: %+v", got)
	}
	// Reconcile plans the unload of what is listed and not wanted; its answer is observed.
	steps := []reconcile.AdapterStep{{Pod: "p1", IP: "127.0.0.1", Name: "old", Path: "org/old"}}
	if made, failed, _ := c.applyAdapterSteps(ctx, adapterKey, api, got, steps); made != 1 || failed != 0 {
		t.Fatalf("unload: made %d failed %d", made, failed)
	}
	got = c.observeAdapters(ctx, adapterKey, w.isvc, ext, stored, obs)
	if fmt.Sprint(got[0].Loaded) != fmt.Sprint([]reconcile.LoadedAdapter{{Name: "chat", Path: "org/chat"}, {Name: "sql", Path: "org/sql"}}) ||
		srv.take() != "POST /unload_lora_adapter old" {
		t.Fatalf("after the unload: %+v", got)
	}
	if c.learnAdapters(ctx, adapterKey, api, ext, stored, got); srv.take() != "" {
		t.Fatal("a known pod was asked again")
	}

	// The container started again: SGLang starts with no adapter (no --lora-paths).
	srv.loaded = map[string]string{}
	withRestarts(pod, 1)
	got = c.observeAdapters(ctx, adapterKey, w.isvc, ext, stored, obs)
	if len(got) != 1 || got[0].Err != "" || got[0].Loaded != nil {
		t.Fatalf("after a restart: %+v", got)
	}

	// The pod gone, then the model's adapters: nothing is kept.
	c.observeAdapters(ctx, adapterKey, w.isvc, ext, stored, w.observed())
	if r := c.memory.keys[adapterKey]; r != nil && len(r.served) != 0 {
		t.Fatalf("a pod gone is remembered: %+v", r.served)
	}
}

// TestSGLangUnknownPodWithNoAdapterWanted: after an operator restart, a model whose adapters
// were all removed unloads on each pod what its status still lists; SGLang's answer to an
// unload of a name it has lists the rest.
func TestSGLangUnknownPodWithNoAdapterWanted(t *testing.T) {
	srv, client := startSGLang(t, "127.0.0.1")
	srv.loaded["sql"] = "org/sql"
	w := newAdapterWorld()
	now := t0
	c := newAdapterController(client, &now)
	ctx := context.Background()
	ext, stored := sglangExt(), &crd.StatusExtensions{LoadedAdapters: []string{"sql"}}
	obs := w.observed(withRestarts(w.pod("p1", "127.0.0.1"), 0))
	got := c.observeAdapters(ctx, adapterKey, w.isvc, ext, stored, obs)
	if made, failed := c.learnAdapters(ctx, adapterKey, adapterAPI(ext), ext, stored, got); made != 1 || failed != 0 || srv.take() != "POST /unload_lora_adapter sql" {
		t.Fatalf("made %d failed %d", made, failed)
	}
	got = c.observeAdapters(ctx, adapterKey, w.isvc, ext, stored, obs)
	if len(got) != 1 || got[0].Err != "" || got[0].Loaded != nil || len(srv.loaded) != 0 {
		t.Fatalf("after the unload: %+v, server has %v", got, srv.loaded)
	}
}

// TestSyncLoadsSGLangAdaptersThenReportsThem drives the whole sync on an SGLang model: the
// first learns the pod by loading the adapter, the second reports it from the answer (no call),
// the third at rest costs no call at all.
func TestSyncLoadsSGLangAdaptersThenReportsThem(t *testing.T) {
	srv, client := startSGLang(t, "127.0.0.1")
	isvc := newISVCObject(1)
	isvc.Annotations = map[string]string{crd.AnnotationV1beta1Spec: `{"engine":"sglang","adapters":[{"name":"sql","storageURI":"hf://org/sql-lora"}]}`}
	want := desired(t, isvc)
	f := newFixture(t, isvc, nil)
	w := newAdapterWorld()
	w.isvc = isvc
	d := readyDeployment(t, isvc)
	d.UID = w.d.UID
	f.caches.d, f.caches.svc, f.caches.hpa = d, want.Service, want.HPA
	f.caches.pods = []*corev1.Pod{withRestarts(w.pod("p1", "127.0.0.1"), 0)}
	f.ctrl.caches = &adapterCaches{fakeCaches: f.caches, rs: []*appsv1.ReplicaSet{w.rs}}
	f.ctrl.modelServers = client

	f.mustSync(t, "first sync", queue.After(recheckAfterActing))
	if calls := srv.take(); calls != "POST /load_lora_adapter sql" {
		t.Fatalf("first sync: model server calls:\n%s", calls)
	}
	f.mustSync(t, "second sync", queue.Done())
	if calls, api := srv.take(), f.calls(); calls != "" || api != "update inferenceservices/status" {
		t.Fatalf("second sync: model server calls:\n%s\nAPI calls: %s", calls, api)
	}
	st := f.storedStatus()
	if c := meta.FindStatusCondition(st.Conditions, crd.ConditionAdaptersReady); c == nil || c.Status != metav1.ConditionTrue || c.Message != "1 adapters listed by 1 ready pods" {
		t.Fatalf("AdaptersReady: %+v", c)
	}
	f.caches.isvc.Status = st
	if out, err := f.sync(); err != nil || out != queue.Done() || srv.take() != "" || f.calls() != "" {
		t.Fatalf("at rest: %+v %v", out, err)
	}
}
