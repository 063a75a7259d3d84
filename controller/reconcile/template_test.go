package reconcile

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// The model server's pod template, checked against what vLLM v0.11's `vllm serve` (the
// image's entrypoint) and the kubelet do with it.

func templateOf(t *testing.T, gpus int32, ext *crd.SpecExtensions) (*corev1.PodSpec, *corev1.Container) {
	t.Helper()
	w := newWorld(1)
	w.isvc.Spec.GPUsPerReplica = ptr.To(gpus)
	d := DesiredChildren(w.isvc, ext, Features{}).Deployment
	ps := &d.Spec.Template.Spec
	return ps, &ps.Containers[0]
}

// argValue is the value following flag in args, or "" when the flag is absent.
func argValue(args []string, flag string) (string, bool) {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return "", i >= 0
	}
	return args[i+1], true
}

func TestTemplateTensorParallel(t *testing.T) {
	for _, gpus := range []int32{0, 1, 2, 4, 8} {
		_, c := templateOf(t, gpus, &crd.SpecExtensions{})
		v, ok := argValue(c.Args, "--tensor-parallel-size")
		switch {
		case gpus > 1 && v != fmt.Sprint(gpus):
			t.Errorf("gpusPerReplica %d: --tensor-parallel-size %q, want %d (args %v)", gpus, v, gpus, c.Args)
		case gpus <= 1 && ok:
			t.Errorf("gpusPerReplica %d: --tensor-parallel-size passed (args %v)", gpus, c.Args)
		}
	}
}

// TestTemplateParallelism: spec.parallelism passes both sizes as given, on one node, with no
// executor flag (vLLM's default for a world that fits the pod's GPUs is mp); without it the
// args are exactly what they were before the field, so no existing model's pods roll.
func TestTemplateParallelism(t *testing.T) {
	const model = "Qwen/Qwen3-0.6B"
	before := []string{model, "--port", "8000", "--served-model-name", model}
	for _, tc := range []struct {
		gpus int32
		p    *crd.Parallelism
		want []string
	}{
		{1, nil, before},
		{6, nil, append(slices.Clip(before), "--tensor-parallel-size", "6")},
		{6, &crd.Parallelism{TensorParallelSize: 2, PipelineParallelSize: 3}, append(slices.Clip(before), "--tensor-parallel-size", "2", "--pipeline-parallel-size", "3")},
		{3, &crd.Parallelism{TensorParallelSize: 1, PipelineParallelSize: 3}, append(slices.Clip(before), "--tensor-parallel-size", "1", "--pipeline-parallel-size", "3")},
		{1, &crd.Parallelism{TensorParallelSize: 1, PipelineParallelSize: 1}, append(slices.Clip(before), "--tensor-parallel-size", "1", "--pipeline-parallel-size", "1")},
	} {
		ext := &crd.SpecExtensions{Parallelism: tc.p, EngineArgs: []string{"--max-model-len", "8192"}}
		ps, c := templateOf(t, tc.gpus, ext)
		if want := append(tc.want, ext.EngineArgs...); !slices.Equal(c.Args, want) {
			t.Errorf("gpus %d, parallelism %+v: args %q, want %q", tc.gpus, tc.p, c.Args, want)
		}
		if g := c.Resources.Limits[crd.DefaultGPUResource]; g.Value() != int64(tc.gpus) || len(ps.Containers) != 1 {
			t.Errorf("gpus %d, parallelism %+v: one container asking %s GPUs, want the replica's %d", tc.gpus, tc.p, g.String(), tc.gpus)
		}
	}
}

