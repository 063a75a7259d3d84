package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// drainWorkers send completions back to back through the gateway, each of drainTokens tokens
// (about a second at the fake vLLM's 20 ms a token): with two pods each holds about two
// requests at any time, so a pod deleted has requests in flight, and the gateway sends it more
// until it sees the deletion.
const (
	drainWorkers = 4
	drainTokens  = 50
)

// TestPodDeletionUnderLoad: a model of two replicas under a steady load through the gateway
// (its route to the model's Service), one of its pods deleted as a rolling update, a
// scale-down or a canary's removal deletes one: no request fails. The pod's preStop sleep
// (reconcile.PreStopSleepSeconds) keeps it serving its requests in flight, and those the
// gateway sends before it sees the pod go, until its endpoint is withdrawn; without it the
// kubelet stops the server at once and those requests end in a 502.
func TestPodDeletionUnderLoad(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	eppBin, gwBin := poolBins(t)
	// The test gateway watches InferencePools too: their CRD first; the operator with the
	// gateway's parent and routes to the Services.
	crds := filepath.Join(operator.EPPManifests(eppBin), "crd")
	env.Kubectl(t, "apply", "-f", crds)
	env.Kubectl(t, "wait", "--for=condition=Established", "-f", crds, "--timeout=60s")
	stopOperator(t)
	if err := startOperator(testenv.Ctx(t, 2*time.Minute), "--gateway-parent="+gatewayParent, "--inference-pool=off"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.Kubectl(t, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s")
		stopOperator(t)
		env.Kubectl(t, "delete", "-f", crds, "--wait=true", "--timeout=60s")
		restartOperator(t)
	})
	gwAddr, _, stopGW, err := operator.StartGateway(testenv.Ctx(t, time.Minute), gwBin, filepath.Join(env.Dir, "gateway-drain.log"),
		"--kubeconfig="+env.Cluster.KubeconfigPath(), "--gateway="+gatewayParent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopGW() })

	const name = "d"
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata:
  name: `+name+`
  annotations: {`+crd.AnnotationV1beta1Spec+`: '{"gateway":{"route":"/`+ns+`/`+name+`"}}'}
spec: {model: Qwen/Qwen3-0.6B, replicas: 2, gpusPerReplica: 1}
`)
	testenv.Eventually(t, 3*time.Minute, "two replicas Ready and routed", func() error {
		i, err := env.ISVC(ns, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionRouted)
		if i.Status.ReadyReplicas != 2 || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("ready %d, Routed %+v", i.Status.ReadyReplicas, c)
		}
		return nil
	})
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods", len(pods.Items))
	}
	victim := pods.Items[0]

	load := startDrainLoad("http://"+gwAddr+"/"+ns+"/"+name+"/v1/completions", 90*time.Second)
	defer load.end()
	testenv.Eventually(t, time.Minute, "both pods answering through the gateway", func() error {
		by := map[string]int{}
		for _, r := range load.snapshot() {
			if r.code == http.StatusOK {
				by[r.endpoint]++
			}
		}
		if len(by) < 2 {
			return fmt.Errorf("answered by %v", by)
		}
		return nil
	})

	deleted := time.Now()
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the deleted pod gone and two replicas Ready again", func() error {
		if _, err := env.Kube.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{}); !isNotFound(err) {
			return fmt.Errorf("pod %s still there (%v)", victim.Name, err)
		}
		i, err := env.ISVC(ns, name)
		if err != nil {
			return err
		}
		if i.Status.ReadyReplicas != 2 {
			return fmt.Errorf("ready %d", i.Status.ReadyReplicas)
		}
		return nil
	})
	results := load.end()

	var failed, lines []string
	inFlight, after := 0, 0 // the deleted pod's answers: sent before its deletion and ended after it, sent after it
	for _, r := range results {
		ip, _, _ := strings.Cut(r.endpoint, ":")
		lines = append(lines, fmt.Sprintf("%s-%s %d %s", r.at.Format("15:04:05.000"), r.end.Format("15:04:05.000"), r.code, r.endpoint))
		if r.code != http.StatusOK {
			failed = append(failed, fmt.Sprintf("%s %d from %q: %s", r.at.Format("15:04:05.000"), r.code, r.endpoint, r.body))
			continue
		}
		if ip == victim.Status.PodIP {
			switch {
			case r.at.Before(deleted) && r.end.After(deleted):
				inFlight++
			case !r.at.Before(deleted):
				after++
			}
		}
	}
	t.Logf("requests (sent-answered status endpoint), the pod deleted at %s:\n%s", deleted.Format("15:04:05.000"), strings.Join(lines, "\n"))
	t.Logf("%d requests; the deleted pod %s answered %d in flight at its deletion and %d sent after it", len(results), victim.Status.PodIP, inFlight, after)
	if len(failed) > 0 {
		t.Fatalf("%d of %d requests failed around the deletion of pod %s (%s) at %s: %s", len(failed), len(results),
			victim.Name, victim.Status.PodIP, deleted.Format("15:04:05.000"), strings.Join(failed, "\n"))
	}
}

// drainResult is one request: when it was sent and answered, its status (0: no answer), the
// endpoint the gateway sent it to, and the start of its body when it failed.
type drainResult struct {
	at, end  time.Time
	code     int
	endpoint string
	body     string
}

// drainLoad runs drainWorkers back-to-back senders until ended or for at most limit.
type drainLoad = loadRecord[drainResult]

func startDrainLoad(url string, limit time.Duration) *drainLoad {
	l := newLoadRecord[drainResult]()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: drainWorkers}}
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "prompt": "a pod goes while this is answered", "max_tokens": drainTokens})
	deadline := time.Now().Add(limit)
	for range drainWorkers {
		l.done.Go(func() {
			for time.Now().Before(deadline) {
				select {
				case <-l.stop:
					return
				default:
				}
				r := drainResult{at: time.Now()}
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					r.body = err.Error()
				} else {
					msg, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
					resp.Body.Close()
					r.code, r.endpoint = resp.StatusCode, resp.Header.Get("x-gateway-destination-endpoint")
					// A 200 whose body ends early is a failure too: the server's headers go
					// out before its tokens, so a cut answer keeps its status.
					var answer struct {
						Usage struct {
							CompletionTokens int `json:"completion_tokens"`
						} `json:"usage"`
					}
					if r.code == http.StatusOK && (err != nil || json.Unmarshal(msg, &answer) != nil || answer.Usage.CompletionTokens != drainTokens) {
						r.code = 0
					}
					if r.code != http.StatusOK {
						r.body = fmt.Sprintf("status %d, %d bytes: %q %v", resp.StatusCode, len(msg), msg[:min(len(msg), 200)], err)
					}
				}
				r.end = time.Now()
				l.add(r)
			}
		})
	}
	return l
}
