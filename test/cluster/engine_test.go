// The fake vLLM engine as a pod on the local cluster: adapters it loaded listed on /v1/models,
// and a queue that a bounded load grows and that drains by itself.

package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/operator"
)

// enginePod runs vLLM with two slots, one adapter from --lora-modules and runtime LoRA updates.
const enginePod = `apiVersion: v1
kind: Pod
metadata:
  name: engine
spec:
  containers:
  - name: server
    image: vllm/vllm-openai:v0.11.0
    args: ["Qwen/Qwen3-0.6B", "--port", "8000", "--max-num-seqs", "2", "--enable-lora", "--lora-modules", "sql=org/sql-lora"]
    env:
    - {name: VLLM_ALLOW_RUNTIME_LORA_UPDATING, value: "True"}
    ports:
    - {name: http, containerPort: 8000}
    readinessProbe:
      httpGet: {path: /health, port: http}
      periodSeconds: 1
    resources:
      limits: {nvidia.com/gpu: 1}
`

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, string(b)
}

func getBody(url string) (string, error) {
	res, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", res.Status, b)
	}
	return string(b), err
}

// servedModels is the ids /v1/models lists, adapters as id=root.
func servedModels(t *testing.T, base string) map[string]string {
	t.Helper()
	body, err := getBody(base + "/v1/models")
	if err != nil {
		t.Fatalf("/v1/models: %v", err)
	}
	var list struct {
		Data []struct{ ID, Root, Parent string }
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("/v1/models %q: %v", body, err)
	}
	out := map[string]string{}
	for _, m := range list.Data {
		if m.Parent != "" {
			out[m.ID] = m.Root
		} else {
			out[m.ID] = ""
		}
	}
	return out
}

// gauge reads one vLLM gauge of the pod's /metrics, summed over its series.
func gauge(base, name string) (float64, error) {
	fams, err := operator.Scrape(nil, base+"/metrics")
	if err != nil {
		return 0, err
	}
	if fams[name] == nil {
		return 0, fmt.Errorf("no %s in /metrics", name)
	}
	return operator.SumCounter(fams, name, nil), nil
}

func TestServingEngineAdaptersAndQueue(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, enginePod)
	base := "http://" + engineReady(t, ns, "engine") + ":8000"

	// Adapters: the one from --lora-modules, then one loaded at run time, both listed.
	if got := fmt.Sprint(servedModels(t, base)); got != "map[Qwen/Qwen3-0.6B: sql:org/sql-lora]" {
		t.Fatalf("/v1/models at start: %s", got)
	}
	if code, body := post(t, base+"/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"org/chat-lora"}`); code != http.StatusOK {
		t.Fatalf("load_lora_adapter: %d %s", code, body)
	}
	if got := fmt.Sprint(servedModels(t, base)); got != "map[Qwen/Qwen3-0.6B: chat:org/chat-lora sql:org/sql-lora]" {
		t.Fatalf("/v1/models after a runtime load: %s", got)
	}
	if code, body := post(t, base+"/v1/completions", `{"model":"chat","prompt":"hello","max_tokens":2}`); code != http.StatusOK || !strings.Contains(body, `"model":"chat"`) {
		t.Fatalf("completion on the adapter: %d %s", code, body)
	}

	// A bounded load: 8 requests of 40 tokens on 2 slots. Six wait, then the queue drains.
	const requests = 8
	var wg sync.WaitGroup
	codes := make(chan int, requests)
	for i := 0; i < requests; i++ {
		wg.Go(func() {
			code, _ := post(t, base+"/v1/completions", `{"model":"Qwen/Qwen3-0.6B","prompt":"a b c","max_tokens":40}`)
			codes <- code
		})
	}
	peak := 0.0
	eventually(t, 30*time.Second, func() (bool, string) {
		w, err := gauge(base, "vllm:num_requests_waiting")
		peak = max(peak, w)
		return err == nil && w > 0, fmt.Sprintf("waiting %v (%v)", w, err)
	})
	eventually(t, 60*time.Second, func() (bool, string) {
		w, err := gauge(base, "vllm:num_requests_waiting")
		r, err2 := gauge(base, "vllm:num_requests_running")
		return err == nil && err2 == nil && w == 0 && r == 0, fmt.Sprintf("waiting %v running %v (%v %v)", w, r, err, err2)
	})
	wg.Wait()
	close(codes)
	var failed bytes.Buffer
	for c := range codes {
		if c != http.StatusOK {
			fmt.Fprintf(&failed, " %d", c)
		}
	}
	if failed.Len() > 0 {
		t.Fatalf("completions under load answered%s", failed.String())
	}
	t.Logf("queue peaked at %v waiting on 2 slots, drained to 0", peak)
}

// loadPod is vLLM on two slots with a readiness probe of the given timeout, every second.
func loadPod(name string, timeout int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: server
    image: vllm/vllm-openai:v0.11.0
    args: ["Qwen/Qwen3-0.6B", "--port", "8000", "--max-num-seqs", "2"]
    ports:
    - {name: http, containerPort: 8000}
    readinessProbe:
      httpGet: {path: /health, port: http}
      periodSeconds: 1
      timeoutSeconds: %d
      failureThreshold: 3
    resources:
      limits: {nvidia.com/gpu: 1}
`, name, timeout)
}

// TestServingProbeTimeoutUnderLoad: vLLM answers /health on the event loop that processes
// outputs, slower the more requests it holds. Under the same bounded load a readiness probe
// with the API's default 1 s timeout takes a healthy server out of rotation; the 5 s timeout
// the operator sets keeps it in.
func TestServingProbeTimeoutUnderLoad(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, loadPod("tight", 1)+"---\n"+loadPod("tolerant", 5))
	ips := map[string]string{"tight": engineReady(t, ns, "tight"), "tolerant": engineReady(t, ns, "tolerant")}

	// 300 requests of 4 tokens on 2 slots each: about 3 s of /health delay at the start, 12 s
	// to drain.
	const requests = 300
	var wg sync.WaitGroup
	for _, ip := range ips {
		for i := 0; i < requests; i++ {
			wg.Go(func() {
				post(t, "http://"+ip+":8000/v1/completions", `{"model":"Qwen/Qwen3-0.6B","prompt":"a","max_tokens":4}`)
			})
		}
	}
	unready := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for done := false; !done && time.Now().Before(deadline); {
		for name := range ips {
			if jsonpath(t, ns, "pod/"+name, "{.status.containerStatuses[0].ready}") == "false" {
				unready[name] = true
			}
		}
		w, err := gauge("http://"+ips["tight"]+":8000", "vllm:num_requests_waiting")
		w2, err2 := gauge("http://"+ips["tolerant"]+":8000", "vllm:num_requests_waiting")
		done = err == nil && err2 == nil && w == 0 && w2 == 0
		time.Sleep(200 * time.Millisecond) // poll interval while the load runs
	}
	wg.Wait()
	if !unready["tight"] || !strings.Contains(events(t, ns, "tight"), "Client.Timeout exceeded while awaiting headers") {
		t.Errorf("a 1 s readiness timeout kept a loaded server ready (unready %v):\n%s", unready["tight"], events(t, ns, "tight"))
	}
	// (Its start's "connection refused" while loading is expected: only timeouts count.)
	if unready["tolerant"] || strings.Contains(events(t, ns, "tolerant"), "Client.Timeout") {
		t.Errorf("a 5 s readiness timeout took a loaded, healthy server out (unready %v):\n%s", unready["tolerant"], events(t, ns, "tolerant"))
	}
}
