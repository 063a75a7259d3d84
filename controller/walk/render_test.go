package walk

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

// TestRenderWhy: the screens, against golden files (-update rewrites them).
func TestRenderWhy(t *testing.T) {
	crash := Build(model(1, 0).withPods(crashingPod("qwen3-7b6cd-p1")).failed(reconcile.ReasonCrashLoopBackOff))
	crash.Crashed.Log = []string{"Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out of memory"}
	crash.Crashed.Decisive = "torch.OutOfMemoryError: CUDA out of memory"
	for name, r := range map[string]Report{
		"why-quota.txt":   Build(quota(model(3, 2))),
		"why-crash.txt":   crash,
		"why-healthy.txt": Build(model(2, 2).withPods(readyPod("qwen3-7b6cd-p1"), readyPod("qwen3-7b6cd-p2"))),
		"why-queued.txt": func() Report {
			o := model(3, 2).withPods(readyPod("qwen3-7b6cd-p1"), readyPod("qwen3-7b6cd-p2"))
			o.ISVC.Spec.QueueName = "team-a"
			o.ISVC.Status.Phase, o.ISVC.Status.Reason = crd.PhaseProgressing, reconcile.ReasonWaitingForAdmission
			o.ISVC.Status.Conditions = []metav1.Condition{{Type: crd.ConditionAdmitted, Status: metav1.ConditionFalse, Reason: reconcile.ReasonWaitingForAdmission,
				Message: "1 of 3 pods wait for admission in LocalQueue team-a; the nearest has 0 workloads ahead of it in its LocalQueue, 2 workloads in its ClusterQueue"}}
			return Build(o)
		}(),
		"why-slow-start.txt": func() Report {
			o := model(2, 2).withPods(readyPod("qwen3-7b6cd-p1"), readyPod("qwen3-7b6cd-p2"))
			b, _ := json.Marshal(crd.StatusExtensions{LastStart: &crd.StartRecord{Pod: "qwen3-7b6cd-p2", Started: "2026-12-05T14:00:00Z",
				ServingAt: "2026-12-05T14:17:04.750Z", TotalSeconds: 1024.75, Slowest: engine.PhaseWeightsDownload,
				Phases: []crd.StartPhase{{Name: reconcile.PhaseScheduled, Seconds: 1}, {Name: reconcile.PhaseContainerStarted, Seconds: 59},
					{Name: engine.PhaseProcessStart, Seconds: 31.25}, {Name: engine.PhaseWeightsDownload, Seconds: 840.123},
					{Name: engine.PhaseWeightsLoad, Seconds: 25.07}, {Name: engine.PhaseModelLoad, Seconds: 2.339},
					{Name: engine.PhaseCompile, Seconds: 41.26}, {Name: engine.PhaseCUDAGraphs, Seconds: 10},
					{Name: engine.PhaseEngineInit, Seconds: 10.58}, {Name: engine.PhaseAPIServer, Seconds: 3.5}}}})
			o.ISVC.Annotations = map[string]string{crd.AnnotationV1beta1Status: string(b)}
			return Build(o)
		}(),
		"why-rollback.txt": func() Report {
			o := model(2, 2).withPods(readyPod("qwen3-7b6cd-p1"), readyPod("qwen3-7b6cd-p2"))
			b, _ := json.Marshal(crd.StatusExtensions{Rollout: &crd.RolloutStatus{Phase: crd.RolloutRolledBack, Step: 2, Steps: 3, Weight: 0,
				StableRevision: "3f2a9c1b0d", CanaryRevision: "8e7d6c5b4a", FailedRevision: "8e7d6c5b4a",
				Message: "step 2/3: canary error rate 21.0% above 5% (stable 0.0%, 48 canary requests)"}})
			o.ISVC.Annotations = map[string]string{crd.AnnotationV1beta1Status: string(b)}
			o.ISVC.Status.Conditions = append(o.ISVC.Status.Conditions, metav1.Condition{Type: crd.ConditionRollout, Status: metav1.ConditionFalse, Reason: "RolledBack"})
			return Build(o)
		}(),
		"why-operator-down.txt": func() Report {
			o := model(2, 2).withPods(readyPod("qwen3-7b6cd-p1"), unschedulablePod("qwen3-7b6cd-p2"))
			o.Deployment.Status.ReadyReplicas = 1
			o.Operator = Operator{"down", "leader op-0 stopped renewing Lease inferenceservice-system/inferenceservice-operator 5m ago (lease 15s), 0 ready operator pods"}
			return Build(o)
		}(),
	} {
		var b bytes.Buffer
		if err := RenderWhy(&b, r); err != nil {
			t.Fatal(err)
		}
		goldenFile(t, name, b.String())
	}
}

// TestJSON: what --output json prints for why, against a golden file.
func TestJSON(t *testing.T) {
	b, err := json.MarshalIndent(Build(quota(model(3, 2))), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "why-quota.json", string(b)+"\n")
}

// TestRenderList: GPUs asked and serving, the queue against the target, a model without an HPA.
func TestRenderList(t *testing.T) {
	a := model(3, 2).failed(reconcile.ReasonQuotaExceeded)
	b := model(1, 1)
	b.ISVC.Name, b.ISVC.Namespace = "small", "team-b"
	rows := []Row{RowOf(a.ISVC, a.HPA), RowOf(b.ISVC, nil)}
	if rows[0].GPUsRequested != 6 || rows[0].GPUsReady != 4 || rows[0].Queue != "1" || rows[0].Target != "5" {
		t.Fatalf("row %+v", rows[0])
	}
	var out bytes.Buffer
	if err := RenderList(&out, rows, true); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "list.txt", out.String())
	out.Reset()
	if err := RenderListWide(&out, rows, false); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "list-wide.txt", out.String())
}

func goldenFile(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs (-update to accept):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/ from the renderers")