// TestParallelismRollsOnce: setting, changing and removing spec.parallelism each update the
// Deployment's args once (one rollout), and the reconcile is at rest after each.
func TestParallelismRollsOnce(t *testing.T) {
	w := newWorld(2)
	w.isvc.Spec.GPUsPerReplica = ptr.To[int32](6)
	w.apply(w.reconcile().Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged: %s", verbs(out.Actions))
	}
	withoutArgs := slices.Clone(w.obs.Deployment.Spec.Template.Spec.Containers[0].Args)
	for _, tc := range []struct {
		p          *crd.Parallelism
		tensor, pp string
	}{
		{&crd.Parallelism{TensorParallelSize: 2, PipelineParallelSize: 3}, "2", "3"},
		{&crd.Parallelism{TensorParallelSize: 1, PipelineParallelSize: 6}, "1", "6"},
		{nil, "6", ""},
	} {
		w.ext.Parallelism, w.isvc.Generation = tc.p, w.isvc.Generation+1
		gen := w.obs.Deployment.Generation
		out := w.reconcile()
		if got := verbs(out.Actions); got != "update Deployment" {
			t.Fatalf("parallelism %+v: %s, want one Deployment update", tc.p, got)
		}
		w.apply(out.Actions)
		if out := w.reconcile(); len(out.Actions) != 0 {
			t.Fatalf("parallelism %+v: a second round: %s", tc.p, verbs(out.Actions))
		}
		w.podsReady()
		if out := w.reconcile(); len(out.Actions) != 0 {
			t.Fatalf("parallelism %+v: pods ready, then %s", tc.p, verbs(out.Actions))
		}
		d := w.obs.Deployment
		args := d.Spec.Template.Spec.Containers[0].Args
		tp, _ := argValue(args, "--tensor-parallel-size")
		pp, _ := argValue(args, "--pipeline-parallel-size")
		if d.Generation != gen+1 || tp != tc.tensor || pp != tc.pp {
			t.Fatalf("parallelism %+v: generation %d -> %d, tensor %q pipeline %q (args %q)", tc.p, gen, d.Generation, tp, pp, args)
		}
	}
	if got := w.obs.Deployment.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, withoutArgs) {
		t.Fatalf("removed: args %q, want the ones before %q", got, withoutArgs)
	}
}

func TestTemplateModelPositional(t *testing.T) {
	_, c := templateOf(t, 1, &crd.SpecExtensions{})
	if len(c.Args) == 0 || c.Args[0] != "Qwen/Qwen3-0.6B" || slices.Contains(c.Args, "--model") {
		t.Fatalf("vllm serve takes the model as its first, positional argument (--model is deprecated there): %v", c.Args)
	}
	if v, _ := argValue(c.Args, "--served-model-name"); v != "Qwen/Qwen3-0.6B" {
		t.Fatalf("--served-model-name %q, want the model id clients send: %v", v, c.Args)
	}
	if v, _ := argValue(c.Args, "--port"); v != "8000" {
		t.Fatalf("--port %q: %v", v, c.Args)
	}
}

// /health answers on vLLM's event loop, slowly under load: every probe has a timeout, and
// liveness is far looser than readiness so a busy server is taken out of rotation long before
// it could be killed.
func TestTemplateProbesTolerateLoad(t *testing.T) {
	_, c := templateOf(t, 1, &crd.SpecExtensions{})
	s, r, l := c.StartupProbe, c.ReadinessProbe, c.LivenessProbe
	for name, p := range map[string]*corev1.Probe{"startup": s, "readiness": r, "liveness": l} {
		if p == nil || p.TimeoutSeconds < 2 {
			t.Errorf("%s probe timeout %v: the kubelet's default of 1 s fails a busy server", name, p)
		}
	}
	if t.Failed() {
		return
	}
	budget := func(p *corev1.Probe) int32 { return p.PeriodSeconds * p.FailureThreshold }
	if l.TimeoutSeconds <= r.TimeoutSeconds || l.PeriodSeconds <= r.PeriodSeconds || l.FailureThreshold <= r.FailureThreshold || budget(l) < 5*60 {
		t.Errorf("liveness (period %d, timeout %d, threshold %d) must be far looser than readiness (%d, %d, %d)",
			l.PeriodSeconds, l.TimeoutSeconds, l.FailureThreshold, r.PeriodSeconds, r.TimeoutSeconds, r.FailureThreshold)
	}
	if budget(s) < crd.DefaultStartupTimeoutSeconds {
		t.Errorf("startup budget %d s, want at least %d", budget(s), crd.DefaultStartupTimeoutSeconds)
	}
}

