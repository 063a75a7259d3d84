package e2e

// The hostile tenant's suite, the operator as a deputy (issue 49, findings 4 and 7): a tenant
// in one namespace tries to make the operator or the metrics adapter act for it on another
// namespace's model, and a component's ServiceAccount tries what its RBAC allows and its
// admission policy refuses.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// redirector is the tenant's own model server: the tenant picks spec.image, so what answers on
// its pod's IP is the tenant's program. It lists an adapter of the victim's name on /v1/models
// (so the operator plans an unload) and answers every runtime LoRA call with a 307 to the same
// path on the victim's pod, recording what the operator sent it.
type redirector struct {
	to   string // the victim pod's host:port
	base string
	mu   sync.Mutex
	seen []string // "METHOD path body" of each call
}

func (r *redirector) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<16))
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.URL.Path+" "+string(body))
	r.mu.Unlock()
	switch req.URL.Path {
	case "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []map[string]any{
			{"id": r.base, "object": "model", "root": r.base, "parent": nil},
			{"id": "sql", "object": "model", "root": "org/sql-lora", "parent": r.base},
		}})
	case "/v1/load_lora_adapter", "/v1/unload_lora_adapter":
		http.Redirect(w, req, "http://"+r.to+req.URL.Path, http.StatusTemporaryRedirect)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func (r *redirector) calls(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.seen {
		if strings.HasPrefix(s, "POST "+path+" ") {
			n++
		}
	}
	return n
}

// TestHostileDeputyRedirectedAdapterCall: a tenant's model pod answers the operator's adapter
// unload and load with a 307 to a victim model's pod in another namespace. The operator must
// not follow it: the victim keeps its adapter and loads nothing of the tenant's, and the
// tenant's status says the redirect was refused, without the victim's answer in it.
func TestHostileDeputyRedirectedAdapterCall(t *testing.T) {
	victimNS := env.CreateNamespace(t, "hostile-deputy-victim")
	tenantNS := env.CreateNamespace(t, "hostile-deputy-tenant")
	w := useWebhookCRD(t)
	t.Cleanup(func() {
		env.Kubectl(t, "delete", "isvc", "--all", "-n", victimNS, "--wait=true", "--timeout=60s")
		env.Kubectl(t, "delete", "isvc", "--all", "-n", tenantNS, "--wait=true", "--timeout=60s")
	})
	apply := func(ns, manifest string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "isvc.yaml")
		if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	}
	const base = "Qwen/Qwen3-8B"
	apply(victimNS, `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: victim}
spec:
  baseModel: `+base+`
  replicas: 1
  gpusPerReplica: 1
  adapters:
  - {name: sql, storageURI: "hf://org/sql-lora"}
`)
	var victim corev1.Pod
	testenv.Eventually(t, 90*time.Second, "the victim's pod serving its adapter sql", func() error {
		ready, err := readyModelPods(t, victimNS, "victim")
		if err != nil || len(ready) != 1 {
			return fmt.Errorf("%d ready pods (%v)", len(ready), err)
		}
		got, err := podAdapters(ready[0].Status.PodIP)
		if err != nil || got["sql"] != "org/sql-lora" {
			return fmt.Errorf("adapters %v (%v)", got, err)
		}
		victim = ready[0]
		return nil
	})

	// The tenant's image is not a vLLM image: the local kubelet starts no model server for it,
	// and the tenant's program (this redirector) answers on the pod's IP.
	apply(tenantNS, `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: attacker}
spec:
  baseModel: `+base+`
  image: registry.example.com/tenant/redirector:v1
  replicas: 1
  gpusPerReplica: 1
  adapters:
  - {name: decoy, storageURI: "hf://org/decoy-lora"}
`)
	var podIP string
	testenv.Eventually(t, 60*time.Second, "the tenant's pod running with an IP", func() error {
		list, err := env.Kube.CoreV1().Pods(tenantNS).List(testenv.Ctx(t, time.Minute), metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=attacker"})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
				podIP = p.Status.PodIP
				return nil
			}
		}
		return fmt.Errorf("%d pods, none running with an IP", len(list.Items))
	})
	ln, err := net.Listen("tcp", net.JoinHostPort(podIP, fmt.Sprint(reconcile.Port)))
	if err != nil {
		t.Fatal(err)
	}
	r := &redirector{to: net.JoinHostPort(victim.Status.PodIP, fmt.Sprint(reconcile.Port)), base: base}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	t.Logf("tenant pod %s redirects its LoRA API to the victim's pod %s (%s)", podIP, victim.Name, r.to)

	victimLog := func() string {
		out, err := kubectlErr(t, nil, "logs", "-n", victimNS, victim.Name)
		if err != nil {
			t.Fatalf("victim's log: %v: %s", err, out)
		}
		return out
	}
	crossed := func() string {
		var lines []string
		for _, l := range strings.Split(victimLog(), "\n") {
			if strings.Contains(l, "Removed LoRA adapter") || strings.Contains(l, "name 'decoy'") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	const refused = "a redirect, not followed"
	testenv.Eventually(t, 90*time.Second, "the tenant's status saying the redirect was refused", func() error {
		if got := crossed(); got != "" {
			t.Fatalf("the operator followed the tenant pod's redirect to the victim's pod (unloads %d, loads %d asked of the tenant's pod); the victim's log:\n%s",
				r.calls("/v1/unload_lora_adapter"), r.calls("/v1/load_lora_adapter"), got)
		}
		if r.calls("/v1/unload_lora_adapter") == 0 || r.calls("/v1/load_lora_adapter") == 0 {
			return fmt.Errorf("the operator has asked the tenant's pod %d unloads and %d loads",
				r.calls("/v1/unload_lora_adapter"), r.calls("/v1/load_lora_adapter"))
		}
		b, err := getV1beta1(t, tenantNS, "attacker")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, crd.ConditionAdaptersReady)
		if c == nil || c.Reason != reconcile.ReasonAdapterLoadFailed || !strings.Contains(c.Message, refused) {
			return fmt.Errorf("AdaptersReady %+v", c)
		}
		t.Logf("the tenant's AdaptersReady: %s: %s", c.Reason, c.Message)
		if strings.Contains(c.Message, "Success") || strings.Contains(c.Message, "lora adapter") {
			t.Fatalf("the victim's answer landed in the tenant's status: %s", c.Message)
		}
		return nil
	})
	if got := crossed(); got != "" {
		t.Fatalf("the victim's log shows the tenant's calls:\n%s", got)
	}
	got, err := podAdapters(victim.Status.PodIP)
	if err != nil || len(got) != 1 || got["sql"] != "org/sql-lora" {
		t.Fatalf("the victim's pod serves adapters %v (%v), want only sql", got, err)
	}
	t.Logf("the operator asked the tenant's pod %d unloads and %d loads; the victim's pod served none of them",
		r.calls("/v1/unload_lora_adapter"), r.calls("/v1/load_lora_adapter"))
}

