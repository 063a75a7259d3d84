package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestEngineAdaptersLoadedAtRunTime, one row per engine: a model loads its adapters at run time:
// status.loadedAdapters lists them, AdaptersReady is True, and a completion naming each answers;
// one removed from the spec is unloaded (the same request is then the engine's refusal) with the
// pod kept; the pod's container restarted (a sick GPU for one start), the new process gets the
// other loaded again. vLLM lists its adapters on /v1/models; SGLang v0.5.3 lists none there, so
// the operator knows what an SGLang pod has loaded from the answers of its own loads and unloads.
// TestAdaptersLoadedAtRunTime has vLLM's further cases. Not parallel: the restart is a fault of
// the pod's node.
func TestEngineAdaptersLoadedAtRunTime(t *testing.T) {
	w := useWebhookCRD(t)
	for _, e := range []struct {
		engine string
		// ask is a completion's body on adapter; refused is the engine's words for a request
		// naming an adapter it has not loaded.
		ask     func(adapter string) string
		refused string
	}{
		// vLLM serves each adapter under its name (--lora-modules' and the load's lora_name), and
		// answers another name 404 "The model `NAME` does not exist." (serving_engine.py's
		// _check_model).
		{crd.EngineVLLM, func(a string) string { return `{"model":"` + a + `","prompt":"SELECT","max_tokens":2}` }, "does not exist"},
		// SGLang takes the adapter from the request's lora_path (the adapter's name), and refuses
		// one it has not: "The following requested LoRA adapters are not loaded: {...}"
		// (tokenizer_manager.py's _validate_and_resolve_lora).
		{crd.EngineSGLang, func(a string) string {
			return `{"model":"Qwen/Qwen3-0.6B","prompt":"SELECT","max_tokens":2,"lora_path":"` + a + `"}`
		}, "not loaded"},
	} {
		t.Run(e.engine, func(t *testing.T) { engineAdaptersLoadedAtRunTime(t, w, e.engine, e.ask, e.refused) })
	}
}

func engineAdaptersLoadedAtRunTime(t *testing.T, w *webhookInstall, engine string, ask func(adapter string) string, refused string) {
	ns := env.Namespace(t)
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	apply := func(adapters string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "ad.yaml")
		spec := "apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: ad}\nspec:\n  baseModel: Qwen/Qwen3-0.6B\n  replicas: 1\n  gpusPerReplica: 1\n  engine: " + engine + "\n  adapters: [" + adapters + "]\n"
		if err := os.WriteFile(f, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)
	}
	// complete asks the pod at ip for a completion on adapter and returns the status and body.
	complete := func(ip, adapter string) (int, string, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
		body := ask(adapter)
		resp, err := c.Post("http://"+net.JoinHostPort(ip, fmt.Sprint(reconcile.Port))+"/v1/completions", "application/json", bytes.NewBufferString(body))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b), err
	}
	// state waits until the model is Ready with one ready pod, status.loadedAdapters is want and
	// the pod's completion on each of chat and sql answers 200 when it is wanted, the engine's
	// refusal of an adapter not loaded when not; it returns the pod.
	state := func(what string, want []string) (name, ip, node string) {
		t.Helper()
		testenv.Eventually(t, 90*time.Second, what, func() error {
			b, err := getV1beta1(t, ns, "ad")
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(b.Status.Conditions, crd.ConditionAdaptersReady)
			if b.Status.Phase != crd.PhaseReady || !slices.Equal(slices.Sorted(slices.Values(b.Status.LoadedAdapters)), want) || len(want) > 0 && (c == nil || c.Status != metav1.ConditionTrue) {
				return fmt.Errorf("phase %s, loadedAdapters %v (want %v), AdaptersReady %+v", b.Status.Phase, b.Status.LoadedAdapters, want, c)
			}
			pods, err := readyModelPods(t, ns, "ad")
			if err != nil {
				return err
			}
			if len(pods) != 1 {
				return fmt.Errorf("%d ready pods", len(pods))
			}
			for _, a := range []string{"chat", "sql"} {
				code, body, err := complete(pods[0].Status.PodIP, a)
				if err != nil {
					return err
				}
				if loaded := slices.Contains(want, a); loaded != (code == http.StatusOK) || !loaded && !strings.Contains(body, refused) {
					return fmt.Errorf("completion on %s: %d %s", a, code, body)
				}
			}
			name, ip, node = pods[0].Name, pods[0].Status.PodIP, pods[0].Spec.NodeName
			return nil
		})
		return name, ip, node
	}

	const sql, chat = `{name: sql, storageURI: "hf://org/sql-lora"}`, `{name: chat, storageURI: "hf://org/chat-lora"}`
	created := time.Now()
	apply(sql + ", " + chat)
	first, _, _ := state("sql and chat loaded and listed", []string{"chat", "sql"})
	t.Logf("created to Ready with both adapters loaded: %.1fs", time.Since(created).Seconds())

	// Removing one (not all: no adapter at all is another pod template, without LoRA) unloads it
	// from the running pod.
	apply(sql)
	unloaded, _, node := state("chat unloaded", []string{"sql"})
	if unloaded != first {
		t.Fatalf("removing an adapter replaced the pod: %s, then %s", first, unloaded)
	}

	// The serving container dies once (its node's GPU fails, then heals) and starts again with
	// no adapter: the operator loads sql into the new process.
	restarts := func() int32 {
		pods, err := env.Kube.CoreV1().Pods(ns).List(testenv.Ctx(t, time.Minute), metav1.ListOptions{LabelSelector: "ai.example.com/inferenceservice=ad"})
		if err != nil || len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) == 0 {
			return -1
		}
		return pods.Items[0].Status.ContainerStatuses[0].RestartCount
	}
	before := restarts()
	healed := false
	heal := func() {
		if !healed {
			env.Kubectl(t, "annotate", "node", node, "kubelet.fake/gpu-fault-")
			healed = true
		}
	}
	t.Cleanup(heal)
	env.Kubectl(t, "annotate", "node", node, "--overwrite", "kubelet.fake/gpu-fault=ecc")
	testenv.Eventually(t, time.Minute, "the container restarted", func() error {
		if r := restarts(); r <= before {
			return fmt.Errorf("restarts %d", r)
		}
		return nil
	})
	heal()
	restarted := time.Now()
	if again, _, _ := state("sql loaded into the restarted container", []string{"sql"}); again != first {
		t.Fatalf("the restart replaced the pod: %s, then %s", first, again)
	}
	t.Logf("restart to Ready with sql loaded again: %.1fs (restarts %d)", time.Since(restarted).Seconds(), restarts())
}