// A Service named vllm in the namespace injects VLLM_PORT=tcp://..., and vLLM aborts on it.
func TestTemplateNoServiceLinks(t *testing.T) {
	ps, _ := templateOf(t, 1, &crd.SpecExtensions{})
	if ps.EnableServiceLinks == nil || *ps.EnableServiceLinks {
		t.Fatalf("enableServiceLinks %v, want false", ps.EnableServiceLinks)
	}
}

func TestTemplateShmBounded(t *testing.T) {
	ps, _ := templateOf(t, 4, &crd.SpecExtensions{})
	i := slices.IndexFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == "shm" })
	if i < 0 || ps.Volumes[i].EmptyDir == nil || ps.Volumes[i].EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Fatalf("volumes %+v", ps.Volumes)
	}
	if l := ps.Volumes[i].EmptyDir.SizeLimit; l == nil || l.String() != "2Gi" {
		t.Fatalf("/dev/shm sizeLimit %v, want 2Gi (unbounded, a Memory emptyDir can take the node's memory)", l)
	}
}

// Adapters are loaded at run time: the server allows it, no file vLLM never reads is mounted,
// and no ConfigMap is created.
func TestTemplateRuntimeLoRA(t *testing.T) {
	ext := &crd.SpecExtensions{Adapters: []crd.Adapter{{Name: "sql", StorageURI: "hf://o/sql"}}}
	ps, c := templateOf(t, 1, ext)
	if !slices.Contains(c.Env, corev1.EnvVar{Name: "VLLM_ALLOW_RUNTIME_LORA_UPDATING", Value: "True"}) {
		t.Errorf("env %v: runtime LoRA updating not allowed", c.Env)
	}
	if !slices.Contains(c.Args, "--enable-lora") {
		t.Errorf("args %v: --enable-lora missing", c.Args)
	}
	if v, _ := argValue(c.Args, "--max-cpu-loras"); v != fmt.Sprint(crd.MaxAdapters) {
		t.Errorf("--max-cpu-loras %q: every adapter the spec may list should stay loaded", v)
	}
	if slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.ConfigMap != nil }) {
		t.Errorf("volumes %+v: an adapter list vLLM never reads is mounted", ps.Volumes)
	}
	w := newWorld(1)
	w.ext = *ext
	if got := verbs(w.reconcile().Actions); got != "create Deployment, create Service, create HorizontalPodAutoscaler" {
		t.Errorf("first reconcile with adapters: %s", got)
	}
}

// --max-lora-rank fits the adapters' stated ranks, rounded up to a rank vLLM offers, and is
// left to vLLM's default 16 while that holds them (so such adapters change no argument).
func TestTemplateMaxLoRARank(t *testing.T) {
	for _, tc := range []struct {
		ranks []int32 // 0: unset
		want  string  // "" no flag
	}{
		{[]int32{0}, ""},
		{[]int32{8, 16}, ""},
		{[]int32{8, 17}, "32"},
		{[]int32{64, 0}, "64"},
		{[]int32{300}, "320"},
		{[]int32{512}, "512"},
	} {
		ext := &crd.SpecExtensions{}
		for i, r := range tc.ranks {
			a := crd.Adapter{Name: fmt.Sprint("a", i), StorageURI: "hf://o/a"}
			if r > 0 {
				a.Rank = &r
			}
			ext.Adapters = append(ext.Adapters, a)
		}
		_, c := templateOf(t, 1, ext)
		got, _ := argValue(c.Args, "--max-lora-rank")
		if got != tc.want {
			t.Errorf("ranks %v: --max-lora-rank %q, want %q", tc.ranks, got, tc.want)
		}
	}
}