// tokenMounts names what of a pod's spec would put a ServiceAccount token in its containers:
// a projected serviceAccountToken volume (the ServiceAccount admission plugin adds
// kube-api-access-* unless the pod opts out), or a Secret volume of a legacy token.
func tokenMounts(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if pr := v.Projected; pr != nil {
			for _, s := range pr.Sources {
				if s.ServiceAccountToken != nil {
					out = append(out, "volume "+v.Name+" (projected token)")
				}
			}
		}
		if v.Secret != nil && strings.Contains(v.Secret.SecretName, "-token-") {
			out = append(out, "volume "+v.Name+" (Secret "+v.Secret.SecretName+")")
		}
	}
	return out
}

// TestHostileDeputyModelPodsMountNoToken: a model server runs its tenant's image and parses
// every prompt; a weights fill runs the same image. Neither calls the API server, so a
// compromised one must find no ServiceAccount token to use: no pod of either carries one.
func TestHostileDeputyModelPodsMountNoToken(t *testing.T) {
	ns := env.Namespace(t)
	w := useWebhookCRD(t)
	t.Cleanup(func() { env.Kubectl(t, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	f := filepath.Join(t.TempDir(), "models.yaml")
	// The cached model's claim names a class no volume serves: its fill pod is created and
	// waits for the claim, which is all this reads of it.
	if err := os.WriteFile(f, []byte(`apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: plain}
spec:
  baseModel: Qwen/Qwen3-0.6B
  replicas: 1
  gpusPerReplica: 1
---
apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: cached}
spec:
  baseModel: Qwen/Qwen3-8B
  replicas: 1
  gpusPerReplica: 1
  cache: {size: 10Gi, storageClassName: no-such-class}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	var model, fill *corev1.Pod
	testenv.Eventually(t, 90*time.Second, "the model's pod and the fill's pod created", func() error {
		list, err := env.Kube.CoreV1().Pods(ns).List(testenv.Ctx(t, time.Minute), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			p := &list.Items[i]
			switch {
			case p.Labels[kinds.InstanceLabel] == "plain":
				model = p
			case p.Labels[reconcile.WeightsLabel] != "" && p.Labels[kinds.InstanceLabel] == "":
				fill = p
			}
		}
		if model == nil || fill == nil {
			return fmt.Errorf("model pod %v, fill pod %v, of %d pods", model != nil, fill != nil, len(list.Items))
		}
		return nil
	})
	for _, p := range []*corev1.Pod{model, fill} {
		if got := tokenMounts(p); len(got) > 0 {
			t.Errorf("pod %s (ServiceAccount %s) has a ServiceAccount token mounted: %s", p.Name, p.Spec.ServiceAccountName, strings.Join(got, ", "))
		} else {
			t.Logf("pod %s: no ServiceAccount token (automountServiceAccountToken %v)", p.Name, ptr.Deref(p.Spec.AutomountServiceAccountToken, true))
		}
	}
}
