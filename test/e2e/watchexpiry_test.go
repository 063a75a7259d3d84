package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// apiserverMetric sums one family of the API server's own /metrics over the cluster-wide
// series of gvr (the operator's informers' scope and version: a test's namespaced watch, or a
// process still watching another version, is not the operator's), and of verb, unless empty.
func apiserverMetric(t *testing.T, name string, gvr schema.GroupVersionResource, verb string) float64 {
	t.Helper()
	raw, err := env.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(testenv.Ctx(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	fams, err := operator.ParseMetrics(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return operator.SumCounter(fams, name, func(l map[string]string) bool {
		return l["resource"] == gvr.Resource && l["version"] == gvr.Version && l["scope"] == "cluster" && (verb == "" || l["verb"] == verb)
	})
}

// etcdCall posts a JSON request to embedded etcd's grpc-gateway on loopback.
func etcdCall(t *testing.T, path string, req, resp any) {
	t.Helper()
	port, err := os.ReadFile(filepath.Join(env.Cluster.DataDir(), "etcd-client.port"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(req)
	r, err := http.Post("http://127.0.0.1:"+strings.TrimSpace(string(port))+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("etcd %s: %s: %s", path, r.Status, b)
	}
	if err := json.Unmarshal(b, resp); err != nil {
		t.Fatalf("etcd %s: %v: %s", path, err, b)
	}
}

// compactEtcd compacts etcd to its current revision and returns that revision: no read or
// watch can be served from an older one, from the watch cache or from etcd.
func compactEtcd(t *testing.T) string {
	t.Helper()
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	etcdCall(t, "/v3/kv/range", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/")), "limit": 1}, &rng)
	var out map[string]any
	etcdCall(t, "/v3/kv/compaction", map[string]any{"revision": rng.Header.Revision, "physical": true}, &out)
	return rng.Header.Revision
}

// watchExpired says whether a watch of gvr from rv is refused as too old (410 Gone), as the
// operator's reflector's would be: the answer comes at once, before any event.
func watchExpired(t *testing.T, gvr schema.GroupVersionResource, rv string) bool {
	t.Helper()
	w, err := env.Dyn.Resource(gvr).Watch(testenv.Ctx(t, 30*time.Second), metav1.ListOptions{
		ResourceVersion: rv, LabelSelector: "watch-expiry-probe=none", TimeoutSeconds: ptr.To[int64](1),
	})
	if err != nil {
		return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			return apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) || apierrors.IsGone(apierrors.FromObject(ev.Object))
		}
	}
	return false
}

// TestWatchExpiry: the operator is paused (SIGSTOP), its watches end, and it stays paused until
// the API server's watch cache no longer holds the resourceVersions it last saw; etcd is then
// compacted past them too. Meanwhile a spec changes and a child is deleted. On SIGCONT its
// re-watches get 410 "too old resource version", the informers relist, and it converges: the
// deleted Service restored, both spec changes applied, status right.
//
// The watch cache hides a mere pause: it keeps at least 75s of events (growing up to 100k events
// to do so), and a paused client's watch stays open: with the operator stopped, 400 writes of
// 128KiB each reached neither it (its socket held 200KB) nor apiserver_terminated_watchers_total.
// So (1) the operator runs behind a loopback proxy that ends its watches cleanly, as the API
// server ends a watch (a connection error would make client-go relist without trying its
// resourceVersion), and the API server's WATCH count shows its watches gone; and
// (2) writes continue until a watch from a resourceVersion newer than anything the operator got
// is refused with 410: few within the 75s window (they only grow the cache), then batches that
// push the old events out. Bounded: at most 6000 small writes per resource.
func TestWatchExpiry(t *testing.T) {
	quiesce(t)
	ns := env.Namespace(t)
	fillNS := env.CreateNamespace(t, ns+"-filler")
	// Behind a proxy that can end its watches; -v=4: client-go logs why each watch ended.
	proxy := env.StartProxy(t)
	env.op.Kill()
	if err := startOperator(testenv.Ctx(t, 2*time.Minute), "--kubeconfig="+proxy.Kubeconfig, "-v=4"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.op.Kill()
		// Kept for a failure's post-mortem: the next start truncates operator.log.
		_ = os.Rename(filepath.Join(env.Dir, "operator.log"), filepath.Join(env.Dir, "operator-watchexpiry.log"))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := startOperator(ctx); err != nil {
			t.Error(err)
		}
	})
	names := []string{"w-0", "w-1", "w-2", "w-3"}
	for _, n := range names {
		if _, err := env.CreateISVC(context.Background(), ns, n, smallISVC(n, 1)); err != nil {
			t.Fatal(err)
		}
	}
	checkConverged(t, ns, names, 2*time.Minute)
	// A Service the operator's label-scoped informer receives, but owns no part of: the filler
	// for the Services watch. The isvcs' own annotations fill the InferenceServices watch.
	filler := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "filler", Labels: map[string]string{kinds.ManagedByLabel: kinds.ManagedByValue}},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := env.Kube.CoreV1().Services(fillNS).Create(context.Background(), filler, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svcGVR := schema.GroupVersionResource{Version: "v1", Resource: "services"}
	type target struct {
		gvr              schema.GroupVersionResource
		write            func(i int, payload string) (string, error) // returns the new resourceVersion
		watches0, writes int
		boundRV          string
		expired          bool
	}
	patch := func(i int, payload string) []byte {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"watch-expiry/fill": fmt.Sprintf("%d-%s", i, payload)}}})
		return b
	}
	targets := []*target{
		{gvr: crd.Resource, write: func(i int, payload string) (string, error) {
			u, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Patch(context.Background(), names[i%len(names)], types.MergePatchType, patch(i, payload), metav1.PatchOptions{})
			if err != nil {
				return "", err
			}
			return u.GetResourceVersion(), nil
		}},
		{gvr: svcGVR, write: func(i int, payload string) (string, error) {
			s, err := env.Kube.CoreV1().Services(fillNS).Patch(context.Background(), "filler", types.MergePatchType, patch(i, payload), metav1.PatchOptions{})
			if err != nil {
				return "", err
			}
			return s.ResourceVersion, nil
		}},
	}
	write := func(tg *target, count int, payload string) string {
		var rv string
		for k := 0; k < count; k++ {
			var err error
			if rv, err = tg.write(tg.writes, payload); err != nil {
				t.Fatalf("%s write %d: %v", tg.gvr.Resource, tg.writes, err)
			}
			tg.writes++
		}
		return rv
	}
	watches := func(tg *target) int {
		return int(apiserverMetric(t, "apiserver_longrunning_requests", tg.gvr, "WATCH"))
	}
	for _, tg := range targets {
		tg.watches0 = watches(tg)
	}
	oldSvc, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "w-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logBefore := len(readOperatorLog(t))

	paused := time.Now()
	if err := syscall.Kill(env.op.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(env.op.Pid(), syscall.SIGCONT) })
	// (1) Its watches end; the paused process keeps its last resourceVersions.
	proxy.Cut()
	testenv.Eventually(t, time.Minute, "the operator's watches gone from the API server", func() error {
		for _, tg := range targets {
			if w := watches(tg); w >= tg.watches0 {
				// A watch request sent just before SIGSTOP may reach the proxy after the cut;
				// cutting again ends it too (the paused process sends nothing new).
				proxy.Cut()
				return fmt.Errorf("%s: %d watches, %d before the cut", tg.gvr.Resource, w, tg.watches0)
			}
		}
		return nil
	})
	for _, tg := range targets {
		// Written after its watch ended: newer than anything the operator received.
		tg.boundRV = write(tg, 1, "bound")
	}
	bound := time.Now()

	// The changes the operator must not miss, made in the gap.
	if err := env.Kube.CoreV1().Services(ns).Delete(context.Background(), "w-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "patch", "-n", ns, "isvc/w-0", "--type=merge", "-p", `{"spec":{"replicas":2}}`)

	// (2) Until a watch from boundRV is refused. Within the watch cache's 75s window writes only
	// grow the cache, so they are few; past it each write pushes the oldest events out.
	testenv.Eventually(t, 4*time.Minute, "watches from before the pause refused with 410", func() error {
		pending := 0
		for _, tg := range targets {
			if tg.expired {
				continue
			}
			if tg.expired = watchExpired(t, tg.gvr, tg.boundRV); tg.expired {
				continue
			}
			if tg.writes >= 6000 {
				t.Fatalf("%s: watch from %s still served after %d writes", tg.gvr.Resource, tg.boundRV, tg.writes)
			}
			batch := 1
			if time.Since(bound) > 76*time.Second {
				batch = 100
			}
			write(tg, batch, "")
			pending++
		}
		if pending > 0 {
			return fmt.Errorf("%d watches still servable", pending)
		}
		return nil
	})
	rev := compactEtcd(t)
	var figures []string
	for _, tg := range targets {
		figures = append(figures, fmt.Sprintf("%s: %d writes in the pause, a watch from %s refused",
			tg.gvr.Resource, tg.writes, tg.boundRV))
	}
	resumed := time.Now()
	if err := syscall.Kill(env.op.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("paused %.1fs; etcd compacted to revision %s; %s",
		resumed.Sub(paused).Seconds(), rev, strings.Join(figures, "; "))

	// The relist, from the operator's own log: each expired watch, then its cache listed anew.
	var tooOld, populated []string
	testenv.Eventually(t, time.Minute, "the operator to relist after 410", func() error {
		tooOld, populated = nil, nil
		for _, line := range strings.Split(readOperatorLog(t)[logBefore:], "\n") {
			if strings.Contains(line, "too old resource version") {
				tooOld = append(tooOld, line)
			}
			if strings.Contains(line, "Caches populated") {
				populated = append(populated, line)
			}
		}
		svc410 := false
		for _, l := range tooOld {
			svc410 = svc410 || strings.Contains(l, "Service")
		}
		if len(tooOld) < len(targets) || !svc410 || len(populated) < len(targets) {
			return fmt.Errorf("%d too-old watches (Service among them: %v), %d relists", len(tooOld), svc410, len(populated))
		}
		return nil
	})
	for _, l := range append(tooOld, populated...) {
		t.Logf("operator: %s", l[strings.Index(l, "]")+1:])
	}

	// Convergence: the gap's changes, and a change after the resume through the new watches.
	env.Kubectl(t, "patch", "-n", ns, "isvc/w-2", "--type=merge", "-p", `{"spec":{"replicas":2}}`)
	checkConverged(t, ns, names, 2*time.Minute)
	for _, n := range []string{"w-0", "w-2"} {
		testenv.Eventually(t, time.Minute, n+" scaled to 2", func() error {
			d, err := deployment(t, ns, n)
			if err != nil {
				return err
			}
			if r := ptr.Deref(d.Spec.Replicas, 0); r != 2 {
				return fmt.Errorf("replicas %d", r)
			}
			return nil
		})
	}
	svc, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "w-1", metav1.GetOptions{})
	if err != nil || svc.UID == oldSvc.UID {
		t.Fatalf("Service w-1 deleted in the gap not restored: %v", err)
	}
	if !t.Failed() {
		t.Logf("converged %.1fs after SIGCONT: %d isvcs checked with their children, Service deleted in the gap restored, 2 spec changes applied, 0 lost or wrong",
			time.Since(resumed).Seconds(), len(names))
	}
}

// readOperatorLog returns the shared operator's log so far.
func readOperatorLog(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.Dir, "operator.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
