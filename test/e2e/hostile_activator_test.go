package e2e

// The hostile tenant against the activator (issue 49, findings 1 and 2): a stranger in another
// namespace, or an unauthenticated client, tries to reach, wake, keep awake and knock over
// models that are not its own through the one activator every model at zero shares.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// activatorMemoryLimit is manifests/activator/deployment.yaml's memory limit.
const activatorMemoryLimit = 256 << 20

// hostileModel applies a model that scales to zero in ns, named name, with idleSeconds idle
// (awake at first: its first pod is created at once) and gpus GPUs a pod.
func hostileModel(t *testing.T, ns, name string, idle, gpus int) {
	t.Helper()
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: %s
  annotations: {%s: '{"autoscaling":{"minReplicas":0,"maxReplicas":1,"idleSeconds":%d},"replicasUnset":true}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 0, gpusPerReplica: %d}
`, name, crd.AnnotationV1beta1Spec, idle, gpus))
}

// waitReady waits until ns/name's Ready condition has reason (and at least one ready replica
// when awake is true, none otherwise).
func waitReady(t *testing.T, ns, name, reason string, awake bool, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, ns+"/"+name+" "+reason, func() error {
		i, err := env.ISVC(ns, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || (i.Status.ReadyReplicas > 0) != awake {
			return fmt.Errorf("ready %d, Ready %+v", i.Status.ReadyReplicas, c)
		}
		return nil
	})
}

// stranger is a client of the activator with its own connections and a short timeout: the
// tenant of another namespace, or anyone who can reach the activator's Service.
func stranger(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
}

// answer is one response: its status, Retry-After and the OpenAI error's message, if any.
type answer struct {
	code       int
	retryAfter string
	body       string
	errType    string
	message    string
}

// send sends one request and reads its answer (up to 64 KiB of body).
func send(client *http.Client, method, url string, header http.Header, body io.Reader) (answer, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return answer{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	a := answer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(bytes.TrimSpace(b))}
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil {
		a.errType, a.message = e.Error.Type, e.Error.Message
	}
	return a, nil
}

// activatorMetric sums one family of the activator pod's /metrics at host (its pod IP) over
// the series whose labels match (nil: all of them).
func activatorMetric(t *testing.T, host, name string, match func(map[string]string) bool) float64 {
	t.Helper()
	fams, err := operator.Scrape(nil, "http://"+net.JoinHostPort(host, "9090")+"/metrics")
	if err != nil {
		t.Fatalf("activator metrics: %v", err)
	}
	return operator.SumCounter(fams, name, match)
}

func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}

// TestHostileActivatorReach: a tenant of another namespace sends namespace A's model, through
// the activator, what the model's route never forwards: /v1/unload_lora_adapter,
// /collective_rpc and /metrics, naming the model by the path form and by the header. Each is
// refused with 404 in OpenAI's error shape, and the model's pod never sees one of them.
func TestHostileActivatorReach(t *testing.T) {
	t.Parallel()
	addr := installActivator(t)
	victimNS := env.Namespace(t)
	hostileModel(t, victimNS, "victim", 600, 1)
	waitReady(t, victimNS, "victim", reconcile.ReasonAvailable, true, 3*time.Minute)
	client := stranger(time.Minute)

	// The model answers its inference paths through the activator, by path and by header.
	if a, err := send(client, "GET", "http://"+addr+"/"+victimNS+"/victim/v1/models", nil, nil); err != nil || a.code != http.StatusOK {
		t.Fatalf("GET /v1/models by path: %+v %v", a, err)
	}
	hdr := http.Header{kinds.ActivatorModelHeader: {victimNS + "/victim"}}
	if a, err := send(client, "GET", "http://"+addr+"/v1/models", hdr, nil); err != nil || a.code != http.StatusOK {
		t.Fatalf("GET /v1/models by header: %+v %v", a, err)
	}

	unload := `{"lora_name":"sql"}`
	for _, c := range []struct {
		how, method, url string
		header           http.Header
		body             string
	}{
		{"path", "POST", "/" + victimNS + "/victim/v1/unload_lora_adapter", nil, unload},
		{"path", "POST", "/" + victimNS + "/victim/collective_rpc", nil, `{"method":"x"}`},
		{"path", "GET", "/" + victimNS + "/victim/metrics", nil, ""},
		{"header", "POST", "/v1/unload_lora_adapter", hdr, unload},
		{"header", "GET", "/metrics", hdr, ""},
		{"header", "POST", "/v1/load_lora_adapter", hdr, `{"lora_name":"x","lora_path":"/tmp"}`},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		a, err := send(client, c.method, "http://"+addr+c.url, c.header, body)
		if err != nil {
			t.Fatalf("%s %s by %s: %v", c.method, c.url, c.how, err)
		}
		t.Logf("a stranger's %s %s (model by %s): %d %s", c.method, c.url, c.how, a.code, a.body)
		if a.code != http.StatusNotFound || a.errType != "NotFound" || !strings.Contains(a.message, "is not an inference path") {
			t.Errorf("%s %s by %s: %d %q, want 404 NotFound: ... is not an inference path ...", c.method, c.url, c.how, a.code, a.body)
		}
	}
}

// TestHostileActivatorInventedKeys: keys that name no model the activator serves: nothing at
// all, a model that does not scale to zero, a tenant's own Service (not the operator's). Each
// is refused at once with 404 in OpenAI's error shape: no hold, no wake, and no annotation
// written on any Service.
func TestHostileActivatorInventedKeys(t *testing.T) {
	t.Parallel()
	addr := installActivator(t)
	ns := env.Namespace(t)
	// A model at minReplicas 1 (no autoscaling): never routed through the activator.
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: always
spec: {model: Qwen/Qwen3-0.6B, replicas: 1, gpusPerReplica: 1}
---
apiVersion: v1
kind: Service
metadata:
  name: mine
spec:
  ports: [{name: http, port: 8000}]
`)
	env.WaitPhase(t, ns, "always", crd.PhaseReady, 3*time.Minute)
	host := hostOf(addr)
	wakes := activatorMetric(t, host, "activator_wakes_total", nil)
	client := stranger(2 * activatorMaxWait)
	for _, key := range []string{ns + "/nothing", ns + "/always", ns + "/mine", "kube-system/kube-dns", "default/kubernetes"} {
		for _, how := range []string{"path", "header"} {
			url, hdr := "http://"+addr+"/"+key+"/v1/completions", http.Header(nil)
			if how == "header" {
				url, hdr = "http://"+addr+"/v1/completions", http.Header{kinds.ActivatorModelHeader: {key}}
			}
			start := time.Now()
			a, err := send(client, "POST", url, hdr, strings.NewReader(`{"model":"Qwen/Qwen3-0.6B","prompt":"hi","max_tokens":2}`))
			if err != nil {
				t.Fatalf("%s by %s: %v", key, how, err)
			}
			t.Logf("invented key %s by %s: %d after %s: %s", key, how, a.code, time.Since(start).Round(time.Millisecond), a.body)
			if a.code != http.StatusNotFound || a.errType != "NotFound" || !strings.Contains(a.message, "is not a model the activator serves") {
				t.Errorf("%s by %s: %d %q, want 404 NotFound: ... is not a model the activator serves ...", key, how, a.code, a.body)
			}
		}
	}
	if w := activatorMetric(t, host, "activator_wakes_total", nil); w != wakes {
		t.Errorf("invented keys woke %v models", w-wakes)
	}
	ctx := testenv.Ctx(t, time.Minute)
	for _, name := range []string{"always", "mine"} {
		s, err := env.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := s.Annotations[kinds.LastRequestAnnotation]; ok {
			t.Errorf("Service %s/%s: %s written: %s", ns, name, kinds.LastRequestAnnotation, v)
		}
	}
}

