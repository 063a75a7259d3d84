package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestAdaptersLoadedAtRunTime: LoRA adapters are loaded into each ready pod through vLLM's
// runtime API, and status.loadedAdapters lists what the pods serve, as read on each pod's own
// /v1/models through its IP. Removing an adapter unloads it from every pod without a rollout;
// a pod added by scaling gets them; a source vLLM cannot load from is a clear condition.
func TestAdaptersLoadedAtRunTime(t *testing.T) {
	ns := modelNamespace(t)
	w := useWebhookCRD(t)
	apply := func(replicas int, adapters ...string) {
		t.Helper()
		spec := fmt.Sprintf("apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: lora}\nspec:\n  baseModel: Qwen/Qwen3-8B\n  replicas: %d\n  gpusPerReplica: 1\n", replicas)
		if len(adapters) > 0 {
			spec += "  adapters:\n"
			for _, a := range adapters {
				name, uri, _ := strings.Cut(a, "=")
				uri, rank, ranked := strings.Cut(uri, " rank=")
				if ranked {
					uri += fmt.Sprintf("\", rank: %s", rank)
					spec += fmt.Sprintf("  - {name: %s, storageURI: \"%s}\n", name, uri)
					continue
				}
				spec += fmt.Sprintf("  - {name: %s, storageURI: %q}\n", name, uri)
			}
		}
		f := filepath.Join(t.TempDir(), "lora.yaml")
		if err := os.WriteFile(f, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	}
	// served waits until every ready pod (pods of them) lists exactly the adapters want on its
	// /v1/models, and status.loadedAdapters lists them (with the model Ready unless
	// anyPhase); it returns the pods' names.
	served := func(what string, pods int, want map[string]string, anyPhase ...bool) []string {
		t.Helper()
		var names []string
		wantNames := slices.Sorted(maps.Keys(want))
		testenv.Eventually(t, 90*time.Second, what, func() error {
			ready, err := readyModelPods(t, ns, "lora")
			if err != nil {
				return err
			}
			if len(ready) != pods {
				return fmt.Errorf("%d ready pods, want %d", len(ready), pods)
			}
			names = names[:0]
			for _, p := range ready {
				got, err := podAdapters(p.Status.PodIP)
				if err != nil {
					return fmt.Errorf("pod %s: %w", p.Name, err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					return fmt.Errorf("pod %s (%s) serves adapters %v, want %v", p.Name, p.Status.PodIP, got, want)
				}
				names = append(names, p.Name)
			}
			b, err := getV1beta1(t, ns, "lora")
			if err != nil {
				return err
			}
			loaded := slices.Sorted(slices.Values(b.Status.LoadedAdapters))
			if b.Status.Phase != crd.PhaseReady && len(anyPhase) == 0 || !slices.Equal(loaded, wantNames) {
				return fmt.Errorf("status phase %s loadedAdapters %v, want %v", b.Status.Phase, b.Status.LoadedAdapters, wantNames)
			}
			return nil
		})
		return names
	}

	created := time.Now()
	apply(1, "sql=hf://org/sql-lora", "chat=hf://org/chat-lora")
	before := served("both adapters served by the pod and listed in status", 1,
		map[string]string{"sql": "org/sql-lora", "chat": "org/chat-lora"})
	t.Logf("created to Ready with both adapters served: %.1fs", time.Since(created).Seconds())
	d, err := env.Kube.AppsV1().Deployments(ns).Get(testenv.Ctx(t, time.Minute), "lora", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	apply(1, "sql=hf://org/sql-lora")
	after := served("chat unloaded from every pod", 1, map[string]string{"sql": "org/sql-lora"})
	if !slices.Equal(before, after) {
		t.Fatalf("removing an adapter replaced the pods: %v, then %v", before, after)
	}
	d2, err := env.Kube.AppsV1().Deployments(ns).Get(testenv.Ctx(t, time.Minute), "lora", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d2.Generation != d.Generation {
		t.Fatalf("removing an adapter changed the Deployment: generation %d, then %d", d.Generation, d2.Generation)
	}

	env.Kubectl(t, w.cache, "scale", "inferenceservices.v1beta1.ai.example.com/lora", "-n", ns, "--replicas=2")
	scaled := served("the new pod loads sql", 2, map[string]string{"sql": "org/sql-lora"})
	if !slices.Contains(scaled, after[0]) {
		t.Fatalf("scaling up replaced the serving pod %s: %v", after[0], scaled)
	}

	// A source vLLM cannot fetch: a clear condition, and what the pods serve is left as it was.
	apply(2, "sql=hf://org/sql-lora", "chat=s3://bucket/chat-lora")
	testenv.Eventually(t, 60*time.Second, "an s3:// adapter reported", func() error {
		b, err := getV1beta1(t, ns, "lora")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, crd.ConditionAdaptersReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reconcile.ReasonAdapterSourceUnsupported ||
			!strings.Contains(c.Message, "s3://bucket/chat-lora") || !slices.Equal(b.Status.LoadedAdapters, []string{"sql"}) {
			return fmt.Errorf("condition %+v, loadedAdapters %v", c, b.Status.LoadedAdapters)
		}
		return nil
	})
	served("sql still served by both pods", 2, map[string]string{"sql": "org/sql-lora"}, true)

	// An adapter the server cannot find: its message in the condition, the others served.
	apply(2, "sql=hf://org/sql-lora", "chat=/models/missing-lora")
	testenv.Eventually(t, 60*time.Second, "a load the server refused, reported with its message", func() error {
		b, err := getV1beta1(t, ns, "lora")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, crd.ConditionAdaptersReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reconcile.ReasonAdapterLoadFailed ||
			!strings.Contains(c.Message, "No adapter found for /models/missing-lora") || !slices.Equal(b.Status.LoadedAdapters, []string{"sql"}) {
			return fmt.Errorf("condition %+v, loadedAdapters %v", c, b.Status.LoadedAdapters)
		}
		return nil
	})

	// An adapter of rank 64 (the local hub's -r64): vLLM started with its default
	// --max-lora-rank 16 refuses it, and the condition says how to state the rank; stated, the
	// pods restart with --max-lora-rank 64 and serve it.
	apply(2, "sql=hf://org/sql-lora", "wide=hf://org/wide-lora-r64")
	testenv.Eventually(t, 60*time.Second, "a rank over the server's --max-lora-rank, reported with the way out", func() error {
		b, err := getV1beta1(t, ns, "lora")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, crd.ConditionAdaptersReady)
		if c == nil || c.Reason != reconcile.ReasonAdapterLoadFailed ||
			!strings.Contains(c.Message, "LoRA rank 64 is greater than max_lora_rank 16") || !strings.Contains(c.Message, "spec.adapters[].rank") {
			return fmt.Errorf("condition %+v", c)
		}
		t.Logf("AdaptersReady: %s", c.Message)
		return nil
	})
	apply(2, "sql=hf://org/sql-lora", "wide=hf://org/wide-lora-r64 rank=64")
	served("rank 64 stated: both adapters served", 2, map[string]string{"sql": "org/sql-lora", "wide": "org/wide-lora-r64"})

	fams, err := env.op.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	count := func(call, result string) float64 {
		return operator.SumCounter(fams, "inferenceservice_operator_model_server_requests_total", func(l map[string]string) bool {
			return l["call"] == call && l["result"] == result
		})
	}
	t.Logf("model server calls in %.0fs: models %v ok, %v failed; load %v ok, %v failed; unload %v ok",
		time.Since(created).Seconds(), count("models", "ok"), count("models", "error"), count("load", "ok"), count("load", "error"), count("unload", "ok"))
}

func getV1beta1(t *testing.T, ns, name string) (*crd.InferenceServiceV1beta1, error) {
	t.Helper()
	u, err := getVersion(t, true, ns, name)
	if err != nil {
		return nil, err
	}
	var b crd.InferenceServiceV1beta1
	return &b, runtimeFromUnstructured(u, &b)
}

// readyModelPods are the isvc's ready pods not being deleted, by name.
func readyModelPods(t *testing.T, ns, isvc string) ([]corev1.Pod, error) {
	t.Helper()
	list, err := env.Kube.CoreV1().Pods(ns).List(testenv.Ctx(t, time.Minute), metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + isvc})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, p)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// podAdapters reads the adapters a model pod serves, name -> path, on its own /v1/models.
func podAdapters(ip string) (map[string]string, error) {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Get("http://" + net.JoinHostPort(ip, fmt.Sprint(reconcile.Port)) + "/v1/models")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/models: %d %s", resp.StatusCode, b)
	}
	var list struct {
		Data []struct {
			ID     string  `json:"id"`
			Root   string  `json:"root"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range list.Data {
		if m.Parent != nil {
			out[m.ID] = m.Root
		}
	}
	return out, nil
}

// TestNewPodReadyOnlyWithItsAdapters: a pod added by scaling takes traffic (is Ready, so in the
// Service's endpoints) only once it serves the model's adapters: a request for an adapter never
// reaches a pod that answers it 404. Loading an adapter takes the local world's 1 s, so a pod
// Ready before its load is seen by the poll below.
func TestNewPodReadyOnlyWithItsAdapters(t *testing.T) {
	ns := modelNamespace(t)
	w := useWebhookCRD(t)
	f := filepath.Join(t.TempDir(), "gate.yaml")
	if err := os.WriteFile(f, []byte("apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: gate}\nspec:\n  baseModel: Qwen/Qwen3-8B\n  replicas: 1\n  gpusPerReplica: 1\n  adapters:\n  - {name: sql, storageURI: \"hf://org/sql-lora\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	testenv.Eventually(t, 90*time.Second, "the first pod serves sql", func() error {
		ready, err := readyModelPods(t, ns, "gate")
		if err != nil || len(ready) != 1 {
			return fmt.Errorf("%d ready pods (%v)", len(ready), err)
		}
		if got, err := podAdapters(ready[0].Status.PodIP); err != nil || got["sql"] == "" {
			return fmt.Errorf("serves %v (%v)", got, err)
		}
		return nil
	})
	env.Kubectl(t, w.cache, "scale", "inferenceservices.v1beta1.ai.example.com/gate", "-n", ns, "--replicas=2")
	// Poll until both pods are Ready with sql; any Ready pod without it is the defect.
	var bare map[string]time.Time = map[string]time.Time{} // pod -> first seen Ready without sql
	deadline := time.Now().Add(90 * time.Second)
	for polls := 0; ; polls++ {
		if time.Now().After(deadline) || polls > 20000 {
			t.Fatal("two pods never served sql")
		}
		ready, err := readyModelPods(t, ns, "gate")
		if err != nil {
			t.Fatal(err)
		}
		serving := 0
		for _, p := range ready {
			got, err := podAdapters(p.Status.PodIP)
			switch {
			case err == nil && got["sql"] != "":
				serving++
				if at, ok := bare[p.Name]; ok {
					t.Errorf("pod %s was Ready for %.2fs before it served sql", p.Name, time.Since(at).Seconds())
					delete(bare, p.Name)
				}
			case bare[p.Name].IsZero():
				bare[p.Name] = time.Now()
			}
		}
		if serving == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(bare) > 0 {
		t.Errorf("pods Ready without sql: %v", bare)
	}
}
