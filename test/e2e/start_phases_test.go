package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestStartPhases (issue 36): a model's start is told in status.lastStart, phase by phase,
// from the pod's conditions and the lines its vLLM printed; the phases add up to the start's
// wall time (pod creation to "Application startup complete.", as the kubelet stamped it) within
// a second, they are the phases the log holds, and the operator's histogram counted them.
// status.lastStart is v1beta1's: the test runs on the v1beta1 install (the CRD swapped, so not
// in parallel), where the operator watches v1beta1 and writes its status additions.
func TestStartPhases(t *testing.T) {
	ns := env.Namespace(t)
	// Runs after the default CRD and operator are back: the isvc goes through its finalizer.
	t.Cleanup(func() { env.Kubectl(t, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	useWebhookCRD(t)
	// A real pull: an image no node holds yet, on nodes that take 3 s to pull one.
	env.Kubectl(t, "annotate", "nodes", "--all", "--overwrite", "kubelet.fake/pull-seconds=3")
	t.Cleanup(func() { env.Kubectl(t, "annotate", "nodes", "--all", "kubelet.fake/pull-seconds-") })
	applyYAML(t, ns, `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: phases}
spec: {model: Qwen/Qwen3-8B, replicas: 1, gpusPerReplica: 1, image: "vllm/vllm-openai:v0.11.0-`+ns+`"}
`)
	env.WaitPhase(t, ns, "phases", crd.PhaseReady, 90*time.Second)
	var last *crd.StartRecord
	testenv.Eventually(t, 30*time.Second, "status.lastStart", func() error {
		b, err := getV1beta1(t, ns, "phases")
		if err != nil {
			return err
		}
		if last = b.Status.LastStart; last == nil {
			return fmt.Errorf("no lastStart yet")
		}
		return nil
	})
	t.Logf("lastStart: %+v", *last)

	// the wall time, from the API's pod and the kubelet's stamp of uvicorn's line
	created, err := time.Parse(time.RFC3339, env.Kubectl(t, "get", "pod", "-n", ns, last.Pod, "-o", "jsonpath={.metadata.creationTimestamp}"))
	if err != nil {
		t.Fatal(err)
	}
	logs := env.Kubectl(t, "logs", "-n", ns, last.Pod, "--timestamps")
	var served time.Time
	for _, l := range strings.Split(logs, "\n") {
		if stamp, rest, ok := strings.Cut(l, " "); ok && strings.HasSuffix(rest, "INFO:     Application startup complete.") {
			if served, err = time.Parse(time.RFC3339Nano, stamp); err != nil {
				t.Fatal(err)
			}
		}
	}
	if served.IsZero() {
		t.Fatalf("no startup line in the log:\n%s", logs)
	}
	wall := served.Sub(created).Seconds()
	sum := 0.0
	names := map[string]bool{}
	for _, p := range last.Phases {
		sum += p.Seconds
		names[p.Name] = true
	}
	t.Logf("wall %.3fs (created %s, served %s), phases add up to %.3fs, status total %.3fs", wall, created.Format(time.RFC3339), served.Format(time.RFC3339Nano), sum, last.TotalSeconds)
	if math.Abs(sum-wall) > 1 || math.Abs(last.TotalSeconds-wall) > 1 {
		t.Errorf("phases add up to %.3fs, status total %.3fs, the start took %.3fs", sum, last.TotalSeconds, wall)
	}

	// each phase is the pod's or one the log printed
	for _, c := range []struct{ phase, line string }{
		{engine.PhaseProcessStart, "Starting to load model Qwen/Qwen3-8B..."},
		{engine.PhaseWeightsDownload, "Time spent downloading weights for Qwen/Qwen3-8B"},
		{engine.PhaseWeightsLoad, "Loading weights took"},
		{engine.PhaseModelLoad, "Model loading took"},
		{engine.PhaseCompile, "torch.compile takes"},
		{engine.PhaseCUDAGraphs, "Graph capturing finished in"},
		{engine.PhaseEngineInit, "init engine (profile, create kv cache, warmup model) took"},
		{engine.PhaseAPIServer, "Application startup complete."},
	} {
		if !names[c.phase] || !strings.Contains(logs, c.line) {
			t.Errorf("phase %q in status %v, its line %q in the log %v", c.phase, names[c.phase], c.line, strings.Contains(logs, c.line))
		}
	}
	// the local kubelet's Pulled Event of the container (a pull or "already present") splits the pull out
	if !names[reconcile.PhaseScheduled] || !names[reconcile.PhaseImagePulled] || !names[reconcile.PhaseContainerStarted] || len(last.Phases) != 11 {
		t.Errorf("phases %+v", last.Phases)
	}
	for _, p := range last.Phases {
		if p.Name == reconcile.PhaseImagePulled && (p.Seconds < 2.5 || p.Seconds > 4) {
			t.Errorf("image pulled %.3fs, the nodes pull in 3s: %+v", p.Seconds, last.Phases)
		}
	}

	fams, err := env.op.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	fam := fams["inferenceservice_start_phase_seconds"]
	counted := map[string]uint64{}
	if fam != nil {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" {
					counted[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	for name := range names {
		if counted[name] == 0 {
			t.Errorf("inferenceservice_start_phase_seconds has no sample of %q: %v", name, counted)
		}
	}
}