// TestHostileActivatorKeepAwake: a stranger sends an idle model at minReplicas 0 requests it
// has no business sending (its /metrics, an adapter unload, by path and header) every few
// seconds, longer than the model's idle window. None of them is the model's demand: the model
// still goes to zero after its window, and no junk request moved its last-request.
func TestHostileActivatorKeepAwake(t *testing.T) {
	t.Parallel()
	addr := installActivator(t)
	ns := env.Namespace(t)
	hostileModel(t, ns, "sleepy", 60, 1)
	waitReady(t, ns, "sleepy", reconcile.ReasonAvailable, true, 3*time.Minute)
	client := stranger(time.Minute)
	hdr := http.Header{kinds.ActivatorModelHeader: {ns + "/sleepy"}}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	codes := map[int]int{}
	var mu sync.Mutex
	wg.Go(func() {
		tick := time.NewTicker(3 * time.Second)
		defer tick.Stop()
		// Bounded: one round every 3s for at most 6 minutes.
		for range 120 {
			for _, r := range []struct {
				method, url string
				h           http.Header
			}{
				{"GET", "/" + ns + "/sleepy/metrics", nil},
				{"POST", "/" + ns + "/sleepy/v1/unload_lora_adapter", nil},
				{"GET", "/metrics", hdr},
				{"POST", "/v1/unload_lora_adapter", hdr},
			} {
				var body io.Reader
				if r.method == "POST" {
					body = strings.NewReader(`{"lora_name":"x"}`)
				}
				a, err := send(client, r.method, "http://"+addr+r.url, r.h, body)
				mu.Lock()
				if err == nil {
					codes[a.code]++
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	start := time.Now()
	waitReady(t, ns, "sleepy", reconcile.ReasonScaledToZero, false, 5*time.Minute)
	stop()
	mu.Lock()
	t.Logf("scaled to zero after %s of a stranger's junk every 3s; the junk's answers: %v", time.Since(start).Round(time.Second), codes)
	mu.Unlock()
}

// TestHostileActivatorFlood: a flood past the caps, bounded in count and time: 1 MiB POSTs
// from many clients at once, to invented keys and to a stranger's own model that cannot
// start (so everything it sends is held). Every flood request is answered 404 or 503 with
// Retry-After; the activator's resident memory stays under its limit; and a legitimate cold
// start of another namespace's model, sent in the middle of the flood, is served.
func TestHostileActivatorFlood(t *testing.T) {
	t.Parallel()
	addr := installActivator(t)
	victimNS := env.Namespace(t)
	strangerNS := env.CreateNamespace(t, victimNS+"-b")
	hostileModel(t, victimNS, "cold", 60, 1)
	hostileModel(t, strangerNS, "huge", 60, 16) // 16 GPUs a pod, 8 a node: never starts
	waitReady(t, victimNS, "cold", reconcile.ReasonScaledToZero, false, 5*time.Minute)
	host := hostOf(addr)
	rss0 := activatorMetric(t, host, "process_resident_memory_bytes", nil)

	const (
		clients = 200
		perKey  = 2   // requests per invented key
		keys    = 300 // invented keys: 600 MiB of bodies before the keys are checked
		real    = 600 // 1 MiB POSTs to the stranger's own model at zero
	)
	mib := bytes.Repeat([]byte("x"), 1<<20)
	copy(mib, `{"model":"Qwen/Qwen3-0.6B","max_tokens":1,"prompt":"`)
	copy(mib[len(mib)-2:], `"}`)
	type job struct{ url string }
	jobs := make(chan job, keys*perKey+real)
	for i := range keys * perKey {
		jobs <- job{fmt.Sprintf("http://%s/%s/invented-%d/v1/completions", addr, strangerNS, i/perKey)}
	}
	for range real {
		jobs <- job{"http://" + addr + "/" + strangerNS + "/huge/v1/completions"}
	}
	close(jobs)

	flood := stranger(2 * activatorMaxWait)
	var mu sync.Mutex
	codes := map[int]int{}
	var bad []string
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for j := range jobs {
				a, err := send(flood, "POST", j.url, nil, bytes.NewReader(mib))
				mu.Lock()
				switch {
				case err != nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
					// Refused before its 1 MiB was read, the connection closed under the
					// client's write: a refusal too.
					codes[-1]++
				case err != nil:
					codes[0]++
					if len(bad) < 5 {
						bad = append(bad, err.Error())
					}
				default:
					codes[a.code]++
					if (a.code != http.StatusNotFound && a.code != http.StatusServiceUnavailable) || (a.code == http.StatusServiceUnavailable && a.retryAfter == "") {
						if len(bad) < 5 {
							bad = append(bad, fmt.Sprintf("%d %q %s", a.code, a.retryAfter, a.body))
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	// Watch the activator's memory while the flood runs.
	var peak float64
	watchDone := make(chan struct{})
	floodDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for range 600 { // 5 minutes at most
			if fams, err := operator.Scrape(nil, "http://"+net.JoinHostPort(host, "9090")+"/metrics"); err == nil {
				peak = max(peak, operator.SumCounter(fams, "process_resident_memory_bytes", nil))
			}
			select {
			case <-floodDone:
				return
			case <-tick.C:
			}
		}
	}()

	// The legitimate cold start, once the flood is under way.
	testenv.Eventually(t, time.Minute, "the flood under way", func() error {
		mu.Lock()
		defer mu.Unlock()
		if n := codes[404] + codes[503] + codes[0]; n < 50 {
			return fmt.Errorf("%d flood requests answered", n)
		}
		return nil
	})
	legit := stranger(3 * time.Minute)
	start := time.Now()
	a, err := send(legit, "POST", "http://"+addr+"/"+victimNS+"/cold/v1/completions", nil, strings.NewReader(`{"model":"Qwen/Qwen3-0.6B","prompt":"hi","max_tokens":2}`))
	t.Logf("the legitimate cold start during the flood: %+v %v after %s", a.code, err, time.Since(start).Round(time.Millisecond))
	wg.Wait()
	close(floodDone)
	<-watchDone
	t.Logf("flood: %d clients, %d invented keys x %d and %d to a model that cannot start, 1 MiB each: %v (-1: reset while sending); activator RSS %.0f MiB before, peak %.0f MiB, limit %d MiB",
		clients, keys, perKey, real, codes, rss0/(1<<20), peak/(1<<20), activatorMemoryLimit>>20)
	for _, r := range []string{"queue_full", "held_namespace", "held_total", "buffer_namespace", "buffer_total", "wait_timeout"} {
		t.Logf("activator_refused_total{reason=%q} %v", r, activatorMetric(t, host, "activator_refused_total", func(l map[string]string) bool { return l["reason"] == r }))
	}
	t.Logf("activator_denied_total %v", activatorMetric(t, host, "activator_denied_total", nil))
	if err != nil || a.code != http.StatusOK {
		t.Errorf("the legitimate cold start: %+v %v, want 200", a, err)
	}
	if len(bad) > 0 || codes[0] > 0 {
		t.Errorf("flood answers other than 404 and 503 with Retry-After: %v (e.g. %v)", codes, bad)
	}
	if peak == 0 || peak >= activatorMemoryLimit {
		t.Errorf("activator RSS peaked at %.0f MiB, limit %d MiB", peak/(1<<20), activatorMemoryLimit>>20)
	}
}

// TestHostileActivatorPolicy: the activator's ServiceAccount may patch only its two
// annotations, and only on Services the operator manages (the ValidatingAdmissionPolicy
// shipped in manifests/activator), whatever its ClusterRole lets it patch.
func TestHostileActivatorPolicy(t *testing.T) {
	t.Parallel()
	installActivator(t)
	ns := env.Namespace(t)
	hostileModel(t, ns, "pm", 600, 1)
	applyYAML(t, ns, `apiVersion: v1
kind: Service
metadata:
  name: mine
spec:
  ports: [{name: http, port: 8000}]
`)
	testenv.Eventually(t, 2*time.Minute, "the model's Service", func() error {
		_, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "pm", metav1.GetOptions{})
		return err
	})
	// kubectl patch reads the object first: the ServiceAccount may read Services here, for the
	// test only (the activator itself patches without a read).
	applyYAML(t, ns, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-services}
rules: [{apiGroups: [""], resources: [services], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: activator-reads-services}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-services}
subjects: [{kind: ServiceAccount, name: inferenceservice-activator, namespace: inferenceservice-system}]
`)
	as := "--as=system:serviceaccount:inferenceservice-system:inferenceservice-activator"
	patch := func(svc, p string) (string, error) {
		out, stderr, err := env.Cluster.Kubectl(testenv.Ctx(t, time.Minute), as, "-n", ns, "patch", "service", svc, "--type=merge", "-p", p)
		return strings.TrimSpace(out + stderr), err
	}
	now := time.Now().UTC().Format(time.RFC3339)
	if out, err := patch("pm", `{"metadata":{"annotations":{"`+kinds.LastRequestAnnotation+`":"`+now+`"}}}`); err != nil {
		t.Fatalf("the activator's own annotation on a managed Service: %v: %s", err, out)
	}
	for _, c := range []struct{ what, svc, patch, want string }{
		{"a label on a managed Service", "pm", `{"metadata":{"labels":{"x":"y"}}}`, "changes only its"},
		{"another annotation on a managed Service", "pm", `{"metadata":{"annotations":{"x":"y"}}}`, "changes only its"},
		{"the selector of a managed Service", "pm", `{"spec":{"selector":{"app":"stolen"}}}`, "changes only its"},
		{"its annotation on a tenant's Service", "mine", `{"metadata":{"annotations":{"` + kinds.LastRequestAnnotation + `":"` + now + `"}}}`, "Services the operator manages"},
	} {
		out, err := patch(c.svc, c.patch)
		t.Logf("as the activator, %s: %v: %s", c.what, err, out)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("as the activator, %s: %v %q, want denied with %q", c.what, err, out, c.want)
		}
	}
}

// TestHostileActivatorSources: an activator installed as a shared cluster should be (the
// header believed only from the gateway's address, the path form off) refuses a tenant's pod
// that names another namespace's model by the header, and everyone's path form, with 403;
// the gateway's request is served. A second activator, run here as a process on 127.0.0.1
// with those flags; the gateway is 127.0.0.1, the tenant's pod another loopback address.
func TestHostileActivatorSources(t *testing.T) {
	t.Parallel()
	installActivator(t) // the ServiceAccount's RBAC and policy; this test's process runs as admin
	ns := env.Namespace(t)
	hostileModel(t, ns, "src", 600, 1)
	waitReady(t, ns, "src", reconcile.ReasonAvailable, true, 3*time.Minute)

	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	addr, probes := free(), free()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, env.activatorBin, "--kubeconfig="+env.Cluster.KubeconfigPath(),
		"--bind-address="+addr, "--metrics-bind-address=0", "--health-probe-bind-address="+probes, "--namespaces="+ns,
		"--model-header-sources=127.0.0.1/32", "--path-sources=")
	log, err := os.Create(filepath.Join(env.Dir, "activator-sources.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait(); log.Close() })
	testenv.Eventually(t, time.Minute, "the second activator ready", func() error {
		resp, err := http.Get("http://" + probes + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})

	gateway := stranger(time.Minute)
	tenantPod := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.9.9")}}).DialContext}}
	hdr := http.Header{kinds.ActivatorModelHeader: {ns + "/src"}}
	body := func() io.Reader {
		return strings.NewReader(`{"model":"Qwen/Qwen3-0.6B","prompt":"hi","max_tokens":2}`)
	}
	a, err := send(gateway, "POST", "http://"+addr+"/v1/completions", hdr, body())
	t.Logf("the gateway (127.0.0.1), by header: %d %v", a.code, err)
	if err != nil || a.code != http.StatusOK {
		t.Fatalf("the gateway's request: %+v %v", a, err)
	}
	for _, c := range []struct {
		who    string
		client *http.Client
		url    string
		h      http.Header
		want   string
	}{
		{"a tenant's pod (127.0.9.9), by header", tenantPod, "http://" + addr + "/v1/completions", hdr, "the X-Activator-Model header is accepted only from the gateway"},
		{"a tenant's pod (127.0.9.9), by path", tenantPod, "http://" + addr + "/" + ns + "/src/v1/completions", nil, "the /namespace/name/ path form is not open to this caller"},
		{"the gateway's address, by path (the path form off)", gateway, "http://" + addr + "/" + ns + "/src/v1/completions", nil, "the /namespace/name/ path form is not open to this caller"},
	} {
		a, err := send(c.client, "POST", c.url, c.h, body())
		if err != nil {
			t.Fatalf("%s: %v", c.who, err)
		}
		t.Logf("%s: %d %s", c.who, a.code, a.body)
		if a.code != http.StatusForbidden || a.errType != "Forbidden" || !strings.Contains(a.message, c.want) {
			t.Errorf("%s: %d %q, want 403 Forbidden: %s", c.who, a.code, a.body, c.want)
		}
	}
}