// The model runs under `vllm serve` whatever the image's entrypoint (the v0.11.0 image's
// api_server ignores a positional model), and a hand edit of the command, seen through the
// cache, is reverted.
func TestServeCommand(t *testing.T) {
	w := newWorld(1)
	w.apply(w.reconcile().Actions)
	c := &w.obs.Deployment.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Command, []string{"vllm", "serve"}) || c.Args[0] != "Qwen/Qwen3-0.6B" {
		t.Fatalf("command %q args %q", c.Command, c.Args)
	}
	d := w.obs.Deployment.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Command = []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}
	w.obs.Deployment = d
	out := w.reconcile()
	if verbs(out.Actions) != "update Deployment" {
		t.Fatalf("hand edit of the command: %s", verbs(out.Actions))
	}
	w.apply(out.Actions)
	if got := w.obs.Deployment.Spec.Template.Spec.Containers[0].Command; !slices.Equal(got, []string{"vllm", "serve"}) {
		t.Fatalf("command kept: %q", got)
	}
}

// TestTemplatePreStopSleep: every model server container (vLLM's, SGLang's, a multi-node
// group's leader and workers) sleeps PreStopSleepSeconds in preStop, within the grace period
// the template leaves at the API server's 30 s default (validation refuses a longer sleep); a
// Deployment stored without the hook drifts, and once set does not, keeping a postStart hook
// someone else put there.
func TestTemplatePreStopSleep(t *testing.T) {
	sleep := func(c *corev1.Container) int64 {
		if h := preStopOf(c); h != nil && h.Sleep != nil {
			return h.Sleep.Seconds
		}
		return -1
	}
	ps, c := templateOf(t, 1, &crd.SpecExtensions{})
	if got := sleep(c); got != PreStopSleepSeconds || ps.TerminationGracePeriodSeconds != nil || PreStopSleepSeconds >= 30 {
		t.Fatalf("vLLM: preStop sleep %d, grace %v", got, ps.TerminationGracePeriodSeconds)
	}
	isvc, ext := sglangISVC(t, crd.InferenceServiceSpec{Model: "Qwen/Qwen3-8B", Replicas: 1, GPUsPerReplica: ptr.To[int32](1)}, crd.SpecExtensions{})
	if got := sleep(&DesiredChildren(isvc, ext, Features{}).Deployment.Spec.Template.Spec.Containers[0]); got != PreStopSleepSeconds {
		t.Fatalf("SGLang: preStop sleep %d", got)
	}
	w := newWorld(1)
	w.isvc.Spec.GPUsPerReplica = ptr.To[int32](4)
	lws := DesiredChildren(w.isvc, &crd.SpecExtensions{MultiNode: &crd.MultiNode{Nodes: 2}}, Features{}).LeaderWorkerSet
	for _, role := range []string{"leaderTemplate", "workerTemplate"} {
		cs, _, _ := unstructured.NestedSlice(lws.Object, "spec", "leaderWorkerTemplate", role, "spec", "containers")
		got, _, _ := unstructured.NestedInt64(cs[0].(map[string]any), "lifecycle", "preStop", "sleep", "seconds")
		if got != PreStopSleepSeconds {
			t.Fatalf("LeaderWorkerSet %s: preStop sleep %d", role, got)
		}
	}

	want := DesiredChildren(newWorld(1).isvc, &crd.SpecExtensions{}, Features{})
	live := want.Deployment.DeepCopy()
	postStart := &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}
	live.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: postStart}
	if !deploymentDrifted(live, want.Deployment, want.Scale) {
		t.Fatal("a Deployment without the preStop hook did not drift")
	}
	setDeployment(live, want.Deployment, want.Scale)
	if deploymentDrifted(live, want.Deployment, want.Scale) {
		t.Fatal("drifted after set")
	}
	if l := live.Spec.Template.Spec.Containers[0].Lifecycle; l.PostStart != postStart || sleep(&live.Spec.Template.Spec.Containers[0]) != PreStopSleepSeconds {
		t.Fatalf("after set: %+v", l)
	}
}
